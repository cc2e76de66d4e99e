package envserver

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/trajectory"
)

type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, format)
}

func (l *logSink) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestRecorderStoresCompressed records a raw frame (in the frame cache's
// S2 form) and a png frame through a real store: the raw one lands
// compressed and decodes to the same bytes, the
// png one as delivered; close returns with both on disk.
func TestRecorderStoresCompressed(t *testing.T) {
	st, err := trajectory.NewStore(t.TempDir(), trajectory.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var logs logSink
	r := newFrameRecorder(st, logs.logf, prometheus.NewRegistry())
	raw := bytes.Repeat([]byte{1, 2, 3, 4, 5, 6}, 100000)
	pngData := []byte("\x89PNG not really")
	ctx := context.Background()
	r.put(ctx, recordJob{hash: strings.Repeat("ab", 16), format: wire.FormatRawS2, data: compressRaw(raw)})
	r.put(ctx, recordJob{hash: strings.Repeat("cd", 16), format: aci.FormatPNG, data: pngData})
	r.close()
	stored, err := st.Frame(strings.Repeat("ab", 16), wire.FormatRawS2)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) >= len(raw)/10 {
		t.Errorf("raw frame stored in %d bytes; want it compressed (< %d)", len(stored), len(raw)/10)
	}
	back, err := decodeRawS2(nil, stored)
	if err != nil || !bytes.Equal(back, raw) {
		t.Errorf("raw frame round trip: err %v, equal %v", err, bytes.Equal(back, raw))
	}
	if _, err := st.Frame(strings.Repeat("ab", 16), aci.FormatRaw); err == nil {
		t.Error("raw frame also stored uncompressed")
	}
	if got, err := st.Frame(strings.Repeat("cd", 16), aci.FormatPNG); err != nil || !bytes.Equal(got, pngData) {
		t.Errorf("png frame: got %q, %v", got, err)
	}
	if got := testutil.ToFloat64(r.m.written); got != 2 {
		t.Errorf("recorded: got %v; want 2", got)
	}
	// After close, a frame is dropped, and says so.
	r.put(ctx, recordJob{hash: strings.Repeat("ef", 16), format: aci.FormatPNG, data: pngData})
	if got := testutil.ToFloat64(r.m.dropped); got != 1 || !logs.has("shutting down") {
		t.Errorf("after close: dropped %v, logged %v; want 1 and a log line", got, logs.has("shutting down"))
	}
}

// TestRecorderFullQueueWaitsThenDrops fills the queue of a recorder whose
// writer is not running: the next put waits (counted, logged) and, when its
// deadline passes, drops the frame (counted, logged).
func TestRecorderFullQueueWaitsThenDrops(t *testing.T) {
	st, err := trajectory.NewStore(t.TempDir(), trajectory.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var logs logSink
	r := &frameRecorder{store: st, logf: logs.logf, q: make(chan recordJob, 1), done: make(chan struct{})}
	r.m = newRecordMetrics(r, prometheus.NewRegistry())
	r.put(context.Background(), recordJob{hash: strings.Repeat("ab", 16), format: aci.FormatPNG, data: []byte("x")})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.put(ctx, recordJob{hash: strings.Repeat("cd", 16), format: aci.FormatPNG, data: []byte("y")})
	}()
	// The second put is waiting once it has counted the full queue.
	for testutil.ToFloat64(r.m.full) == 0 {
		select {
		case <-done:
			t.Fatal("put returned with the queue full and its context live")
		default:
		}
		runtime.Gosched()
	}
	cancel()
	<-done
	if got := testutil.ToFloat64(r.m.dropped); got != 1 {
		t.Errorf("dropped: got %v; want 1", got)
	}
	if !logs.has("queue full") || !logs.has("past the step's deadline") {
		t.Errorf("logs %q; want the full queue and the drop logged", logs.lines)
	}
	// The writer, started now, still stores what was queued.
	go r.run()
	r.close()
	if _, err := st.Frame(strings.Repeat("ab", 16), aci.FormatPNG); err != nil {
		t.Errorf("queued frame: %v", err)
	}
}
