package pool

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/guest/wire"
)

// keepsResetLocked reports whether a released lease of g is reset in place
// and kept as g's replica (docs/architecture.md, "Sandbox lifecycle and
// reset in place"): the provider resets, the golden is usable and current,
// replicas are kept at all (ReplicasPerGolden not negative), and g's idle
// and resetting sandboxes number fewer than ReplicasPerGolden plus its
// leases out, the one being released included (their envs will likely want
// one back: an env's reset releases before it leases). Otherwise the
// sandbox is retired.
func (p *Pool) keepsResetLocked(g *golden) bool {
	return p.resetter != nil && g.ok && p.goldens[g.key] == g && p.cfg.ReplicasPerGolden > 0 &&
		len(g.idle)+g.resetting < p.cfg.ReplicasPerGolden+g.leased
}

// resetInPlace resets m to snap under ResetTimeout, then checks that its X
// server and window manager answer.
func (p *Pool) resetInPlace(ctx context.Context, m *member, snap string) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ResetTimeout)
	defer cancel()
	if !alive(m) {
		return fmt.Errorf("pool: reset %s in place: the sandbox is dead", m.sb.ID)
	}
	if err := p.resetter.ResetInPlace(ctx, m.sb.ID, snap, m.guest); err != nil {
		return fmt.Errorf("pool: reset %s in place: %w", m.sb.ID, err)
	}
	h, err := m.guest.Health(ctx)
	if err != nil {
		return fmt.Errorf("pool: reset %s in place: health: %w", m.sb.ID, err)
	}
	if !h.X || !h.WM {
		return fmt.Errorf("pool: reset %s in place: unhealthy afterwards (x %v, wm %v: %s)", m.sb.ID, h.X, h.WM, h.Error)
	}
	return nil
}

// settle waits until m's screen is still (Config.ResetSettle).
func (p *Pool) settle(ctx context.Context, m *member) error {
	if p.cfg.ResetSettle == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.ResetTimeout)
	defer cancel()
	if _, err := m.guest.Reset(ctx, wire.ResetArgs{Phase: wire.ResetSettle, Settle: p.cfg.ResetSettle}); err != nil {
		return fmt.Errorf("pool: reset %s in place: settle: %w", m.sb.ID, err)
	}
	return nil
}

// resetDone counts one in-place reset.
func (p *Pool) resetDone(err error) {
	p.mu.Lock()
	if err == nil {
		p.resets++
	} else {
		p.resetFails++
	}
	p.mu.Unlock()
	if err != nil && p.ctx.Err() == nil {
		p.cfg.Logf("%v; retiring it (a boot replaces it)", err)
	}
}

// recycle resets a released lease's sandbox in place to g and makes it an
// idle replica of g; on any failure it is retired (and the filler boots).
// The caller counted it in g.resetting and in p.wg.
func (p *Pool) recycle(m *member, g *golden) {
	defer p.wg.Done()
	err := p.resetInPlace(p.ctx, m, g.snap)
	if err == nil {
		err = p.settle(p.ctx, m)
	}
	p.resetDone(err)
	p.mu.Lock()
	g.resetting--
	if err == nil && !p.closed && p.goldens[g.key] == g && alive(m) {
		select {
		case <-m.gone: // died meanwhile: its monitor retired it
		default:
			m.golden = g
			m.settled = p.cfg.ResetSettle != nil
			m.idleSince = time.Now()
			g.idle = append(g.idle, m)
			p.signalLocked()
			p.mu.Unlock()
			return
		}
	}
	p.signalLocked()
	p.mu.Unlock()
	p.retire(m)
	p.poke()
}

// takeIdleLocked takes up to n idle sandboxes for a fork to reset in place:
// warm general ones first, then idle replicas of goldens. Their slots stay
// counted in live.
func (p *Pool) takeIdleLocked(n int) []*member {
	var out []*member
	for len(out) < n {
		m := p.takeWarmLocked()
		if m == nil {
			break
		}
		out = append(out, m)
	}
	for _, g := range p.goldens {
		for len(out) < n && len(g.idle) > 0 {
			m := g.idle[0]
			g.idle = g.idle[1:]
			m.golden = nil
			if alive(m) {
				out = append(out, m)
			} else {
				defer p.retireAsync(m)
			}
		}
	}
	for _, m := range out {
		m.settled = false // it is reset to another snapshot
	}
	if len(out) > 0 {
		p.signalLocked()
	}
	return out
}

// retireAsync retires m without p.mu held by the caller.
func (p *Pool) retireAsync(m *member) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.retire(m)
	}()
}

// resetAll resets ms in place to snap concurrently; it returns those that
// made it and retires the rest.
func (p *Pool) resetAll(ctx context.Context, ms []*member, snap string) []*member {
	ok := make([]bool, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := p.resetInPlace(ctx, m, snap)
			p.resetDone(err)
			ok[i] = err == nil
		}()
	}
	wg.Wait()
	var out []*member
	for i, m := range ms {
		if ok[i] {
			out = append(out, m)
		} else {
			p.retire(m)
		}
	}
	return out
}
