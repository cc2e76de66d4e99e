package pool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
)

// fill starts the boots the pool is short of, within MaxSandboxes.
func (p *Pool) fill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	// Room for refills excludes what waiting reservations need, so a
	// slot freed for a restore or fork is not taken by a background refill.
	limit := p.cfg.MaxSandboxes - p.wanted
	// Boots a caller waits on come first: while any is in flight, the
	// pool refills only for callers queued for a warm sandbox, so a burst's
	// restores do not share the CPU with refills nobody waits for yet
	// (docs/architecture.md, "Bursts").
	if p.demand > 0 && len(p.warmQ) == 0 {
		return
	}
	for len(p.warm)+p.booting < p.cfg.Size && p.live < limit {
		p.booting++
		p.live++
		p.wg.Add(1)
		go p.bootGeneral()
	}
	for _, g := range p.goldens {
		for g.ok && len(g.idle)+g.booting+g.resetting < p.cfg.ReplicasPerGolden && p.live < limit {
			g.booting++
			p.live++
			p.wg.Add(1)
			go p.bootReplica(g)
		}
	}
}

// demanding counts n boots a caller waits on until the returned func is
// called (fill defers refills meanwhile).
func (p *Pool) demanding(n int) func() {
	p.mu.Lock()
	p.demand += n
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		p.demand -= n
		p.mu.Unlock()
		p.poke()
	}
}

// boot makes one sandbox (fresh, or restored from snap) and connects to
// its guest, under the boot semaphore.
func (p *Pool) boot(ctx context.Context, snap string) (*member, error) {
	if err := p.sem.Acquire(ctx, 1); err != nil {
		return nil, err
	}
	defer p.sem.Release(1)
	var sb *Sandbox
	var err error
	if snap == "" {
		sb, err = p.prov.Create(ctx, p.cfg.Spec)
	} else {
		sb, err = p.snapper.Restore(ctx, snap, p.cfg.Spec)
	}
	if err != nil {
		return nil, err
	}
	return p.adopt(ctx, sb)
}

// adopt connects to a new sandbox's guest; on failure it destroys it.
func (p *Pool) adopt(ctx context.Context, sb *Sandbox) (*member, error) {
	c, err := client.Dial(ctx, sb.GuestNetwork, sb.GuestAddr)
	if err != nil {
		p.destroy(sb.ID)
		return nil, fmt.Errorf("pool: connect to guest of %s: %w", sb.ID, err)
	}
	return &member{sb: sb, guest: c, gone: make(chan struct{})}, nil
}

// bootDone records a finished background boot attempt; on failure it
// backs off before letting the filler try again.
func (p *Pool) bootDone(err error) {
	if err == nil {
		p.mu.Lock()
		p.boots++
		p.fails = 0
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	d := min(50*time.Millisecond<<min(p.fails+1, 7), 5*time.Second)
	p.mu.Unlock()
	p.bootFailed(err, fmt.Sprintf("background; retrying in %v", d))
	select {
	case <-time.After(d):
	case <-p.ctx.Done():
	}
}

// bootFailed counts and logs one failed boot attempt with its cause (the
// provider's error carries the sandbox's log tail).
func (p *Pool) bootFailed(err error, what string) {
	p.mu.Lock()
	p.fails++
	p.bootFailures++
	p.lastErr = err
	closed := p.closed
	p.mu.Unlock()
	if !closed {
		p.cfg.Logf("pool: boot failed (%s): %v", what, err)
	}
}

// retryable reports whether a failed boot may succeed when tried again:
// not when the caller gave up, nor for an error of a kind that the one
// error table (aci.Codes) does not call the infrastructure's (the pool or
// provider closing, an unknown snapshot), nor when no display is free
// (pool_exhausted: a job may retry elsewhere; a boot here would not find
// one either).
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	for _, k := range kinds {
		if errors.Is(err, k.err) && (!k.code.Retryable() || k.code == aci.CodePoolExhausted) {
			return false
		}
	}
	return true
}

// retry runs one boot attempt up to BootAttempts times with exponential
// backoff from BootBackoff, while the failure is retryable and ctx lives.
// Every failure is counted and logged; the last one is returned, wrapped
// with the number of attempts.
func (p *Pool) retry(ctx context.Context, what string, attempt func() error) error {
	wait := p.cfg.BootBackoff
	for i := 1; ; i++ {
		err := attempt()
		if err == nil {
			p.mu.Lock()
			p.fails = 0
			p.mu.Unlock()
			return nil
		}
		if !retryable(ctx, err) {
			return err
		}
		p.bootFailed(err, fmt.Sprintf("%s, attempt %d of %d", what, i, p.cfg.BootAttempts))
		if i >= p.cfg.BootAttempts {
			return fmt.Errorf("%d boot attempts failed, the last: %w", i, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (after a failed boot: %v)", ctx.Err(), err)
		}
		wait *= 2
	}
}

func (p *Pool) bootGeneral() {
	defer p.wg.Done()
	m, err := p.boot(p.ctx, "")
	p.bootDone(err)
	p.mu.Lock()
	p.booting--
	if err != nil {
		p.live--
		p.signalLocked()
		p.mu.Unlock()
		p.poke()
		return
	}
	if p.closed {
		p.mu.Unlock()
		p.retire(m)
		return
	}
	p.warm = append(p.warm, m)
	p.watch(m)
	p.signalLocked()
	p.mu.Unlock()
}

func (p *Pool) bootReplica(g *golden) {
	defer p.wg.Done()
	m, err := p.boot(p.ctx, g.snap)
	p.bootDone(err)
	p.mu.Lock()
	g.booting--
	if err != nil {
		p.live--
		p.signalLocked()
		p.mu.Unlock()
		p.poke()
		return
	}
	if p.closed || p.goldens[g.key] != g {
		p.mu.Unlock()
		p.retire(m)
		return
	}
	m.golden = g
	m.idleSince = time.Now()
	g.idle = append(g.idle, m)
	p.watch(m)
	p.signalLocked()
	p.mu.Unlock()
}
