package envserver

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shinken-rl/shinken/trajectory"
)

// recordQueue is how many frames may wait to be written; recordBatch is
// the most the writer takes in one go (their files share a journal commit,
// each directory one fsync); recordLinger is how long the writer waits
// after a batch's first frame for more to join it: a frame is on disk that
// much later, and an env stepping 100 times a second fills a batch of
// several instead of paying a commit per frame.
const (
	recordQueue  = 32
	recordBatch  = 16
	recordLinger = 50 * time.Millisecond
)

// recordJob is one frame (or accessibility tree) to store.
type recordJob struct {
	hash, format string
	data         []byte
}

// frameRecorder stores what record_frames keeps off the step's path
// (docs/architecture.md, "Recording frames"): a step hands the frame to a
// bounded queue and goes on; one writer takes batches and writes them with
// one directory fsync per batch. Raw frames come already S2-compressed
// (wire.FormatRawS2), the form the frame cache keeps them in. When the queue is
// full the step waits for room (counted and logged); a frame is dropped
// only when the step's deadline passes first or the server is shutting
// down, and then it is counted and logged, never silently.
type frameRecorder struct {
	store *trajectory.Store
	logf  func(string, ...any)
	m     *recordMetrics

	mu     sync.RWMutex // held shared by senders; close takes it whole
	closed bool
	q      chan recordJob
	done   chan struct{}

	logMu   sync.Mutex
	lastLog map[string]time.Time // by message
}

type recordMetrics struct {
	written  prometheus.Counter
	failed   prometheus.Counter
	full     prometheus.Counter
	dropped  prometheus.Counter
	queued   prometheus.GaugeFunc
	batchSec prometheus.Histogram
}

func newFrameRecorder(store *trajectory.Store, logf func(string, ...any), reg *prometheus.Registry) *frameRecorder {
	r := &frameRecorder{store: store, logf: logf, q: make(chan recordJob, recordQueue), done: make(chan struct{})}
	r.m = newRecordMetrics(r, reg)
	go r.run()
	return r
}

func newRecordMetrics(r *frameRecorder, reg *prometheus.Registry) *recordMetrics {
	m := &recordMetrics{
		written: prometheus.NewCounter(prometheus.CounterOpts{Name: "shinken_frames_recorded_total", Help: "Frames and trees record_frames handed to the store."}),
		failed:  prometheus.NewCounter(prometheus.CounterOpts{Name: "shinken_frames_record_failures_total", Help: "Batches of frames the store could not write in full (the log says why)."}),
		full:    prometheus.NewCounter(prometheus.CounterOpts{Name: "shinken_frames_record_queue_full_total", Help: "Steps that found the recording queue full and waited for room."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "shinken_frames_record_dropped_total", Help: "Frames not recorded: the queue stayed full past the step's deadline, or the server was shutting down."}),
		queued: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shinken_frames_record_queued", Help: "Frames waiting to be written."},
			func() float64 { return float64(len(r.q)) }),
		batchSec: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "shinken_frames_record_batch_seconds", Help: "Time to compress and write one batch of recorded frames.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5}}),
	}
	for _, c := range []prometheus.Collector{m.written, m.failed, m.full, m.dropped, m.queued, m.batchSec} {
		reg.MustRegister(c)
	}
	return m
}

// put queues a job; it waits for room while ctx allows.
func (r *frameRecorder) put(ctx context.Context, j recordJob) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		r.m.dropped.Inc()
		r.logLimited("envserver: frame %s.%s not recorded: the server is shutting down", j.hash, j.format)
		return
	}
	select {
	case r.q <- j:
		return
	default:
	}
	r.m.full.Inc()
	r.logLimited("envserver: frame recording queue full (%d frames): the step waits for the disk", recordQueue)
	select {
	case r.q <- j:
	case <-ctx.Done():
		r.m.dropped.Inc()
		r.logLimited("envserver: frame %s.%s not recorded: the recording queue stayed full past the step's deadline", j.hash, j.format)
	}
}

// logLimited logs each message at most once a second.
func (r *frameRecorder) logLimited(format string, args ...any) {
	r.logMu.Lock()
	if r.lastLog == nil {
		r.lastLog = map[string]time.Time{}
	}
	ok := time.Since(r.lastLog[format]) >= time.Second
	if ok {
		r.lastLog[format] = time.Now()
	}
	r.logMu.Unlock()
	if ok {
		r.logf(format, args...)
	}
}

// close stops taking jobs and returns once everything queued is written.
func (r *frameRecorder) close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.q)
	}
	r.mu.Unlock()
	<-r.done
}

func (r *frameRecorder) run() {
	defer close(r.done)
	batch := make([]recordJob, 0, recordBatch)
	linger := time.NewTimer(recordLinger)
	defer linger.Stop()
	for j := range r.q {
		batch = append(batch[:0], j)
		linger.Reset(recordLinger)
	gather:
		for len(batch) < recordBatch {
			select {
			case j, ok := <-r.q:
				if !ok {
					break gather // shutting down: write what there is
				}
				batch = append(batch, j)
			case <-linger.C:
				break gather
			}
		}
		r.write(batch)
	}
}

func (r *frameRecorder) write(batch []recordJob) {
	t0 := time.Now()
	files := make([]trajectory.FrameFile, 0, len(batch))
	seen := map[string]bool{}
	for _, j := range batch {
		f := trajectory.FrameFile{Hash: j.hash, Format: j.format, Data: j.data}
		if k := f.Hash + "." + f.Format; !seen[k] {
			seen[k] = true
			files = append(files, f)
		}
	}
	if err := r.store.PutFrames(files); err != nil {
		r.m.failed.Inc()
		r.logf("envserver: storing frames: %v", err)
	}
	r.m.written.Add(float64(len(files)))
	r.m.batchSec.Observe(time.Since(t0).Seconds())
}
