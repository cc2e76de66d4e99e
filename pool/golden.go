package pool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shinken-rl/shinken/aci"
)

// WaitReplicas blocks until key's golden has n warm replicas (n is capped
// at ReplicasPerGolden), or ctx ends. For tests and benchmarks.
func (p *Pool) WaitReplicas(ctx context.Context, key string, n int) error {
	n = min(n, p.cfg.ReplicasPerGolden)
	for {
		p.mu.Lock()
		g := p.goldens[key]
		if g != nil && len(g.idle) >= n {
			p.mu.Unlock()
			return nil
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("pool: wait replicas of %q: %w", key, ctx.Err())
		}
	}
}

// LeaseGolden hands out a sandbox in the state "fresh sandbox + setup(key)".
// The first call for key leases a warm sandbox, runs setup on it, snapshots
// it as key's golden and returns it; the pool then keeps ReplicasPerGolden
// replicas of the golden warm, so later calls are a lease, not a boot
// (when none is idle, one is restored on demand). Without snapshot support
// every call is Lease + setup. A setup error is returned wrapped.
func (p *Pool) LeaseGolden(ctx context.Context, key string, setup func(ctx context.Context, l *Lease) error) (*Lease, error) {
	if p.snapper == nil {
		return p.leaseAndSetup(ctx, key, setup)
	}
	var wait *time.Timer // bounds waiting for in-place resets
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, p.closedErr()
		}
		g := p.goldens[key]
		if g == nil {
			g = &golden{key: key, ready: make(chan struct{})}
			p.goldens[key] = g
			p.mu.Unlock()
			return p.buildGolden(ctx, g, setup)
		}
		p.mu.Unlock()
		select {
		case <-g.ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("pool: lease golden %q: %w", key, ctx.Err())
		}
		p.mu.Lock()
		if !g.ok || p.goldens[key] != g {
			p.mu.Unlock()
			continue // its build failed; try again (possibly as the builder)
		}
		for len(g.idle) > 0 {
			m := g.takeIdle()
			if alive(m) {
				l := p.leaseLocked(m)
				g.attachLocked(l)
				p.mu.Unlock()
				p.poke()
				return l, nil
			}
			p.mu.Unlock()
			p.retire(m)
			p.mu.Lock()
		}
		if g.resetting > 0 {
			// A released sandbox is being reset to this golden: waiting
			// for it is cheaper than a boot.
			ch := p.changed
			p.mu.Unlock()
			if wait == nil {
				wait = time.NewTimer(p.cfg.ResetTimeout)
				defer wait.Stop()
			}
			select {
			case <-ch:
				continue
			case <-wait.C:
			case <-ctx.Done():
				return nil, fmt.Errorf("pool: lease golden %q: %w", key, ctx.Err())
			}
			p.mu.Lock()
		}
		p.mu.Unlock()
		if l := p.resetWarm(ctx, g); l != nil {
			return l, nil
		}
		return p.restoreGolden(ctx, g)
	}
}

// resetWarm takes a warm general sandbox and resets it in place to g, leased
// to the caller: a burst of one task is served by the warm pool at the cost
// of in-place resets, and only what the pool lacks boots
// (docs/architecture.md, "Bursts"). It returns nil when none is warm or the
// reset failed (that sandbox is retired, and the filler replaces it).
func (p *Pool) resetWarm(ctx context.Context, g *golden) *Lease {
	if p.resetter == nil {
		return nil
	}
	p.mu.Lock()
	var m *member
	if !p.closed {
		m = p.takeWarmLocked()
	}
	p.mu.Unlock()
	if m == nil {
		return nil
	}
	p.poke() // the filler replaces it
	if len(p.resetAll(ctx, []*member{m}, g.snap)) == 0 {
		return nil // retired
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.retire(m)
		return nil
	}
	l := p.leaseLocked(m) // watched since its boot
	g.attachLocked(l)
	p.mu.Unlock()
	return l
}

// attachLocked marks l as a lease of g (its release resets it in place to
// g) and counts it. Called with p.mu held.
func (g *golden) attachLocked(l *Lease) {
	l.golden = g
	g.leased++
}

// takeIdle takes an idle replica, a settled one first (its first
// observation need not wait; docs/architecture.md, "Sandbox lifecycle and
// reset in place"), else the oldest. Called with p.mu held and g.idle not
// empty.
func (g *golden) takeIdle() *member {
	i := 0
	for j := len(g.idle) - 1; j >= 0; j-- {
		if g.idle[j].settled {
			i = j
			break
		}
	}
	m := g.idle[i]
	g.idle = append(g.idle[:i:i], g.idle[i+1:]...)
	m.golden = nil
	return m
}

// leaseAndSetup is the fallback without snapshots.
//
// A setup that timed out (an app whose window never mapped) is tried once
// more on another sandbox while ctx has time: a stuck start is that
// sandbox's, and must not fail a reset by chance. A second timeout, or any
// other error, is the task's.
func (p *Pool) leaseAndSetup(ctx context.Context, key string, setup func(ctx context.Context, l *Lease) error) (*Lease, error) {
	for attempt := 1; ; attempt++ {
		l, err := p.Lease(ctx)
		if err != nil {
			return nil, err
		}
		err = setup(ctx, l)
		if err == nil {
			return l, nil
		}
		l.Release(ctx)
		timedOut := aci.CodeOf(err) == aci.CodeTimeout || errors.Is(err, context.DeadlineExceeded)
		if attempt == 1 && timedOut && ctx.Err() == nil {
			p.cfg.Logf("pool: setup of %q timed out on sandbox %s (%v); once more on another", key, l.m.sb.ID, err)
			continue
		}
		return nil, fmt.Errorf("pool: setup of %q: %w", key, err)
	}
}

// buildGolden runs the first setup for g and snapshots the result.
func (p *Pool) buildGolden(ctx context.Context, g *golden, setup func(ctx context.Context, l *Lease) error) (*Lease, error) {
	fail := func() {
		p.mu.Lock()
		if p.goldens[g.key] == g {
			delete(p.goldens, g.key)
		}
		close(g.ready)
		p.signalLocked()
		p.mu.Unlock()
	}
	l, err := p.leaseAndSetup(ctx, g.key, setup)
	if err != nil {
		fail()
		return nil, err
	}
	snap, err := p.snapper.Snapshot(ctx, l.m.sb.ID)
	if err != nil {
		// The lease is still right; the next call tries again.
		p.cfg.Logf("pool: golden %q: snapshot: %v", g.key, err)
		fail()
		return l, nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.deleteSnapshot(snap)
		close(g.ready)
		return l, nil
	}
	g.snap, g.ok = snap, true
	g.attachLocked(l) // its sandbox is in the golden's state: reset in place, it is a replica
	close(g.ready)
	p.signalLocked()
	p.mu.Unlock()
	p.poke()
	return l, nil
}

// restoreGolden boots a replica on demand (no idle one was warm).
func (p *Pool) restoreGolden(ctx context.Context, g *golden) (*Lease, error) {
	p.mu.Lock()
	p.onDemand++
	p.mu.Unlock()
	return p.restore(ctx, g.snap, g, fmt.Sprintf("golden %q", g.key))
}

// restore boots one sandbox from snap, leased to the caller, once there is
// room under MaxSandboxes (keep's idle replicas are not evicted for it).
func (p *Pool) restore(ctx context.Context, snap string, keep *golden, what string) (*Lease, error) {
	if err := p.reserve(ctx, 1, keep); err != nil {
		return nil, err
	}
	defer p.demanding(1)()
	var m *member
	err := p.retry(ctx, "restore "+what, func() (err error) {
		m, err = p.boot(ctx, snap)
		return err
	})
	p.mu.Lock()
	if err == nil {
		p.boots++
	}
	if err != nil {
		p.live--
		p.signalLocked()
		p.mu.Unlock()
		return nil, fmt.Errorf("pool: restore %s: %w", what, err)
	}
	if p.closed {
		p.mu.Unlock()
		p.retire(m)
		return nil, p.closedErr()
	}
	l := p.leaseLocked(m)
	if keep != nil {
		keep.attachLocked(l) // a golden's replica: reset in place on release
	}
	p.watch(m)
	p.mu.Unlock()
	return l, nil
}
