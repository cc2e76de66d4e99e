package envserver

import (
	"context"
	"sync"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
)

// A batch is one reset, step, observe or fork request over several envs:
// checked as a whole, fanned out one slot per env, and answered with one
// reply that carries each frame once.

// batch is the shared state of one reset/step/fork request: its observation
// settings and the frames its reply will carry.
type batch struct {
	obs  api.Observe
	have map[string]bool

	mu   sync.Mutex
	lent []*[]byte  // rawBufs this batch's frames were decoded into
	kept []*keptRaw // envs' kept frames this batch's reply delivers
}

func (s *Server) newBatch(o *api.Observe, have []string) (*batch, error) {
	obs, err := s.observeFor(o)
	if err != nil {
		return nil, err
	}
	b := &batch{obs: obs, have: make(map[string]bool, len(have))}
	for _, h := range have {
		b.have[h] = true
	}
	return b, nil
}

func (s *Server) checkBatch(n int) error {
	if n == 0 {
		return aci.Errorf(aci.CodeBadRequest, "empty batch")
	}
	if n > s.cfg.MaxBatch {
		return aci.Errorf(aci.CodeBatchTooLarge, "batch of %d over the limit of %d (server setting max_batch)", n, s.cfg.MaxBatch)
	}
	return nil
}

// distinctEnvs rejects a batch that names one env twice.
func distinctEnvs(n int, id func(int) string) error {
	seen := make(map[string]bool, n)
	for i := 0; i < n; i++ {
		if v := id(i); v != "" {
			if seen[v] {
				return aci.Errorf(aci.CodeBadRequest, "env %q listed twice in one batch", v)
			}
			seen[v] = true
		}
	}
	return nil
}

// fanOut runs fn for each of n slots concurrently, bounded by the server's
// concurrency limit. fn reports failures inside its slot.
//
// groups (nil, or one key per slot) marks slots expected to show the same
// screen, such as replicas forked from one checkpoint: the first slot of each
// group runs alone first, so the others find its frame in the shared cache
// and N replicas cost one encode.
func (s *Server) fanOut(ctx context.Context, n int, groups []string, fn func(ctx context.Context, i int)) {
	var first, rest []int
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		if groups == nil || groups[i] == "" || !seen[groups[i]] {
			if groups != nil {
				seen[groups[i]] = true
			}
			first = append(first, i)
		} else {
			rest = append(rest, i)
		}
	}
	s.runWave(ctx, first, fn)
	s.runWave(ctx, rest, fn)
}

func (s *Server) runWave(ctx context.Context, idx []int, fn func(ctx context.Context, i int)) {
	var wg sync.WaitGroup
	for _, i := range idx {
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			// Shutting down: the remaining slots run inline and fail fast
			// on the cancelled context.
			fn(ctx, i)
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer func() {
				if r := recover(); r != nil {
					s.cfg.Logf("envserver: panic in batch slot %d: %v", i, r)
				}
				<-s.sem
				wg.Done()
			}()
			fn(ctx, i)
		}(i)
	}
	wg.Wait()
}

// slot is one env's outcome within a batch: its result and, unless the
// client already has it, the encoded frame its observation shows.
type slot struct {
	res      api.Result
	data     []byte
	replayed bool // the stored reply to a resent step (replay.go): nothing ran
}

// reply assembles a batch reply: every frame once, none the client has.
func (s *Server) reply(b *batch, slots []slot) *batchReply {
	r := &api.BatchReply{Results: make([]api.Result, len(slots)), Frames: map[string][]byte{}}
	for i, sl := range slots {
		r.Results[i] = sl.res
		if sl.res.Obs == nil {
			continue
		}
		h := sl.res.Obs.Frame
		if b.have[h] {
			s.m.framesSent.WithLabelValues("skipped_have").Inc()
			continue
		}
		if _, dup := r.Frames[h]; dup || sl.data == nil {
			continue
		}
		r.Frames[h] = sl.data
		s.m.framesSent.WithLabelValues("sent").Inc()
	}
	return &batchReply{r, b}
}

// failSlot is a step that failed as a whole, for the request or the
// infrastructure: an error and nothing else.
func failSlot(envID string, err error) slot {
	return slot{res: api.Result{EnvID: envID, Error: wireError(err)}}
}

// batchReply is a batch's reply as written, with the buffers its raw
// frames lend (encoded as the api.BatchReply it embeds).
type batchReply struct {
	*api.BatchReply
	b *batch
}

// release hands the reply's raw frame buffers back; call it once the reply
// is written and nothing refers to its frames.
func (r *batchReply) release() {
	r.b.mu.Lock()
	lent, kept := r.b.lent, r.b.kept
	r.b.lent, r.b.kept = nil, nil
	r.b.mu.Unlock()
	for _, p := range lent {
		rawBufs.Put(p)
	}
	for _, kr := range kept {
		kr.lent.Store(false)
	}
}

func outcomeOf(e *aci.Error) string {
	if e == nil {
		return "ok"
	}
	return string(e.Code)
}
