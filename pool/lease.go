package pool

import (
	"context"
	"sync"

	"github.com/shinken-rl/shinken/guest/client"
)

// Lease is one sandbox handed out by the pool. Its holder drives it
// through Guest and ends it with Release.
type Lease struct {
	p    *Pool
	m    *member
	dead chan struct{}
	// golden is the checkpoint the lease started from (LeaseGolden): its
	// release resets the sandbox in place to it (docs/architecture.md,
	// "Reset in place"). nil for other leases.
	golden *golden
	// settled: the sandbox was reset in place and its screen settled
	// before it was handed out.
	settled bool

	mu       sync.Mutex
	err      error
	released bool
}

// ID is the sandbox's id.
func (l *Lease) ID() string { return l.m.sb.ID }

// Guest is the connection to the sandbox's guestd, owned by the pool.
func (l *Lease) Guest() *client.Client { return l.m.guest }

// Sandbox describes the leased sandbox.
func (l *Lease) Sandbox() *Sandbox { return l.m.sb }

// Settled reports that the sandbox was reset in place and its screen had
// settled (Config.ResetSettle) before it was handed out: its first
// observation need not wait for drawing that already happened.
func (l *Lease) Settled() bool { return l.settled }

// Dead is closed when the sandbox died (health check, provider signal, or
// the pool closing).
func (l *Lease) Dead() <-chan struct{} { return l.dead }

// Err is nil while the sandbox lives, then an error wrapping ErrSandboxDied
// (with code sandbox_died).
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// kill marks the lease dead with err (once).
func (l *Lease) kill(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || l.released {
		return
	}
	l.err = err
	close(l.dead)
}

// Release gives the sandbox back. It is dirty: a lease of a golden is reset
// in place to that golden in the background and kept as a warm replica
// (ResetModeInPlace); otherwise, or when that reset fails, the pool destroys
// it and refills. Release returns at once and is idempotent.
func (l *Lease) Release(ctx context.Context) {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return
	}
	l.released = true
	dead := l.err != nil
	l.mu.Unlock()
	p := l.p
	p.mu.Lock()
	delete(p.leased, l)
	l.m.lease = nil
	g := l.golden
	recycle := !dead && !p.closed && g != nil && p.keepsResetLocked(g)
	if g != nil {
		g.leased--
	}
	if recycle {
		g.resetting++
		p.wg.Add(1)
	}
	p.signalLocked()
	p.mu.Unlock()
	if recycle {
		go p.recycle(l.m, g)
		return
	}
	p.retire(l.m)
}
