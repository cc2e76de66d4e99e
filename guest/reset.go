package guest

import (
	"context"
	"os"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"golang.org/x/sys/unix"
)

// resetTimeout bounds the sweep of one quiesce.
const resetTimeout = 5 * time.Second

// reset is the reset method (docs/architecture.md, "Reset in place").
func (s *Server) reset(ctx context.Context, a wire.ResetArgs) (*wire.ResetResult, error) {
	t0 := time.Now()
	switch a.Phase {
	case wire.ResetQuiesce:
		res, err := s.quiesce(ctx)
		if err != nil {
			return nil, err
		}
		res.ElapsedUS = time.Since(t0).Microseconds()
		return res, nil
	case wire.ResetRelaunch:
		if s.cfg.Restart != nil {
			fresh, err := s.cfg.Restart(ctx, s.wmDirty.Load())
			if err != nil {
				return nil, err
			}
			if fresh {
				if err := s.x.run(ctx, 0, func(x *xconn) error { return x.recordFreshWM() }); err != nil {
					return nil, err
				}
			}
			s.helpersDown.Store(false)
		}
		n, err := s.relaunch(ctx, true)
		if err != nil {
			return nil, err
		}
		return &wire.ResetResult{Apps: n, ElapsedUS: time.Since(t0).Microseconds()}, nil
	case wire.ResetSettle:
		if a.Settle == nil {
			return nil, aci.Errorf(aci.CodeBadRequest, "reset: phase settle needs settle bounds")
		}
		if err := a.Settle.Validate(); err != nil {
			return nil, err
		}
		m, err := s.x.mark(ctx)
		if err != nil {
			return nil, err
		}
		// Not after input: damage within the last quiet_ms counts, so a
		// still screen is settled at once and a drawing one once quiet.
		info, err := s.x.settle(ctx, m, *a.Settle, false, nil)
		if err != nil {
			return nil, err
		}
		return &wire.ResetResult{Settle: info, ElapsedUS: time.Since(t0).Microseconds()}, nil
	default:
		return nil, aci.Errorf(aci.CodeBadRequest, "reset: phase %q; want %q, %q or %q", a.Phase, wire.ResetQuiesce, wire.ResetRelaunch, wire.ResetSettle)
	}
}

// quiesce ends every process of the episode (everything but guestd and the
// X server: the session's buses and window manager run as the agent and
// start afresh in the relaunch phase), lets the agent start processes
// again, removes what the episode left in shared memory and System V IPC,
// and resets the X server's state. The agent's freezer cgroup (frozen by a
// score) is thawed after the kill is sent: a frozen process cannot die,
// and a thawed one with SIGKILL pending runs no code.
func (s *Server) quiesce(ctx context.Context) (*wire.ResetResult, error) {
	s.score.Lock()
	defer s.score.Unlock()
	keep := s.cfg.exempt()
	kept := 0
	if s.cfg.Keep != nil {
		for _, p := range s.cfg.Keep() {
			keep[p] = true
			kept++
		}
	}
	sctx, cancel := context.WithTimeout(ctx, resetTimeout)
	defer cancel()
	if s.cfg.Restart != nil {
		s.helpersDown.Store(true)
	}
	s.procs.killAll()
	// The next instance serves its own web apps (from the host, which
	// keeps them for a restored sandbox too).
	s.web.clear()
	n, err := sweep(sctx, keep, s.cfg.AgentCgroups.Thaw)
	if err != nil {
		return nil, err
	}
	// The score's SIGSTOP sweep stopped the X server too, where it is not
	// exempt.
	for p := range keep {
		if p != os.Getpid() {
			unix.Kill(p, unix.SIGCONT)
		}
	}
	s.apps.mu.Lock()
	s.apps.list = nil
	s.apps.mu.Unlock()
	if err := s.clearIPC(sctx, keep); err != nil {
		return nil, err
	}
	if err := s.x.run(ctx, 0, func(x *xconn) error { return x.resetX(keep) }); err != nil {
		return nil, err
	}
	dirty := true // a window manager not kept starts afresh anyway
	if kept > 0 {
		if err := s.x.awaitNoClients(sctx); err != nil {
			return nil, err
		}
		if err := s.x.run(ctx, 0, func(x *xconn) error {
			var err error
			dirty, err = x.rootChanged(sctx)
			return err
		}); err != nil {
			return nil, err
		}
	}
	s.wmDirty.Store(dirty)
	return &wire.ResetResult{Killed: n}, nil
}

// awaitNoClients waits until the window manager has let go of every window
// of the ended episode (its client list is empty): an app relaunched while
// the window manager still catches up is placed and sized differently from
// one on a fresh desktop. It wakes on window-list changes.
func (d *display) awaitNoClients(ctx context.Context) error {
	for {
		var wake <-chan struct{}
		left := 0
		err := d.run(ctx, 0, func(x *xconn) error {
			wake = x.windowsChan()
			ids, _ := x.clientList()
			left = len(ids)
			return nil
		})
		if err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		select {
		case <-wake:
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return aci.Errorf(aci.CodeTimeout, "reset: the window manager still manages %d window(s) of the episode", left)
		}
	}
}
