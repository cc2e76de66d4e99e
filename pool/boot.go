package pool

import (
	"context"
	"fmt"
	"time"

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
	for len(p.warm)+p.booting < p.cfg.Size && p.live < limit {
		p.booting++
		p.live++
		p.wg.Add(1)
		go p.bootGeneral()
	}
	for _, g := range p.goldens {
		for g.ok && len(g.idle)+g.booting < p.cfg.ReplicasPerGolden && p.live < limit {
			g.booting++
			p.live++
			p.wg.Add(1)
			go p.bootReplica(g)
		}
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

// bootDone records a finished boot attempt; on failure it backs off
// before letting the filler try again.
func (p *Pool) bootDone(err error) {
	if err == nil {
		p.mu.Lock()
		p.boots++
		p.fails = 0
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	p.fails++
	p.lastErr = err
	d := min(50*time.Millisecond<<min(p.fails, 7), 5*time.Second)
	closed := p.closed
	p.mu.Unlock()
	if !closed {
		p.cfg.Logf("pool: boot failed (retrying in %v): %v", d, err)
	}
	select {
	case <-time.After(d):
	case <-p.ctx.Done():
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
	g.idle = append(g.idle, m)
	p.watch(m)
	p.signalLocked()
	p.mu.Unlock()
}
