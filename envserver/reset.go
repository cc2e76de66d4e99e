package envserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/trajectory"
)

func (s *Server) reset(ctx context.Context, req *api.ResetRequest) (*batchReply, error) {
	if err := s.checkBatch(len(req.Envs)); err != nil {
		return nil, err
	}
	b, err := s.newBatch(req.Observe, req.Have)
	if err != nil {
		return nil, err
	}
	if err := distinctEnvs(len(req.Envs), func(i int) string { return req.Envs[i].EnvID }); err != nil {
		return nil, err
	}
	slots := make([]slot, len(req.Envs))
	groups := make([]string, len(req.Envs))
	for i, re := range req.Envs {
		groups[i] = re.Task
		if re.Checkpoint != "" {
			groups[i] = "checkpoint " + re.Checkpoint
		}
	}
	s.fanOut(ctx, len(req.Envs), groups, func(ctx context.Context, i int) {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.ResetTimeout)
		defer cancel()
		slots[i] = s.resetOne(ctx, b, &req.Envs[i])
		s.m.resets.WithLabelValues(outcomeOf(slots[i].res.Error)).Inc()
	})
	return s.reply(b, slots), nil
}

func (s *Server) resetOne(ctx context.Context, b *batch, re *api.ResetEnv) slot {
	fail := func(envID string, err error) slot {
		return slot{res: api.Result{EnvID: envID, Error: wireError(err)}}
	}
	taskID := re.Task
	var err error
	var ck *checkpoint // the named checkpoint the episode starts from, if any
	if re.Checkpoint != "" {
		c, done, err := s.useCheckpoint(re.Checkpoint)
		if err != nil {
			return fail(re.EnvID, err)
		}
		defer done()
		if taskID != "" && taskID != c.task.ID {
			return fail(re.EnvID, aci.Errorf(aci.CodeBadRequest, "reset task %q, but checkpoint %s is of task %q", taskID, c.id, c.task.ID))
		}
		ck, taskID = c, c.task.ID
	}
	var in *configs.Instance
	if ck != nil {
		// The episode goes on from the checkpoint: its instance, budget and
		// coordinate space, unless the reset lowers or names its own.
		in = ck.task
		if (re.Seed != nil && *re.Seed != in.Seed) || (re.Split != "" && re.Split != in.Split) {
			return fail(re.EnvID, aci.Errorf(aci.CodeBadRequest, "checkpoint %s is %s seed %d of task %s; a reset from it cannot pick another instance", ck.id, in.Split, in.Seed, in.ID))
		}
	} else if task := s.cfg.Tasks[taskID]; task == nil {
		return fail(re.EnvID, aci.Errorf(aci.CodeNotFound, "unknown task %q", taskID))
	} else if in, err = pickInstance(task, re.Seed, re.Split); err != nil {
		return fail(re.EnvID, err)
	}
	coords, maxSteps, err := s.episodeKnobs(re, in.Task)
	if err != nil {
		return fail(re.EnvID, err)
	}
	// The screen: the checkpoint's, or the one asked for (a pool per size).
	var p *pool.Pool
	var screen api.Size
	if ck != nil {
		if re.Screen != nil && *re.Screen != ck.screen {
			return fail(re.EnvID, aci.Errorf(aci.CodeBadRequest, "checkpoint %s has a %dx%d screen; a reset from it cannot ask for %dx%d", ck.id, ck.screen.W, ck.screen.H, re.Screen.W, re.Screen.H))
		}
		p, screen = ck.pool, ck.screen
	} else if p, screen, err = s.poolFor(re.Screen); err != nil {
		return fail(re.EnvID, err)
	}
	forkOf := ""
	if ck != nil {
		maxSteps = ck.maxSteps
		if re.MaxSteps > 0 {
			maxSteps = min(maxSteps, re.MaxSteps)
		}
		if re.Coords == nil {
			coords = ck.coords
		}
		forkOf = ck.episodeID
	}
	var e *env
	if re.EnvID != "" {
		var err error
		if e, err = s.getEnv(re.EnvID); err != nil {
			return fail(re.EnvID, err)
		}
	} else {
		e = &env{id: newID("env-")}
		e.lastUsed.Store(time.Now().UnixNano())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fail(e.id, aci.Errorf(aci.CodeNotFound, "env %q was closed", e.id))
	}
	// A reset replaces the sandbox: the old one is dirty.
	s.endEpisode(e)
	if e.lease != nil {
		e.lease.Release(context.WithoutCancel(ctx))
		e.lease = nil
	}
	t0 := time.Now()
	var lease *pool.Lease
	if ck != nil {
		lease, err = p.LeaseSnapshot(ctx, ck.snap)
	} else {
		lease, err = p.LeaseGolden(ctx, in.ID, func(ctx context.Context, l *pool.Lease) error {
			return runSetup(ctx, l, in.Task)
		})
	}
	leaseDur := time.Since(t0)
	var instDur time.Duration
	if err == nil && ck == nil {
		// The golden is the family's seed-independent base; the instance
		// goes on top of it.
		t1 := time.Now()
		if err = runInstance(ctx, lease, in); err != nil {
			lease.Release(context.WithoutCancel(ctx))
		}
		instDur = time.Since(t1)
	}
	e.pool, e.screen = p, screen
	ep := s.startEpisode(e, in, forkOf)
	ep.maxSteps = maxSteps
	e.coords, e.display = coords, nil
	info := &api.Info{Step: 0, Task: in.ID}
	instanceInfo(info, in)
	if ck != nil {
		ep.mu.Lock()
		ep.step, ep.traj.Checkpoint = ck.step, ck.id
		ep.mu.Unlock()
		info.Step, info.ForkOf, info.Checkpoint = ck.step, ck.envID, ck.id
	}
	if err != nil {
		reason := trajectory.SetupError
		var se *setupError
		if c := codeOf(err); !errors.As(err, &se) && (c == aci.CodePoolExhausted || c == aci.CodeSandboxDied || c == aci.CodeTimeout) {
			reason = trajectory.SandboxDied
			if c == aci.CodePoolExhausted {
				reason = "" // nothing started: no episode to score
			}
		}
		s.finishEpisode(e, reason)
		res := fail(e.id, fmt.Errorf("reset %s: %w", in.ID, err))
		res.res.EpisodeID = ep.traj.EpisodeID
		info.ExitReason = string(reason)
		res.res.Info = info
		s.register(e, re.EnvID == "")
		return res
	}
	e.lease = lease
	e.task = in
	if err := awaitWindows(ctx, lease, in); err != nil {
		s.finishEpisode(e, trajectory.SetupError)
		s.register(e, re.EnvID == "")
		return fail(e.id, fmt.Errorf("reset %s: %w", in.ID, err))
	}
	t1 := time.Now()
	// Apps a restored sandbox relaunched may still be drawing: the first
	// observation settles as after an action, so replicas of one checkpoint
	// start pixel-identical.
	// A sandbox reset in place was settled before it was handed out: only
	// drawing since (within the settle's quiet period) is waited for.
	// So was one whose instance setup put only files.
	obs, data, settle, err := s.observe(ctx, e, b, nil, !lease.Settled() || (ck == nil && drawsOnScreen(in.InstanceSetup)))
	if err != nil {
		s.died(e, err, trajectory.SandboxDied)
		s.register(e, re.EnvID == "")
		return fail(e.id, err)
	}
	ep.mu.Lock() // read concurrently by GET /v1/episodes and the UI
	ep.traj.InitFrame, ep.traj.InitTree = obs.Frame, obs.Tree
	ep.mu.Unlock()
	s.register(e, re.EnvID == "")
	info.Settle, info.MaxSteps = settle, maxSteps
	info.Timings = map[string]int64{"lease_us": leaseDur.Microseconds(), "instance_us": instDur.Microseconds(),
		"observe_us": time.Since(t1).Microseconds()}
	return slot{res: api.Result{EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Obs: obs, Info: info}, data: data}
}

// episodeKnobs reads a reset's per-episode settings: the env's default
// coordinate space and the step budget (the task's, lowered by the reset and
// capped by the server's limit).
func (s *Server) episodeKnobs(re *api.ResetEnv, task *configs.Task) (*aci.Coords, int, error) {
	var coords *aci.Coords
	if re.Coords != nil {
		c, err := aci.ParseCoords(re.Coords)
		if err != nil {
			return nil, 0, aci.Errorf(aci.CodeBadRequest, "reset coords: %s", aci.AsError(err).Message)
		}
		coords = &c
	}
	if re.MaxSteps < 0 {
		return nil, 0, aci.Errorf(aci.CodeBadRequest, "reset max_steps %d: must be positive (0 keeps the task's)", re.MaxSteps)
	}
	n := task.MaxSteps
	if re.MaxSteps > 0 {
		n = min(n, re.MaxSteps)
	}
	if s.cfg.MaxSteps > 0 {
		n = min(n, s.cfg.MaxSteps)
	}
	return coords, n, nil
}
