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
// replicas and boots in flight). When the cap is reached a lease first evicts
// an idle golden replica, otherwise waits up to LeaseTimeout and then fails
// with ErrExhausted.
package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// Config configures a Pool. Zero values take the defaults noted.
type Config struct {
	// Size is the number of warm general sandboxes kept ahead (default 4).
	Size int
	// MaxSandboxes caps all live sandboxes of the pool (default 2*Size+8).
	MaxSandboxes int
	// MaxConcurrentBoots bounds boots in flight (default 2).
	MaxConcurrentBoots int
	// LeaseTimeout bounds how long a lease waits for a sandbox (default 30 s).
	LeaseTimeout time.Duration
	// ReplicasPerGolden is how many warm replicas each golden keeps
	// (default 2; negative: none, every golden lease restores on demand).
	ReplicasPerGolden int
	// HealthInterval is the period of health probes (default 2 s; negative
	// disables probing, deaths are still seen through the provider and the
	// guest connection).
	HealthInterval time.Duration
	// Spec is the sandbox every boot asks for.
	Spec Spec
	// Logf receives operational messages; nil discards.
	Logf func(format string, args ...any)
}

// Stats is a point-in-time view of the pool, for metrics.
type Stats struct {
	Warm, Leased, Booting, Goldens, Replicas int
	Deaths, Boots                            uint64
}

// Pool is a warm pool of sandboxes. It is safe for concurrent use.
type Pool struct {
	prov    Provider
	snapper Snapshotter // nil without snapshot+restore
	forker  Forker      // nil without fork
	caps    Capabilities
	cfg     Config
	sem     *semaphore.Weighted

	ctx    context.Context // background work; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the pool starts
	kick   chan struct{}  // wakes the filler (buffered 1)

	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every state change
	closed   bool
	warm     []*member
	booting  int // general boots in flight
	live     int // sandboxes counted against MaxSandboxes (incl. boots and teardowns)
	leased   map[*Lease]struct{}
	goldens  map[string]*golden
	deaths   uint64
	boots    uint64
	wanted   int   // sandboxes that reserve calls are waiting for; refills leave them room
	fails    int   // consecutive boot failures (backoff)
	lastErr  error // last boot failure
	shutdown chan struct{}
}

// member is one live sandbox owned by the pool.
type member struct {
	sb     *Sandbox
	guest  *client.Client
	golden *golden // set while it is an idle replica of golden
	lease  *Lease  // set while leased
	gone   chan struct{}
	once   sync.Once
}

// golden is a task's checkpoint after setup and its warm replicas.
type golden struct {
	key     string
	snap    string
	ready   chan struct{} // closed once the first setup finished (or failed)
	ok      bool          // snap is usable
	idle    []*member
	booting int
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
		cfg.MaxSandboxes = 2*cfg.Size + 8
	}
	if cfg.MaxSandboxes < cfg.Size {
		return nil, fmt.Errorf("pool: MaxSandboxes %d < Size %d", cfg.MaxSandboxes, cfg.Size)
	}
	if cfg.MaxConcurrentBoots <= 0 {
		cfg.MaxConcurrentBoots = 2
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
	p.ctx, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.wg.Add(1)
	go p.filler()
	p.poke()
	return p, nil
}

// Capabilities returns the provider's descriptor.
func (p *Pool) Capabilities() Capabilities { return p.caps }

// Stats returns counts for metrics.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{Warm: len(p.warm), Leased: len(p.leased), Booting: p.booting, Goldens: len(p.goldens), Deaths: p.deaths, Boots: p.boots}
	for _, g := range p.goldens {
		s.Replicas += len(g.idle)
		s.Booting += g.booting
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
			ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
			h, err := m.guest.Health(ctx)
			cancel()
			switch {
			case p.ctx.Err() != nil:
				return
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
		}
	}
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
	p.removeLocked(m)
	l := m.lease
	p.signalLocked()
	p.mu.Unlock()
	p.cfg.Logf("pool: sandbox %s died: %s", m.sb.ID, why)
	if l != nil {
		l.kill(Errorf(ErrSandboxDied, aci.CodeSandboxDied, "sandbox %s died: %s", m.sb.ID, why))
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

// exhausted is the error of a lease that waited LeaseTimeout.
func (p *Pool) exhausted(what string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := fmt.Sprintf("pool: no %s free after %v (%d leased, %d booting, %d of max %d live); raise the pool size (--pool / Config.Size, Config.MaxSandboxes)",
		what, p.cfg.LeaseTimeout, len(p.leased), p.booting, p.live, p.cfg.MaxSandboxes)
	if p.lastErr != nil && p.fails > 0 {
		msg += fmt.Sprintf("; boots are failing: %v", p.lastErr)
	}
	return Errorf(ErrExhausted, aci.CodePoolExhausted, "%s", msg)
}

func (p *Pool) closedErr() error {
	return Errorf(ErrClosed, aci.CodeInternal, "pool: closed")
}

// Lease hands out a fresh warm sandbox. When none is warm it waits, up to
// LeaseTimeout (and ctx), for one, and then fails with an error wrapping
// ErrExhausted.
func (p *Pool) Lease(ctx context.Context) (*Lease, error) {
	timer := time.NewTimer(p.cfg.LeaseTimeout)
	defer timer.Stop()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, p.closedErr()
		}
		if m := p.takeWarmLocked(); m != nil {
			l := p.leaseLocked(m)
			p.mu.Unlock()
			p.poke()
			return l, nil
		}
		var evict *member
		if p.live >= p.cfg.MaxSandboxes {
			evict = p.evictReplicaLocked(nil)
		}
		ch := p.changed
		p.mu.Unlock()
		if evict != nil {
			p.retire(evict)
		}
		p.poke()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("pool: lease: %w", ctx.Err())
		case <-timer.C:
			return nil, p.exhausted("sandbox")
		}
	}
}

// leaseLocked wraps m into a lease.
func (p *Pool) leaseLocked(m *member) *Lease {
	l := &Lease{p: p, m: m, dead: make(chan struct{})}
	m.lease = l
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
			m := g.idle[0]
			g.idle = g.idle[1:]
			m.golden = nil
			if alive(m) {
				l := p.leaseLocked(m)
				p.mu.Unlock()
				p.poke()
				return l, nil
			}
			p.mu.Unlock()
			p.retire(m)
			p.mu.Lock()
		}
		p.mu.Unlock()
		return p.restoreGolden(ctx, g)
	}
}

// leaseAndSetup is the fallback without snapshots.
func (p *Pool) leaseAndSetup(ctx context.Context, key string, setup func(ctx context.Context, l *Lease) error) (*Lease, error) {
	l, err := p.Lease(ctx)
	if err != nil {
		return nil, err
	}
	if err := setup(ctx, l); err != nil {
		l.Release(ctx)
		return nil, fmt.Errorf("pool: setup of %q: %w", key, err)
	}
	return l, nil
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
	close(g.ready)
	p.signalLocked()
	p.mu.Unlock()
	p.poke()
	return l, nil
}

// restoreGolden boots a replica on demand (no idle one was warm).
func (p *Pool) restoreGolden(ctx context.Context, g *golden) (*Lease, error) {
	if err := p.reserve(ctx, 1, g); err != nil {
		return nil, err
	}
	m, err := p.boot(ctx, g.snap)
	p.mu.Lock()
	if err == nil {
		p.boots++
	}
	if err != nil {
		p.live--
		p.signalLocked()
		p.mu.Unlock()
		return nil, fmt.Errorf("pool: restore golden %q: %w", g.key, err)
	}
	if p.closed {
		p.mu.Unlock()
		p.retire(m)
		return nil, p.closedErr()
	}
	l := p.leaseLocked(m)
	p.watch(m)
	p.mu.Unlock()
	return l, nil
}

// reserve counts n sandboxes against MaxSandboxes, waiting (evicting idle
// replicas of other goldens) up to LeaseTimeout.
func (p *Pool) reserve(ctx context.Context, n int, keep *golden) error {
	if n > p.cfg.MaxSandboxes {
		return Errorf(ErrExhausted, aci.CodePoolExhausted, "pool: %d sandboxes asked for, over the cap of %d; raise Config.MaxSandboxes (--pool)", n, p.cfg.MaxSandboxes)
	}
	timer := time.NewTimer(p.cfg.LeaseTimeout)
	defer timer.Stop()
	waiting := false
	defer func() {
		if waiting {
			p.mu.Lock()
			p.wanted -= n
			p.mu.Unlock()
		}
	}()
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return p.closedErr()
		}
		if p.live+n <= p.cfg.MaxSandboxes {
			p.live += n
			p.mu.Unlock()
			return nil
		}
		if !waiting {
			waiting = true
			p.wanted += n
		}
		var evict *member
		if evict = p.evictReplicaLocked(keep); evict == nil && len(p.warm) > 0 {
			// Warm general sandboxes are refilled later; make room now.
			evict = p.warm[0]
			p.warm = p.warm[1:]
		}
		ch := p.changed
		p.mu.Unlock()
		if evict != nil {
			p.retire(evict)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("pool: reserve: %w", ctx.Err())
		case <-timer.C:
			return p.exhausted(fmt.Sprintf("room for %d sandbox(es)", n))
		}
	}
}

// Fork snapshots src now and starts n sandboxes from it, leased to the
// caller. It fails with ErrUnsupported when the provider cannot fork.
func (p *Pool) Fork(ctx context.Context, src *Lease, n int) ([]*Lease, error) {
	if p.forker == nil {
		return nil, Errorf(ErrUnsupported, aci.CodeUnsupported, "pool: provider %s cannot fork (snapshot_kind %s)", p.caps.Provider, p.caps.SnapshotKind)
	}
	if n < 1 {
		return nil, aci.Errorf(aci.CodeBadRequest, "pool: fork n must be at least 1; got %d", n)
	}
	if err := src.Err(); err != nil {
		return nil, err
	}
	if err := p.reserve(ctx, n, nil); err != nil {
		return nil, err
	}
	unreserve := func(k int) {
		p.mu.Lock()
		p.live -= k
		p.signalLocked()
		p.mu.Unlock()
		p.poke()
	}
	snap, err := p.snapper.Snapshot(ctx, src.m.sb.ID)
	if err != nil {
		unreserve(n)
		return nil, fmt.Errorf("pool: fork: snapshot: %w", err)
	}
	defer p.deleteSnapshot(snap)
	w := int64(min(n, p.cfg.MaxConcurrentBoots))
	if err := p.sem.Acquire(ctx, w); err != nil {
		unreserve(n)
		return nil, fmt.Errorf("pool: fork: %w", err)
	}
	sbs, err := p.forker.Fork(ctx, snap, n, p.cfg.Spec)
	p.sem.Release(w)
	if err != nil {
		unreserve(n)
		return nil, fmt.Errorf("pool: fork: %w", err)
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
				p.retire(m)
			} else {
				p.destroy(sbs[i].ID)
				unreserve(1)
			}
		}
		return nil, fmt.Errorf("pool: fork: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.boots += uint64(n)
	out := make([]*Lease, n)
	for i, m := range ms {
		out[i] = p.leaseLocked(m)
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

func (p *Pool) deleteSnapshot(snap string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.snapper.DeleteSnapshot(ctx, snap); err != nil {
		p.cfg.Logf("pool: delete snapshot %s: %v", snap, err)
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
