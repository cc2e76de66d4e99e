package envserver

import (
	"context"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/trajectory"
)

// Observation without a step (docs/api.md, "Observation without a step"):
// POST /v1/observe gives the trainer each env's current frame, its a11y
// tree where observe asks, and the window list, without spending the
// agent's step budget or recording an agent action. Like a step it waits
// for the screen to settle (for quiet only: no action ran), and like one it
// never runs beside another call on the env; the trajectory records it as
// a trainer event.

// observeEnvs answers POST /v1/observe.
func (s *Server) observeEnvs(ctx context.Context, req *api.ObserveRequest) (*batchReply, error) {
	if err := s.checkBatch(len(req.EnvIDs)); err != nil {
		return nil, err
	}
	b, err := s.newBatch(req.Observe, req.Have)
	if err != nil {
		return nil, err
	}
	if err := distinctEnvs(len(req.EnvIDs), func(i int) string { return req.EnvIDs[i] }); err != nil {
		return nil, err
	}
	slots := make([]slot, len(req.EnvIDs))
	s.fanOut(ctx, len(req.EnvIDs), nil, func(ctx context.Context, i int) {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.StepTimeout)
		defer cancel()
		slots[i] = s.observeOne(ctx, b, req.EnvIDs[i], req.Windows)
	})
	return s.reply(b, slots), nil
}

// observeOne observes one env between its steps.
func (s *Server) observeOne(ctx context.Context, b *batch, id string, windows bool) slot {
	fail := func(err error) slot { return slot{res: api.Result{EnvID: id, Error: wireError(err)}} }
	e, err := s.betweenSteps(id, "observe")
	if err != nil {
		return fail(err)
	}
	defer e.mu.Unlock()
	ep := e.ep
	t0 := time.Now()
	obs, data, settle, err := s.observe(ctx, e, b, nil, false)
	if err != nil {
		if isDeath(err, e.lease) {
			s.died(e, err, trajectory.SandboxDied)
		}
		return fail(err)
	}
	info := &api.Info{Step: ep.step, Task: e.task.ID, Settle: settle}
	if windows {
		r, err := e.lease.Guest().Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.ListWindows}})
		if err != nil {
			return fail(err)
		}
		info.Windows = r.Windows
		if info.Windows == nil {
			info.Windows = []aci.Window{}
		}
	}
	s.recordEvent(ep, trajectory.Event{Kind: trajectory.EventObserve, AfterStep: ep.step, TMS: t0.Sub(ep.start).Milliseconds(),
		Frame: obs.Frame, DurationMS: time.Since(t0).Milliseconds()})
	return slot{res: api.Result{EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Obs: obs, Info: info}, data: data}
}
