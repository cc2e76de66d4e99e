package envserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/trajectory"
)

// A sandbox that dies ends its env's episode: how a death is told
// (isDeath), whose fault it was (deathReason: the agent's where the
// sandbox reached one of its limits, else the infrastructure's), how the
// episode ends (died) and what a step that meets it answers.

// isDeath reports whether err means the sandbox is gone: its code says so
// in the one error table (aci.Codes), or the lease has ended.
func isDeath(err error, l *pool.Lease) bool {
	return codeOf(err).Gone() || (l != nil && l.Err() != nil)
}

// leaseErr is why e's sandbox is gone: its lease's error, or a death when
// it holds none.
func (e *env) leaseErr() error {
	if e.lease == nil {
		return pool.ErrSandboxDied
	}
	return e.lease.Err()
}

// died handles a sandbox death seen by e (e.mu held): the episode ends with
// reason (sandbox_died, or agent_error for a death at the sandbox's limits:
// deathReason) and the lease goes back to the pool to be replaced.
func (s *Server) died(e *env, cause error, reason trajectory.ExitReason) {
	if e.lease != nil {
		e.lease.Release(context.Background())
		e.lease = nil
	}
	s.finishEpisode(e, reason)
	s.cfg.Logf("envserver: env %s: sandbox died: %v", e.id, cause)
}

// deathReason is how an episode whose sandbox died ends. A sandbox its
// provider ended at one of its limits (memory) died of what the agent ran
// in it: that is the agent's fault, agent_error with detail.reason, never
// retried (a retry would reroll the policy that exhausted it). Any other
// death is the infrastructure's, sandbox_died (docs/api.md, errors).
func deathReason(l *pool.Lease) (trajectory.ExitReason, aci.Code, any) {
	if d := limitDetail(l); d != nil {
		return trajectory.AgentError, aci.CodeAgentError, d
	}
	return trajectory.SandboxDied, aci.CodeSandboxDied, nil
}

// limitDetail is the detail of a sandbox_died whose sandbox reached one of
// its limits, {"reason": "oom"|"pids"}, or nil (docs/api.md, errors).
func limitDetail(l *pool.Lease) any {
	if l == nil {
		return nil
	}
	var d any
	if err := l.Err(); err != nil {
		var e *aci.Error
		if errors.As(err, &e) && e.Detail != nil {
			return e.Detail
		}
	}
	if sb := l.Sandbox(); sb != nil && sb.LimitHit != nil {
		if r := sb.LimitHit(); r != "" {
			d = map[string]any{"reason": r}
		}
	}
	return d
}

// goneBeforeStep answers a step whose sandbox is gone before it ran: an
// end at the sandbox's limits is the agent's (deathReason) and the step's
// result; any other ends the episode sandbox_died and fails the step.
func (s *Server) goneBeforeStep(e *env, envID string) slot {
	cause, ep := e.leaseErr(), e.ep
	if reason, _, _ := deathReason(e.lease); reason == trajectory.AgentError && ep != nil {
		return s.deathSlot(e, ep, cause)
	}
	s.died(e, cause, trajectory.SandboxDied)
	return failSlot(envID, fmt.Errorf("env %s: %w", e.id, cause))
}

// deathSlot ends e's episode on its sandbox's death and is the step's
// result (see deathReason).
func (s *Server) deathSlot(e *env, ep *episode, err error) slot {
	reason, code, detail := deathReason(e.lease)
	s.died(e, err, reason)
	return slot{res: api.Result{
		EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Truncated: true,
		Info:  &api.Info{Step: ep.step, Task: ep.traj.Task, ExitReason: string(reason)},
		Error: &aci.Error{Code: code, Message: err.Error(), Detail: detail},
	}}
}
