// Package pool keeps live desktop sandboxes ready for the env server. A
// Provider (process, docker, ...) creates and destroys them; the Pool boots
// Size of them ahead (warm), hands them out as Leases, destroys a released
// sandbox (it is dirty) and refills in the background, watches health and
// replaces the dead, and per task keeps a golden snapshot taken after setup
// with ReplicasPerGolden warm pre-forked replicas, so a reset is a lease and
// not a boot.
//
// Sizing: Size is the number of warm general sandboxes kept ahead.
// MaxSandboxes caps every live sandbox the pool owns (warm, leased, golden
// replicas and boots in flight); by default it is what the host's memory
// holds. Callers that find no sandbox or no room queue first come, first
// served (admit.go); at the cap a caller first evicts an idle golden
// replica, otherwise waits until its deadline (LeaseTimeout or its
// context's) and then fails with ErrExhausted.
package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"golang.org/x/sync/semaphore"
)

// Config configures a Pool. Zero values take the defaults noted.
type Config struct {
	// Size is the number of warm general sandboxes kept ahead (default 4).
	Size int
	// MaxSandboxes caps all live sandboxes of the pool (default: as many
	// desktops of DesktopBytes as fit in 3/4 of the host's memory, at least
	// 2*Size+8).
	MaxSandboxes int
	// MaxConcurrentBoots bounds boots in flight (default 2).
	MaxConcurrentBoots int
	// LeaseTimeout bounds how long a caller queues for a sandbox or for room
	// (default 30 s); a caller's context deadline, when earlier, ends the
	// wait the same way, with ErrExhausted.
	LeaseTimeout time.Duration
	// ReplicasPerGolden is how many warm replicas each golden keeps
	// (default 2; negative: none, every golden lease restores on demand).
	ReplicasPerGolden int
	// ReplicaIdleTTL: an idle replica beyond the golden's ReplicasPerGolden
	// (one a burst left, kept while it was in use) is retired once unused
	// this long, so a burst's desktops do not stay for good (default 5
	// min; negative: kept until memory pressure retires them). Checked at
	// each health probe.
	ReplicaIdleTTL time.Duration
	// HealthInterval is the period of health probes (default 2 s; negative
	// disables probing, deaths are still seen through the provider and the
	// guest connection).
	HealthInterval time.Duration
	// HealthTimeout bounds one health probe (default 10 s). A sandbox
	// whose probes time out maxSlowProbes times in a row, its connection
	// still open, counts as dead.
	HealthTimeout time.Duration
	// BootAttempts is how many times a boot a caller waits for (an
	// on-demand restore, a fork) is tried before its failure is returned
	// (default 3). Background boots retry without end, backing off.
	BootAttempts int
	// BootBackoff is the wait after the first failed attempt, doubled
	// after each next one (default 200 ms).
	BootBackoff time.Duration
	// ResetMode is ResetModeInPlace (the default where the provider is a
	// Resetter) or ResetModeReboot.
	ResetMode string
	// ResetTimeout bounds one in-place reset (default 30 s); past it the
	// sandbox is retired.
	ResetTimeout time.Duration
	// ResetSettle, when set, bounds the settle of a sandbox just reset in
	// place: the pool waits until its screen is still before keeping it as a
	// replica, and its next lease reports Settled.
	ResetSettle *aci.Settle
	// Spec is the sandbox every boot asks for.
	Spec Spec
	// Logf receives operational messages; nil discards.
	Logf func(format string, args ...any)
}

// Stats is a point-in-time view of the pool, for metrics.
type Stats struct {
	Warm, Leased, Booting, Goldens, Replicas int
	Queued                                   int // callers waiting for a sandbox or for room
	Deaths, Boots                            uint64
	BootFailures                             uint64 // failed boot attempts, retried or not
	OnDemandRestores                         uint64 // golden leases that found no idle replica and waited for a restore
	// LimitDeaths counts the sandboxes killed at a limit, by reason
	// (LimitReasons), whether the pool saw the death or the holder released
	// the lease first.
	LimitDeaths           map[string]uint64
	Resetting             int    // in-place resets in flight
	Resets, ResetFailures uint64 // in-place resets done, and failed (the sandbox was retired)
	// BootFailStreak counts the background boots that failed since the
	// last one that succeeded.
	BootFailStreak int
}

// Pool is a warm pool of sandboxes. It is safe for concurrent use.
type Pool struct {
	prov     Provider
	snapper  Snapshotter // nil without snapshot+restore
	forker   Forker      // nil without fork
	resetter Resetter    // nil unless ResetMode is inplace and the provider resets
	caps     Capabilities
	cfg      Config
	sem      *semaphore.Weighted

	ctx    context.Context // background work; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the pool starts
	kick   chan struct{}  // wakes the filler (buffered 1)

	mu           sync.Mutex
	changed      chan struct{} // closed and replaced on every state change
	closed       bool
	warm         []*member
	booting      int // general boots in flight
	live         int // sandboxes counted against MaxSandboxes (incl. boots and teardowns)
	leased       map[*Lease]struct{}
	goldens      map[string]*golden
	deaths       uint64
	limitDeaths  map[string]uint64 // by reason
	boots        uint64
	bootFailures uint64
	onDemand     uint64
	resets       uint64
	resetFails   uint64
	wanted       int   // sandboxes that reserve calls are waiting for; refills leave them room
	demand       int   // boots callers wait on (restores, forks): refills wait for them
	warmQ, roomQ queue // callers waiting for a warm sandbox (Lease) and for room (reserve), oldest first
	fails        int   // consecutive boot failures (backoff)
	lastErr      error // last boot failure
	shutdown     chan struct{}
}

// member is one live sandbox owned by the pool.
type member struct {
	sb     *Sandbox
	guest  *client.Client
	golden *golden // set while it is an idle replica of golden
	lease  *Lease  // set while leased
	// settled: reset in place and its screen settled since; the next
	// lease reports it (Lease.Settled) and clears it.
	settled bool
	// idleSince: when it last became an idle replica (ReplicaIdleTTL).
	idleSince time.Time
	gone      chan struct{}
	once      sync.Once
}

// golden is a task's checkpoint after setup and its warm replicas.
type golden struct {
	key     string
	snap    string
	ready   chan struct{} // closed once the first setup finished (or failed)
	ok      bool          // snap is usable
	idle    []*member
	booting int
	// resetting counts released leases being reset in place to become
	// idle replicas: a lease waits for them rather than booting.
	resetting int
	// leased counts its leases not yet released: released leases are kept
	// (reset in place) while idle replicas number fewer than
	// ReplicasPerGolden plus these, so a golden keeps about as many
	// sandboxes as it recently had in use, and no more.
	leased int
}

// New starts a pool over prov and begins warming in the background; it
// returns at once. Close ends everything it started; prov stays open (its
// owner closes it).
func New(ctx context.Context, prov Provider, cfg Config) (*Pool, error) {
	if prov == nil {
		return nil, errors.New("pool: nil provider")
	}
	if cfg.Size < 0 {
		return nil, fmt.Errorf("pool: Size %d < 0", cfg.Size)
	}
	if cfg.Size == 0 {
		cfg.Size = 4
	}
	if cfg.MaxSandboxes == 0 {
		cfg.MaxSandboxes = max(2*cfg.Size+8, hostDesktops())
	}
	if cfg.MaxSandboxes < cfg.Size {
		return nil, fmt.Errorf("pool: MaxSandboxes %d < Size %d", cfg.MaxSandboxes, cfg.Size)
	}
	if cfg.MaxConcurrentBoots <= 0 {
		cfg.MaxConcurrentBoots = 2
	}
	if cfg.BootAttempts <= 0 {
		cfg.BootAttempts = 3
	}
	if cfg.BootBackoff <= 0 {
		cfg.BootBackoff = 200 * time.Millisecond
	}
	if cfg.LeaseTimeout <= 0 {
		cfg.LeaseTimeout = 30 * time.Second
	}
	if cfg.ReplicasPerGolden == 0 {
		cfg.ReplicasPerGolden = 2
	} else if cfg.ReplicasPerGolden < 0 {
		cfg.ReplicasPerGolden = 0
	}
	if cfg.HealthInterval == 0 {
		cfg.HealthInterval = 2 * time.Second
	}
	if cfg.ReplicaIdleTTL == 0 {
		cfg.ReplicaIdleTTL = 5 * time.Minute
	}
	if cfg.HealthTimeout <= 0 {
		cfg.HealthTimeout = 10 * time.Second
	}
	switch cfg.ResetMode {
	case "":
		cfg.ResetMode = ResetModeInPlace
	case ResetModeInPlace, ResetModeReboot:
	default:
		return nil, fmt.Errorf("pool: ResetMode %q; want %q or %q", cfg.ResetMode, ResetModeInPlace, ResetModeReboot)
	}
	if cfg.ResetTimeout <= 0 {
		cfg.ResetTimeout = 30 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	p := &Pool{
		prov:     prov,
		caps:     prov.Capabilities(),
		cfg:      cfg,
		sem:      semaphore.NewWeighted(int64(cfg.MaxConcurrentBoots)),
		kick:     make(chan struct{}, 1),
		changed:  make(chan struct{}),
		leased:   make(map[*Lease]struct{}),
		goldens:  make(map[string]*golden),
		shutdown: make(chan struct{}),
	}
	if s, ok := prov.(Snapshotter); ok && p.caps.Snapshot && p.caps.Restore {
		p.snapper = s
	}
	if f, ok := prov.(Forker); ok && p.caps.Fork && p.snapper != nil {
		p.forker = f
	}
	if r, ok := prov.(Resetter); ok && p.snapper != nil && cfg.ResetMode == ResetModeInPlace {
		p.resetter = r
	}
	p.ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.wg.Add(1)
	go p.filler()
	p.poke()
	return p, nil
}

// MaxSandboxes is the cap on live sandboxes the pool runs under.
func (p *Pool) MaxSandboxes() int { return p.cfg.MaxSandboxes }

// ResetMode is the pool's effective reset mode: ResetModeInPlace only where
// the provider can reset in place.
func (p *Pool) ResetMode() string {
	if p.resetter != nil {
		return ResetModeInPlace
	}
	return ResetModeReboot
}

// Capabilities returns the provider's descriptor.
func (p *Pool) Capabilities() Capabilities { return p.caps }

// Stats returns counts for metrics.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Warm: len(p.warm), BootFailStreak: p.fails, Leased: len(p.leased), Booting: p.booting, Goldens: len(p.goldens), Deaths: p.deaths, Boots: p.boots, BootFailures: p.bootFailures, OnDemandRestores: p.onDemand,
		Queued: len(p.warmQ) + len(p.roomQ), Resets: p.resets, ResetFailures: p.resetFails}
	if len(p.limitDeaths) > 0 {
		s.LimitDeaths = make(map[string]uint64, len(p.limitDeaths))
		for r, n := range p.limitDeaths {
			s.LimitDeaths[r] = n
		}
	}
	for _, g := range p.goldens {
		s.Replicas += len(g.idle)
		s.Booting += g.booting
		s.Resetting += g.resetting
	}
	return s
}

// signalLocked wakes everyone waiting for a state change.
func (p *Pool) signalLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// poke wakes the filler.
func (p *Pool) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// filler keeps the warm set and the golden replicas topped up.
func (p *Pool) filler() {
	defer p.wg.Done()
	for {
		p.fill()
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		}
	}
}

// takeWarmLocked takes a live warm member (newest first), or nil. Dead
// ones stay for their monitor to remove.
func (p *Pool) takeWarmLocked() *member {
	for i := len(p.warm) - 1; i >= 0; i-- {
		if m := p.warm[i]; alive(m) {
			p.warm = append(p.warm[:i], p.warm[i+1:]...)
			return m
		}
	}
	return nil
}

// evictReplicaLocked retires one idle golden replica to make room under
// MaxSandboxes; it reports whether it did.
func (p *Pool) evictReplicaLocked(except *golden) *member {
	for _, g := range p.goldens {
		if g == except || len(g.idle) == 0 {
			continue
		}
		m := g.idle[0]
		g.idle = g.idle[1:]
		m.golden = nil
		return m
	}
	return nil
}

// exhausted is the error of a caller that waited for a sandbox or for room
// until its deadline.
func (p *Pool) exhausted(what string, waited time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := fmt.Sprintf("pool: no %s free after waiting %v (%d leased, %d booting, %d of max %d live, %d queued); raise max_sandboxes (Config.MaxSandboxes) or reset_timeout, or lower the load",
		what, waited.Round(time.Millisecond), len(p.leased), p.booting, p.live, p.cfg.MaxSandboxes, len(p.warmQ)+len(p.roomQ))
	if p.lastErr != nil && p.fails > 0 {
		msg += fmt.Sprintf("; boots are failing: %v", p.lastErr)
	}
	return Errorf(ErrExhausted, aci.CodePoolExhausted, "%s", msg)
}

func (p *Pool) closedErr() error {
	return Errorf(ErrClosed, aci.CodeInternal, "pool: closed")
}

// Lease hands out a fresh warm sandbox. When none is warm it queues (first
// come, first served) for the next one the pool boots, up to LeaseTimeout
// or ctx's deadline, and then fails with an error wrapping ErrExhausted.
func (p *Pool) Lease(ctx context.Context) (*Lease, error) {
	a := p.admission(ctx, "sandbox")
	defer a.stop()
	w := &waiter{n: 1}
	p.mu.Lock()
	p.warmQ = append(p.warmQ, w)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.warmQ = p.warmQ.without(w)
		p.signalLocked()
		p.mu.Unlock()
	}()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, p.closedErr()
		}
		var evict *member
		if p.warmQ.first(w) {
			if m := p.takeWarmLocked(); m != nil {
				l := p.leaseLocked(m)
				p.mu.Unlock()
				p.poke()
				return l, nil
			}
			if p.live >= p.cfg.MaxSandboxes {
				evict = p.evictReplicaLocked(nil)
			}
		}
		ch := p.changed
		p.mu.Unlock()
		if evict != nil {
			p.retire(evict)
		}
		p.poke()
		if err := a.wait(ch); err != nil {
			return nil, err
		}
	}
}

// leaseLocked wraps m into a lease.
func (p *Pool) leaseLocked(m *member) *Lease {
	l := &Lease{p: p, m: m, dead: make(chan struct{}), settled: m.settled}
	m.lease = l
	m.settled = false
	m.golden = nil
	p.leased[l] = struct{}{}
	p.signalLocked()
	return l
}

// WaitWarm blocks until at least n general sandboxes are warm (n is capped
// at Size), or ctx ends.
func (p *Pool) WaitWarm(ctx context.Context, n int) error {
	n = min(n, p.cfg.Size)
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return p.closedErr()
		}
		if len(p.warm) >= n {
			p.mu.Unlock()
			return nil
		}
		ch, last := p.changed, p.lastErr
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("pool: wait warm: %w (last boot error: %v)", ctx.Err(), last)
			}
			return fmt.Errorf("pool: wait warm: %w", ctx.Err())
		}
	}
}

// Close ends every sandbox the pool started (warm, leased, replicas, and
// boots in flight), deletes the snapshots it made, and waits for every
// goroutine it started. Holders of leases see them die. The provider stays
// open.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	var all []*member
	all = append(all, p.warm...)
	p.warm = nil
	var leases []*Lease
	for l := range p.leased {
		leases = append(leases, l)
		all = append(all, l.m)
	}
	var snaps []string
	for _, g := range p.goldens {
		all = append(all, g.idle...)
		g.idle = nil
		if g.ok {
			snaps = append(snaps, g.snap)
		}
	}
	p.signalLocked()
	p.mu.Unlock()
	p.cancel()
	for _, l := range leases {
		l.kill(Errorf(ErrSandboxDied, aci.CodeSandboxDied, "pool closed"))
	}
	for _, m := range all {
		p.retire(m)
	}
	for _, s := range snaps {
		p.deleteSnapshot(s)
	}
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("pool: close: %w", ctx.Err())
	}
}
