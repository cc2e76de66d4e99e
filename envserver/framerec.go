package envserver

import (
	"sync"

	"github.com/shinken-rl/shinken/trajectory"
)

// frameRecorder stores observed frames beside the trajectories off the
// step's path: a step hands the encoded bytes over (they are immutable,
// shared with the frame cache) and returns; one writer goroutine drains
// the queue in batches, each frame crash-safe as the store writes it. The
// queue is bounded in bytes: past it a frame is dropped and counted
// (shinken_frames_recorded_total{result="dropped"}), never a step delayed.
type frameRecorder struct {
	store *trajectory.Store
	max   int64
	logf  func(string, ...any)
	count func(result string)

	mu     sync.Mutex
	queue  []frameJob
	queued map[frameKey]bool
	bytes  int64
	closed bool
	wake   chan struct{} // buffered 1
	done   chan struct{} // closed when the writer has drained and exited
}

type frameJob struct {
	key  frameKey
	data []byte
}

// maxFrameQueue bounds the bytes of frames waiting to be written.
const maxFrameQueue = 256 << 20

func newFrameRecorder(store *trajectory.Store, max int64, logf func(string, ...any), count func(string)) *frameRecorder {
	r := &frameRecorder{store: store, max: max, logf: logf, count: count, queued: map[frameKey]bool{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	go r.run()
	return r
}

// put queues a frame; it never blocks.
func (r *frameRecorder) put(k frameKey, data []byte) {
	r.mu.Lock()
	switch {
	case r.closed || r.queued[k]:
		r.mu.Unlock()
		return
	case r.bytes+int64(len(data)) > r.max:
		r.mu.Unlock()
		r.count("dropped")
		return
	}
	r.queue = append(r.queue, frameJob{k, data})
	r.queued[k] = true
	r.bytes += int64(len(data))
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *frameRecorder) run() {
	defer close(r.done)
	for {
		<-r.wake
		for {
			r.mu.Lock()
			batch := r.queue
			r.queue = nil
			closed := r.closed
			r.mu.Unlock()
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			for _, j := range batch {
				if err := r.store.PutFrame(j.key.hash, j.key.format, j.data); err != nil {
					r.logf("envserver: storing frame %s: %v", j.key.hash, err)
					r.count("error")
				} else {
					r.count("stored")
				}
				r.mu.Lock()
				delete(r.queued, j.key)
				r.bytes -= int64(len(j.data))
				r.mu.Unlock()
			}
		}
	}
}

// close writes what is queued and stops the writer.
func (r *frameRecorder) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		<-r.done
		return
	}
	r.closed = true
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	<-r.done
}
