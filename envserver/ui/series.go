package ui

import (
	"strconv"
	"sync"
	"time"
)

// Sample is one point of the pool gauges: levels as sampled, rates from the
// counters' change since the previous sample.
type Sample struct {
	Seq      int64   `json:"seq"`
	T        int64   `json:"t"` // unix milliseconds
	Warm     int     `json:"warm"`
	Leased   int     `json:"leased"`
	Booting  int     `json:"booting"`
	Replicas int     `json:"replicas"`
	ResetsPS float64 `json:"resets_ps"`
	StepsPS  float64 `json:"steps_ps"`
	Deaths   uint64  `json:"deaths"` // running total
}

// series is a fixed-size ring of samples: memory is bounded however long the
// server runs.
type series struct {
	mu   sync.Mutex
	ring []Sample
	n    int64 // samples ever added; the next one's Seq is n+1
	prev Counters
	at   time.Time
}

func newSeries(n int) *series { return &series{ring: make([]Sample, n)} }

func (s *series) add(now time.Time, c Counters) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sm := Sample{T: now.UnixMilli(), Warm: c.Warm, Leased: c.Leased, Booting: c.Booting, Replicas: c.Replicas, Deaths: c.Deaths}
	if s.n > 0 {
		if dt := now.Sub(s.at).Seconds(); dt > 0 {
			sm.ResetsPS = float64(sub(c.Resets, s.prev.Resets)) / dt
			sm.StepsPS = float64(sub(c.Steps, s.prev.Steps)) / dt
		}
	}
	s.n++
	sm.Seq = s.n
	s.ring[(s.n-1)%int64(len(s.ring))] = sm
	s.prev, s.at = c, now
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0
	}
	return a - b
}

// SeriesReply is the samples after a sequence number, oldest first.
type SeriesReply struct {
	Seq     int64    `json:"seq"` // the newest sample's sequence number
	Cap     int      `json:"cap"` // how many samples the server keeps
	Samples []Sample `json:"samples"`
}

// since returns the samples with Seq > after that the ring still holds.
func (s *series) since(after int64) SeriesReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	size := int64(len(s.ring))
	first := s.n - size + 1
	if first < 1 {
		first = 1
	}
	if after+1 > first {
		first = after + 1
	}
	out := SeriesReply{Seq: s.n, Cap: len(s.ring), Samples: []Sample{}}
	for q := first; q <= s.n; q++ {
		out.Samples = append(out.Samples, s.ring[(q-1)%size])
	}
	return out
}

func parseInt(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}
