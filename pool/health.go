package pool

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/shinken-rl/shinken/aci"
)

// watch starts m's monitor. Called with p.mu held.
func (p *Pool) watch(m *member) {
	p.wg.Add(1)
	go p.monitor(m)
}

// monitor reports m's death: its provider saw it end, its guest
// connection dropped, or a health probe failed.
func (p *Pool) monitor(m *member) {
	defer p.wg.Done()
	var tick <-chan time.Time
	if p.cfg.HealthInterval > 0 {
		t := time.NewTicker(p.cfg.HealthInterval)
		defer t.Stop()
		tick = t.C
	}
	slow := 0 // consecutive health probes that timed out
	for {
		select {
		case <-m.gone:
			return
		case <-p.ctx.Done():
			return
		case <-m.sb.Dead:
			p.died(m, "the sandbox's init exited")
			return
		case <-m.guest.Done():
			p.died(m, "the guest connection was lost")
			return
		case <-tick:
			ctx, cancel := context.WithTimeout(p.ctx, p.cfg.HealthTimeout)
			h, err := m.guest.Health(ctx)
			cancel()
			switch {
			case p.ctx.Err() != nil:
				return
			case err != nil && slowProbe(err) && slow+1 < maxSlowProbes:
				// The connection is open and nothing said the sandbox
				// ended: a guest slow to answer (a loaded host) is not
				// dead until it stays silent.
				slow++
				p.cfg.Logf("pool: sandbox %s slow: health probe timed out (%d of %d before it counts as dead)", m.sb.ID, slow, maxSlowProbes)
				continue
			case err != nil:
				p.died(m, "health probe failed: "+err.Error())
				return
			case !h.X:
				p.died(m, "the X server is gone")
				return
			case !h.WM && !p.isLeased(m):
				// The window manager runs as the agent: on a leased
				// sandbox its end is the agent's doing (aci.FaultAgent),
				// not a death to retry; an idle one is replaced.
				p.died(m, "the window manager is gone")
				return
			}
			slow = 0
			if p.trimIdle(m) {
				return
			}
		}
	}
}

// trimIdle retires m when it is an idle replica its golden no longer
// needs: one beyond ReplicasPerGolden, unused for ReplicaIdleTTL. A golden
// keeps about as many sandboxes as it recently had in use
// (docs/architecture.md, "Sandbox lifecycle and reset in place"); this is
// the "recently".
func (p *Pool) trimIdle(m *member) bool {
	if p.cfg.ReplicaIdleTTL <= 0 {
		return false
	}
	p.mu.Lock()
	g := m.golden
	if g == nil || m.lease != nil || len(g.idle) <= p.cfg.ReplicasPerGolden || time.Since(m.idleSince) < p.cfg.ReplicaIdleTTL {
		p.mu.Unlock()
		return false
	}
	i := slices.Index(g.idle, m)
	if i < 0 {
		p.mu.Unlock()
		return false
	}
	g.idle = slices.Delete(g.idle, i, i+1)
	m.golden = nil
	p.mu.Unlock()
	p.retire(m)
	return true
}

// isLeased reports whether m is leased now.
func (p *Pool) isLeased(m *member) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return m.lease != nil
}

// died removes a dead member, tells its holder, and replaces it.
func (p *Pool) died(m *member, why string) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	select {
	case <-m.gone:
		p.mu.Unlock()
		return // released or retired meanwhile
	default:
	}
	p.deaths++
	reason := ""
	if m.sb.LimitHit != nil {
		reason = m.sb.LimitHit()
	}
	if reason != "" {
		why = "killed at its " + reason + " limit (" + why + ")"
	}
	p.removeLocked(m)
	l := m.lease
	p.signalLocked()
	p.mu.Unlock()
	p.cfg.Logf("pool: sandbox %s died: %s", m.sb.ID, why)
	if l != nil {
		err := Errorf(ErrSandboxDied, aci.CodeSandboxDied, "sandbox %s died: %s", m.sb.ID, why)
		if reason != "" {
			err = WithDetail(err, map[string]any{"reason": reason})
		}
		l.kill(err)
	}
	p.retire(m)
}

// removeLocked takes m out of the warm set or its golden's replicas.
func (p *Pool) removeLocked(m *member) {
	for i, w := range p.warm {
		if w == m {
			p.warm = append(p.warm[:i], p.warm[i+1:]...)
			break
		}
	}
	if g := m.golden; g != nil {
		for i, w := range g.idle {
			if w == m {
				g.idle = append(g.idle[:i], g.idle[i+1:]...)
				break
			}
		}
		m.golden = nil
	}
	if m.lease != nil {
		delete(p.leased, m.lease)
	}
}

// retire ends a member: closes its guest, destroys its sandbox in the
// background, frees its slot once teardown is confirmed, and refills.
func (p *Pool) retire(m *member) {
	m.once.Do(func() {
		// A limit death is counted here, once, whether the pool saw the
		// sandbox die or its holder released it first.
		if m.sb.LimitHit != nil {
			if r := m.sb.LimitHit(); r != "" {
				p.mu.Lock()
				if p.limitDeaths == nil {
					p.limitDeaths = map[string]uint64{}
				}
				p.limitDeaths[r]++
				p.mu.Unlock()
			}
		}
		close(m.gone)
		m.guest.Close()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.destroy(m.sb.ID)
			p.mu.Lock()
			p.live--
			p.signalLocked()
			p.mu.Unlock()
			p.poke()
		}()
	})
}

// destroy destroys a sandbox with a bounded deadline.
func (p *Pool) destroy(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.prov.Destroy(ctx, id); err != nil {
		p.cfg.Logf("pool: destroy %s: %v", id, err)
	}
}

func alive(m *member) bool {
	select {
	case <-m.sb.Dead:
		return false
	case <-m.guest.Done():
		return false
	default:
		return true
	}
}

// maxSlowProbes is how many consecutive health probes may time out before a
// sandbox whose connection is still open counts as dead.
const maxSlowProbes = 3

// slowProbe reports whether a failed probe only ran out of time.
func slowProbe(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || aci.CodeOf(err) == aci.CodeTimeout
}
