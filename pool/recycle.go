package pool

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
)

// recycleState counts in-place resets (guarded by Pool.mu).
type recycleState struct {
	warm         int    // resets in flight towards the warm set
	done, failed uint64 // resets finished, and failed
}

// Resets reports whether released sandboxes are reset in place.
func (p *Pool) Resets() bool { return p.resetter != nil }

// waitChange waits for a pool state change (ch from p.changed), ctx, or
// LeaseTimeout.
func (p *Pool) waitChange(ctx context.Context, ch <-chan struct{}) error {
	t := time.NewTimer(p.cfg.LeaseTimeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pool: lease: %w", ctx.Err())
	case <-t.C:
		return p.exhausted("sandbox")
	}
}

// recycleMember takes back a released member. Where the provider resets
// in place and the sandbox lives, it is reset in the background to the
// state it was leased in (its golden's snapshot, or a fresh boot's) and
// rejoins the golden's idle replicas or the warm set; otherwise, or when
// the reset fails, it is retired.
func (p *Pool) recycleMember(m *member, dead bool) {
	p.mu.Lock()
	g := m.origin
	m.origin = nil
	if g != nil && (!g.ok || p.goldens[g.key] != g) {
		g = nil // its golden is gone: reset to a fresh sandbox
	}
	if p.resetter == nil || p.closed || dead || !alive(m) {
		p.signalLocked()
		p.mu.Unlock()
		p.retire(m)
		return
	}
	if g != nil {
		g.resetting++
	} else {
		p.recycle.warm++
	}
	p.signalLocked()
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		snap := ""
		if g != nil {
			snap = g.snap
		}
		err := p.resetOne(m, snap)
		p.mu.Lock()
		if g != nil {
			g.resetting--
		} else {
			p.recycle.warm--
		}
		if err == nil && (p.closed || (g != nil && p.goldens[g.key] != g) || !alive(m) || isGone(m)) {
			err = fmt.Errorf("pool closed, golden dropped or sandbox gone during the reset")
		}
		if err != nil {
			p.signalLocked()
			p.mu.Unlock()
			p.retire(m)
			p.poke()
			return
		}
		m.idleSince = time.Now()
		if g != nil {
			m.golden = g
			g.idle = append(g.idle, m)
		} else {
			p.warm = append(p.warm, m)
		}
		p.signalLocked()
		p.mu.Unlock()
	}()
}

// resetOne resets m in place to snap with a bounded deadline and counts it.
func (p *Pool) resetOne(m *member, snap string) error {
	ctx, cancel := context.WithTimeout(p.ctx, resetTimeout)
	defer cancel()
	err := p.resetter.ResetInPlace(ctx, m.sb.ID, snap)
	p.mu.Lock()
	if err != nil {
		p.recycle.failed++
	} else {
		p.recycle.done++
	}
	closed := p.closed
	p.mu.Unlock()
	if err != nil && !closed {
		p.cfg.Logf("pool: reset in place of %s failed, retiring it: %v", m.sb.ID, err)
	}
	return err
}

func isGone(m *member) bool {
	select {
	case <-m.gone:
		return true
	default:
		return false
	}
}

// takeIdleLocked takes up to n idle members (warm general sandboxes first,
// then idle golden replicas) for a reset in place.
func (p *Pool) takeIdleLocked(n int) []*member {
	var out []*member
	defer func() {
		for _, m := range out {
			m.idleSince = time.Time{} // it is reset for the caller's lease
		}
	}()
	for len(out) < n {
		if m := p.takeWarmLocked(); m != nil {
			out = append(out, m)
			continue
		}
		m := p.evictReplicaLocked(nil)
		if m == nil {
			break
		}
		if !alive(m) {
			p.mu.Unlock()
			p.retire(m)
			p.mu.Lock()
			continue
		}
		out = append(out, m)
	}
	return out
}

// resetIdle resets idle members in place to snap concurrently and returns
// the ones that made it (the others are retired).
func (p *Pool) resetIdle(ms []*member, snap string) []*member {
	ok := make([]bool, len(ms))
	var g errgroup.Group
	g.SetLimit(4)
	for i, m := range ms {
		g.Go(func() error {
			ok[i] = p.resetOne(m, snap) == nil && alive(m) && !isGone(m)
			return nil
		})
	}
	_ = g.Wait()
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

// resetIdleInto leases an idle sandbox (a warm one, else another golden's
// idle replica) reset in place to g's snapshot: a fraction of a boot, so
// a burst of resets on one task is served by the warm pool first. It
// returns nil when none is idle or the reset failed (the caller boots).
func (p *Pool) resetIdleInto(g *golden) *Lease {
	if p.resetter == nil {
		return nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	ms := p.takeIdleLocked(1)
	if len(ms) == 0 {
		p.mu.Unlock()
		return nil
	}
	g.resetting++
	p.mu.Unlock()
	ok := p.resetIdle(ms, g.snap)
	p.mu.Lock()
	defer p.mu.Unlock()
	g.resetting--
	p.signalLocked()
	if len(ok) == 0 {
		return nil
	}
	m := ok[0]
	if p.closed {
		go p.retire(m)
		return nil
	}
	l := p.leaseLocked(m)
	m.origin = g
	p.poke()
	return l
}
