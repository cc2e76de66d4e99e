package guest

import (
	"context"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/internal/procstat"
)

// Who stalled the X server. An X server that stops answering guestd is the
// infrastructure's failure only when the server itself failed; a client of
// the agent's that grabs the server (XGrabServer) and never lets go stops
// it just as well, and blaming that on the infrastructure would turn the
// agent's failure into a retried episode (docs/architecture.md, "Reward
// integrity"). So a stall is diagnosed before it is reported:
//
//  1. While the X server keeps using CPU it is busy, not stopped: the
//     diagnosis waits (up to another xTimeout) for it to go quiet or answer.
//  2. Every process of the agent's is ended (guestd and the X server are
//     not the agent's; the session's buses and window manager are, and a
//     reset starts them afresh). A grab dies with its client.
//  3. If the X server then answers a fresh connection within a second, an
//     agent's client held it: the operation fails agent_error, the step
//     counts and the episode goes on, scored as the agent leaves it. If it
//     still does not answer, the server is wedged: display_error, the
//     infrastructure's.

// stallProbe bounds the fresh connection's round trip after the kill: the
// bound any X operation has beyond its own work (a loaded host, an agent's
// fork bomb just ended, may take a while to serve it).
const stallProbe = xTimeout

// stallCheck is a display's stalled hook for a server of cfg whose launched
// apps are apps.
func stallCheck(cfg *Config, apps *appState) func(within time.Duration) error {
	return func(within time.Duration) error { return xStalled(cfg, apps, within) }
}

// xStalled diagnoses a stall of the X server that guestd's connection saw:
// a typed agent_error when the agent's processes held it, nil when the
// server stays stalled without them.
func xStalled(cfg *Config, apps *appState, within time.Duration) error {
	xpid := 0
	if cfg.Exempt != nil {
		if ex := cfg.Exempt(); len(ex) > 0 {
			xpid = ex[0]
		}
	}
	if xpid > 0 {
		busyUntil := time.Now().Add(xTimeout)
		for serverBusy(xpid) && time.Now().Before(busyUntil) {
			if xAnswers(cfg.Display, 100*time.Millisecond) {
				return nil // merely slow: the caller's error stands
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), resetTimeout)
	defer cancel()
	n, err := sweep(ctx, cfg.exempt(), func() error { return nil })
	if err != nil {
		// A process that outlived the sweep's deadline: the X server may
		// answer all the same, once the rest are gone.
		cfg.Logf("guest: x stall: ending the agent's processes: %v", err)
	}
	apps.mu.Lock()
	apps.list = nil
	apps.mu.Unlock()
	if !xAnswers(cfg.Display, stallProbe) {
		return nil
	}
	cfg.Logf("guest: x server did not answer within %v until %d process(es) of the agent ended", within, n)
	return aci.Errorf(aci.CodeAgentError, "the X server stopped answering for %v and answered again once the agent's %d process(es) were ended: a client of the agent's held it (a server grab); the desktop's apps are gone", within.Round(time.Millisecond), n)
}

// serverBusy reports whether process pid used CPU within the next 50 ms.
func serverBusy(pid int) bool {
	a, _ := procstat.Read(pid)
	time.Sleep(50 * time.Millisecond)
	b, _ := procstat.Read(pid)
	return b.UTime+b.STime > a.UTime+a.STime
}

// xAnswers reports whether the X server on display completes a connection
// setup and one round trip within d.
func xAnswers(display string, d time.Duration) bool {
	nc, err := dialX(display, d)
	if err != nil {
		return false
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(d))
	c, err := xgb.NewConnNet(nc)
	if err != nil {
		return false
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		_, err := xproto.GetInputFocus(c).Reply()
		done <- err
	}()
	select {
	case err := <-done:
		return err == nil
	case <-time.After(d):
		return false
	}
}
