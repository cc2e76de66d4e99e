package pool

import (
	"context"
	"fmt"

	"github.com/shinken-rl/shinken/aci"
	"golang.org/x/sync/errgroup"
)

// reserve counts n sandboxes against MaxSandboxes. Callers short of room
// queue first come, first served, evicting idle replicas (of goldens other
// than keep) and warm general sandboxes to make it, up to LeaseTimeout or
// ctx's deadline.
func (p *Pool) reserve(ctx context.Context, n int, keep *golden) error {
	if n <= 0 {
		return nil
	}
	if n > p.cfg.MaxSandboxes {
		return Errorf(ErrExhausted, aci.CodePoolExhausted, "pool: %d sandboxes asked for, over the cap of %d; raise max_sandboxes (Config.MaxSandboxes)", n, p.cfg.MaxSandboxes)
	}
	a := p.admission(ctx, fmt.Sprintf("room for %d sandbox(es)", n))
	defer a.stop()
	w := &waiter{n: n}
	waiting := false
	p.mu.Lock()
	p.roomQ = append(p.roomQ, w)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.roomQ = p.roomQ.without(w)
		if waiting {
			p.wanted -= n
		}
		p.signalLocked()
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return p.closedErr()
		}
		first := p.roomQ.first(w)
		if first && p.live+n <= p.cfg.MaxSandboxes {
			p.live += n
			p.mu.Unlock()
			return nil
		}
		if !waiting {
			waiting = true
			p.wanted += n
		}
		var evict *member
		if first {
			if evict = p.evictReplicaLocked(keep); evict == nil && len(p.warm) > 0 {
				// Warm general sandboxes are refilled later; make room now.
				evict = p.warm[0]
				p.warm = p.warm[1:]
			}
		}
		ch := p.changed
		p.mu.Unlock()
		if evict != nil {
			p.retire(evict)
		}
		if err := a.wait(ch); err != nil {
			return err
		}
	}
}

// Fork snapshots src now and starts n sandboxes from it, leased to the
// caller. It fails with ErrUnsupported when the provider cannot fork.
func (p *Pool) Fork(ctx context.Context, src *Lease, n int) ([]*Lease, error) {
	if p.forker == nil {
		return nil, p.unsupported("fork")
	}
	if n < 1 {
		return nil, aci.Errorf(aci.CodeBadRequest, "pool: fork n must be at least 1; got %d", n)
	}
	snap, err := p.Snapshot(ctx, src)
	if err != nil {
		return nil, fmt.Errorf("pool: fork: %w", err)
	}
	defer p.deleteSnapshot(snap)
	return p.ForkSnapshot(ctx, snap, n)
}

// ForkSnapshot starts n sandboxes from snap (a snapshot made by Snapshot),
// leased to the caller, once there is room for all n under MaxSandboxes.
// Idle sandboxes are reset in place to the snapshot (docs/architecture.md,
// "Reset in place"); only the rest are booted.
func (p *Pool) ForkSnapshot(ctx context.Context, snap string, n int) ([]*Lease, error) {
	if p.forker == nil {
		return nil, p.unsupported("fork")
	}
	if n < 1 {
		return nil, aci.Errorf(aci.CodeBadRequest, "pool: fork n must be at least 1; got %d", n)
	}
	var idle []*member
	if p.resetter != nil {
		p.mu.Lock()
		if !p.closed {
			idle = p.takeIdleLocked(n)
		}
		p.mu.Unlock()
	}
	giveUp := func() {
		for _, m := range idle {
			p.retire(m)
		}
	}
	if err := p.reserve(ctx, n-len(idle), nil); err != nil {
		giveUp()
		return nil, err
	}
	reserved := n - len(idle)
	unreserve := func(k int) {
		p.mu.Lock()
		p.live -= k
		p.signalLocked()
		p.mu.Unlock()
		p.poke()
	}
	var reset []*member
	if len(idle) > 0 {
		reset = p.resetAll(ctx, idle, snap)
		if short := len(idle) - len(reset); short > 0 {
			if err := p.reserve(ctx, short, nil); err != nil {
				idle = reset
				giveUp()
				unreserve(reserved)
				return nil, fmt.Errorf("pool: fork: %w", err)
			}
			reserved += short
		}
	}
	var ms []*member
	if reserved > 0 {
		done := p.demanding(reserved)
		err := p.retry(ctx, "fork", func() (err error) {
			ms, err = p.forkOnce(ctx, snap, reserved)
			return err
		})
		done()
		if err != nil {
			idle = reset
			giveUp()
			unreserve(reserved)
			return nil, fmt.Errorf("pool: fork: %w", err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.boots += uint64(len(ms))
	out := make([]*Lease, 0, n)
	for _, m := range reset {
		out = append(out, p.leaseLocked(m)) // watched since its boot
	}
	for _, m := range ms {
		out = append(out, p.leaseLocked(m))
		p.watch(m)
	}
	if p.closed {
		for _, l := range out {
			go l.Release(context.Background())
		}
		return nil, p.closedErr()
	}
	return out, nil
}

// forkOnce starts n sandboxes from snap and connects to their guests. On
// failure it destroys what it made (their slots stay reserved).
func (p *Pool) forkOnce(ctx context.Context, snap string, n int) ([]*member, error) {
	w := int64(min(n, p.cfg.MaxConcurrentBoots))
	if err := p.sem.Acquire(ctx, w); err != nil {
		return nil, err
	}
	sbs, err := p.forker.Fork(ctx, snap, n, p.cfg.Spec)
	p.sem.Release(w)
	if err != nil {
		return nil, err
	}
	ms := make([]*member, n)
	g, gctx := errgroup.WithContext(ctx)
	for i, sb := range sbs {
		g.Go(func() error {
			m, err := p.adopt(gctx, sb)
			ms[i] = m
			return err
		})
	}
	if err := g.Wait(); err != nil {
		for i, m := range ms {
			if m != nil {
				m.guest.Close()
				p.destroy(m.sb.ID)
			} else {
				p.destroy(sbs[i].ID) // idempotent: adopt may have destroyed it
			}
		}
		return nil, err
	}
	return ms, nil
}
