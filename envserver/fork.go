package envserver

import (
	"context"
	"fmt"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/trajectory"
)

// origin is the state the children of a fork start from: a live env's
// now, or a named checkpoint's.
type origin struct {
	task             *configs.Instance
	envID, episodeID string
	step, maxSteps   int
	frame            string
	coords           *aci.Coords
	display          *aci.Display
	checkpoint       string
	pool             *pool.Pool // the origin's screen size's pool
	screen           api.Size
}

func (s *Server) fork(ctx context.Context, req *api.ForkRequest) (*batchReply, error) {
	if req.N < 1 {
		return nil, aci.Errorf(aci.CodeBadRequest, "fork n must be at least 1")
	}
	if (req.EnvID == "") == (req.Checkpoint == "") {
		return nil, aci.Errorf(aci.CodeBadRequest, "fork: give env_id or checkpoint (one of them)")
	}
	if err := s.checkBatch(req.N); err != nil {
		return nil, err
	}
	b, err := s.newBatch(req.Observe, req.Have)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ResetTimeout)
	defer cancel()
	var leases []*pool.Lease
	var o origin
	if req.Checkpoint != "" {
		ck, done, err := s.useCheckpoint(req.Checkpoint)
		if err != nil {
			return nil, err
		}
		defer done()
		o = origin{task: ck.task, envID: ck.envID, episodeID: ck.episodeID, step: ck.step, maxSteps: ck.maxSteps,
			frame: ck.frame, coords: ck.coords, display: ck.display, checkpoint: ck.id, pool: ck.pool, screen: ck.screen}
		leases, err = ck.pool.ForkSnapshot(ctx, ck.snap, req.N)
		if err != nil {
			s.m.forks.WithLabelValues(string(codeOf(err))).Add(float64(req.N))
			return nil, fmt.Errorf("fork checkpoint %s: %w", ck.id, err)
		}
	} else {
		src, err := s.getEnv(req.EnvID)
		if err != nil {
			return nil, err
		}
		src.mu.Lock()
		switch {
		case src.closed || src.ep == nil:
			src.mu.Unlock()
			return nil, aci.Errorf(aci.CodeNotFound, "env %q has no episode to fork", req.EnvID)
		case src.ep.over:
			src.mu.Unlock()
			return nil, aci.Errorf(aci.CodeEpisodeOver, "episode %s is over: fork a live episode", src.ep.traj.EpisodeID)
		case src.lease == nil || src.lease.Err() != nil:
			s.died(src, src.leaseErr(), trajectory.SandboxDied)
			src.mu.Unlock()
			return nil, aci.Errorf(aci.CodeSandboxDied, "env %q: sandbox died", req.EnvID)
		}
		p := s.envPool(src)
		leases, err = p.Fork(ctx, src.lease, req.N)
		o = origin{task: src.task, envID: src.id, episodeID: src.ep.traj.EpisodeID, step: src.ep.step, maxSteps: src.ep.maxSteps,
			frame: src.lastFrame, coords: src.coords, display: src.display, pool: p, screen: src.screen}
		src.mu.Unlock()
		if err != nil {
			s.m.forks.WithLabelValues(string(codeOf(err))).Add(float64(req.N))
			return nil, fmt.Errorf("fork %s: %w", req.EnvID, err)
		}
	}
	task := o.task
	slots := make([]slot, len(leases))
	groups := make([]string, len(leases))
	for i := range groups {
		groups[i] = "fork"
	}
	s.fanOut(ctx, len(leases), groups, func(ctx context.Context, i int) {
		e := &env{id: newID("env-"), lease: leases[i], task: task, lastFrame: o.frame, coords: o.coords, display: o.display,
			pool: o.pool, screen: o.screen}
		e.lastUsed.Store(time.Now().UnixNano())
		e.mu.Lock()
		defer e.mu.Unlock()
		ep := s.startEpisode(e, task, o.episodeID)
		ep.step, ep.maxSteps = o.step, o.maxSteps
		if o.checkpoint != "" {
			ep.mu.Lock()
			ep.traj.Checkpoint = o.checkpoint
			ep.mu.Unlock()
		}
		s.register(e, true)
		fail := func(err error) {
			s.died(e, err, trajectory.SandboxDied)
			slots[i] = slot{res: api.Result{EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Error: wireError(err)}}
		}
		if err := awaitWindows(ctx, e.lease, task); err != nil {
			fail(err)
			return
		}
		obs, data, settle, err := s.observe(ctx, e, b, nil, true)
		if err != nil {
			fail(err)
			return
		}
		ep.mu.Lock() // read concurrently by GET /v1/episodes and the UI
		ep.traj.InitFrame = obs.Frame
		ep.mu.Unlock()
		slots[i] = slot{res: api.Result{EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Obs: obs,
			Info: &api.Info{Step: o.step, Task: task.ID, ForkOf: o.envID, Checkpoint: o.checkpoint, Settle: settle, MaxSteps: o.maxSteps}}, data: data}
		instanceInfo(slots[i].res.Info, task)
	})
	for _, sl := range slots {
		s.m.forks.WithLabelValues(outcomeOf(sl.res.Error)).Inc()
	}
	return s.reply(b, slots), nil
}

func (s *Server) close(ctx context.Context, req *api.CloseRequest) (*api.CloseReply, error) {
	if err := s.checkBatch(len(req.EnvIDs)); err != nil {
		return nil, err
	}
	out := &api.CloseReply{Closed: []string{}}
	for _, id := range req.EnvIDs {
		if s.closeEnv(ctx, id) {
			out.Closed = append(out.Closed, id)
		}
	}
	return out, nil
}

// closeEnv ends an env: its episode is saved and its sandbox released.
func (s *Server) closeEnv(ctx context.Context, id string) bool {
	s.mu.Lock()
	e := s.envs[id]
	delete(s.envs, id)
	s.mu.Unlock()
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	e.dropRaw()
	s.endEpisode(e)
	if e.lease != nil {
		e.lease.Release(context.WithoutCancel(ctx))
		e.lease = nil
	}
	return true
}
