package pool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/pooltest"
	"github.com/shinken-rl/shinken/pool/process"
)

var guestdPath, skipReason string

func TestMain(m *testing.M) {
	process.MaybeRunInit()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if _, err := exec.LookPath("Xvfb"); err != nil {
		skipReason = "Xvfb not on PATH (apt-get install xvfb)"
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "pool-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if guestdPath, err = pooltest.BuildGuestd(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// newProvider starts a process provider that the test closes.
func newProvider(t testing.TB) *process.Provider {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	prov, err := process.New(context.Background(), process.Options{Root: t.TempDir(), GuestdPath: guestdPath, Logf: t.Logf, MaxConcurrentBoots: 8})
	if err != nil {
		t.Fatalf("process.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := prov.Close(ctx); err != nil {
			t.Errorf("provider Close: %v", err)
		}
	})
	return prov
}

// newPool starts a pool over prov that the test closes (before the provider).
func newPool(t testing.TB, prov pool.Provider, cfg pool.Config) *pool.Pool {
	t.Helper()
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	p, err := pool.New(context.Background(), prov, cfg)
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("pool Close: %v", err)
		}
	})
	return p
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func sh(t *testing.T, l *pool.Lease, script string) (string, int) {
	t.Helper()
	return pooltest.Sh(t, l.Guest(), script)
}

func stats(p *pool.Pool) pool.Stats { return p.Stats() }

func TestLeaseRelease(t *testing.T) {
	prov := newProvider(t)
	p := newPool(t, prov, pool.Config{Size: 2})
	if err := p.WaitWarm(ctxT(t), 2); err != nil {
		t.Fatalf("WaitWarm: %v", err)
	}
	l, err := p.Lease(ctxT(t))
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	if got := pooltest.MustSh(t, l.Guest(), "echo hi"); got != "hi" {
		t.Fatalf("exec in lease: got %q; want %q", got, "hi")
	}
	if l.ID() == "" || l.Sandbox() == nil || l.Err() != nil {
		t.Fatalf("lease = id %q sandbox %v err %v; want an id, a sandbox, no error", l.ID(), l.Sandbox(), l.Err())
	}
	if s := stats(p); s.Leased != 1 {
		t.Fatalf("Stats.Leased = %d; want 1", s.Leased)
	}
	procs := pooltest.NSProcs(prov.PIDNamespace(l.ID()))
	if len(procs) < 3 {
		t.Fatalf("sandbox processes = %d; want at least guestd, Xvfb, WM", len(procs))
	}
	l.Release(ctxT(t))
	l.Release(ctxT(t)) // idempotent
	pooltest.Eventually(t, time.Minute, "refilled to 2 warm after release", func() bool {
		s := stats(p)
		return s.Warm == 2 && s.Leased == 0 && s.Boots >= 3
	})
	pooltest.Eventually(t, 10*time.Second, "released sandbox's processes gone", func() bool { return len(pooltest.Survivors(procs)) == 0 })
	select {
	case <-l.Dead():
		t.Fatalf("Dead closed for a released (not dead) lease")
	default:
	}
}

func TestExhaustedIsBoundedAndTyped(t *testing.T) {
	prov := newProvider(t)
	p := newPool(t, prov, pool.Config{Size: 1, MaxSandboxes: 1, LeaseTimeout: 300 * time.Millisecond})
	if err := p.WaitWarm(ctxT(t), 1); err != nil {
		t.Fatalf("WaitWarm: %v", err)
	}
	a, err := p.Lease(ctxT(t))
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	start := time.Now()
	_, err = p.Lease(ctxT(t))
	if !errors.Is(err, pool.ErrExhausted) || aci.CodeOf(err) != aci.CodePoolExhausted {
		t.Fatalf("Lease on a full pool = %v; want ErrExhausted with code pool_exhausted", err)
	}
	if !strings.Contains(err.Error(), "max_sandboxes") {
		t.Errorf("exhausted message %q does not name the setting to raise (max_sandboxes)", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("exhausted lease waited %v; want about LeaseTimeout", d)
	}
	a.Release(ctxT(t))
	b, err := p.Lease(ctxT(t)) // waits for the refill; LeaseTimeout is short, so retry
	for errors.Is(err, pool.ErrExhausted) {
		b, err = p.Lease(ctxT(t))
	}
	if err != nil {
		t.Fatalf("Lease after release: %v", err)
	}
	b.Release(ctxT(t))
}

// killTest leases a sandbox, kills part of it with kill, and checks the
// holder sees a typed death, the pool replaces it, and nothing leaks.
func killTest(t *testing.T, kill func(t *testing.T, prov *process.Provider, l *pool.Lease)) {
	prov := newProvider(t)
	p := newPool(t, prov, pool.Config{Size: 1, HealthInterval: 100 * time.Millisecond})
	l, err := p.Lease(ctxT(t))
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	procs := pooltest.NSProcs(prov.PIDNamespace(l.ID()))
	kill(t, prov, l)
	select {
	case <-l.Dead():
	case <-time.After(30 * time.Second):
		t.Fatalf("lease not reported dead within 30s")
	}
	if err := l.Err(); !errors.Is(err, pool.ErrSandboxDied) || aci.CodeOf(err) != aci.CodeSandboxDied {
		t.Fatalf("lease Err = %v; want ErrSandboxDied with code sandbox_died", err)
	}
	pooltest.Eventually(t, time.Minute, "a replacement warm and the death counted", func() bool {
		s := stats(p)
		return s.Warm == 1 && s.Deaths == 1
	})
	pooltest.Eventually(t, 10*time.Second, "dead sandbox's processes gone", func() bool { return len(pooltest.Survivors(procs)) == 0 })
	l.Release(ctxT(t))
	r, err := p.Lease(ctxT(t))
	if err != nil {
		t.Fatalf("Lease after death: %v", err)
	}
	pooltest.MustSh(t, r.Guest(), "true")
	r.Release(ctxT(t))
}

func TestXvfbKilledMidLease(t *testing.T) {
	killTest(t, func(t *testing.T, prov *process.Provider, l *pool.Lease) {
		// The agent cannot touch the X server (it is guestd's): the host can.
		if err := prov.KillX(ctxT(t), l.ID()); err != nil {
			t.Fatalf("kill Xvfb: %v", err)
		}
	})
}

func TestGuestdKilledMidLease(t *testing.T) {
	killTest(t, func(t *testing.T, prov *process.Provider, l *pool.Lease) {
		if err := syscall.Kill(prov.InitPID(l.ID()), syscall.SIGKILL); err != nil {
			t.Fatalf("kill guestd: %v", err)
		}
	})
}

func TestGoldenReplicas(t *testing.T) {
	prov := newProvider(t)
	p := newPool(t, prov, pool.Config{Size: 1, ReplicasPerGolden: 2})
	var setups atomic.Int32
	setup := func(ctx context.Context, l *pool.Lease) error {
		setups.Add(1)
		return l.Guest().PutFile(ctx, wire.PutFileArgs{Path: "/home/workspace/task.txt", Data: []byte("task-a")})
	}
	first, err := p.LeaseGolden(ctxT(t), "a", setup)
	if err != nil {
		t.Fatalf("LeaseGolden (first): %v", err)
	}
	if got := pooltest.MustSh(t, first.Guest(), "cat /home/workspace/task.txt"); got != "task-a" {
		t.Fatalf("first golden lease: task.txt = %q; want %q", got, "task-a")
	}
	first.Release(ctxT(t))
	if err := p.WaitReplicas(ctxT(t), "a", 2); err != nil {
		t.Fatalf("WaitReplicas: %v", err)
	}
	onDemand := stats(p).OnDemandRestores
	for i := range 2 {
		l, err := p.LeaseGolden(ctxT(t), "a", setup)
		if err != nil {
			t.Fatalf("LeaseGolden %d: %v", i, err)
		}
		if got := pooltest.MustSh(t, l.Guest(), "cat /home/workspace/task.txt"); got != "task-a" {
			t.Errorf("replica %d: task.txt = %q; want %q", i, got, "task-a")
		}
		l.Release(ctxT(t))
	}
	if n := setups.Load(); n != 1 {
		t.Errorf("setup ran %d times; want 1 (replicas come from the golden)", n)
	}
	if s := stats(p); s.Goldens != 1 {
		t.Errorf("Stats.Goldens = %d; want 1", s.Goldens)
	}
	if n := stats(p).OnDemandRestores - onDemand; n != 0 {
		t.Errorf("leasing 2 of 2 warm replicas restored %d on demand; want 0 (each lease takes a warm replica)", n)
	}

	// A failing setup is returned wrapped and records no golden.
	bad := errors.New("setup broke")
	_, err = p.LeaseGolden(ctxT(t), "b", func(context.Context, *pool.Lease) error { return bad })
	if !errors.Is(err, bad) {
		t.Fatalf("LeaseGolden with failing setup = %v; want it wrapping the setup error", err)
	}
	if s := stats(p); s.Goldens != 1 {
		t.Errorf("Stats.Goldens after a failed setup = %d; want 1", s.Goldens)
	}
}

func TestForkInheritsAndIsolates(t *testing.T) {
	prov := newProvider(t)
	p := newPool(t, prov, pool.Config{Size: 1})
	src, err := p.Lease(ctxT(t))
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	defer src.Release(ctxT(t))
	pooltest.MustSh(t, src.Guest(), `echo seed > "$HOME/seed.txt"`)
	forks, err := p.Fork(ctxT(t), src, 2)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	for _, f := range forks {
		defer f.Release(ctxT(t))
		if got := pooltest.MustSh(t, f.Guest(), `cat "$HOME/seed.txt"`); got != "seed" {
			t.Errorf("fork %s: seed.txt = %q; want %q", f.ID(), got, "seed")
		}
	}
	pooltest.MustSh(t, forks[0].Guest(), `echo changed > "$HOME/seed.txt"`)
	if got := pooltest.MustSh(t, forks[1].Guest(), `cat "$HOME/seed.txt"`); got != "seed" {
		t.Errorf("fork 1 sees fork 0's write: %q", got)
	}
	if got := pooltest.MustSh(t, src.Guest(), `cat "$HOME/seed.txt"`); got != "seed" {
		t.Errorf("source sees a fork's write: %q", got)
	}
}

// noSnapshots hides the provider's snapshot abilities, as a provider
// without them would be.
type noSnapshots struct{ pool.Provider }

func (n noSnapshots) Capabilities() pool.Capabilities {
	c := n.Provider.Capabilities()
	c.Provider, c.SnapshotKind, c.Snapshot, c.Restore, c.Fork = "nosnap", pool.SnapshotNone, false, false, false
	return c
}

func TestWithoutSnapshots(t *testing.T) {
	prov := newProvider(t)
	p := newPool(t, noSnapshots{prov}, pool.Config{Size: 1})
	var setups atomic.Int32
	for range 2 {
		l, err := p.LeaseGolden(ctxT(t), "a", func(context.Context, *pool.Lease) error { setups.Add(1); return nil })
		if err != nil {
			t.Fatalf("LeaseGolden: %v", err)
		}
		if _, err := p.Fork(ctxT(t), l, 1); !errors.Is(err, pool.ErrUnsupported) || aci.CodeOf(err) != aci.CodeUnsupported {
			t.Errorf("Fork without snapshots = %v; want ErrUnsupported with code unsupported", err)
		}
		l.Release(ctxT(t))
	}
	if n := setups.Load(); n != 2 {
		t.Errorf("setup ran %d times; want 2 (no snapshots: setup every time)", n)
	}
}

func TestConcurrentLeases(t *testing.T) {
	prov := newProvider(t)
	p := newPool(t, prov, pool.Config{Size: 3, MaxSandboxes: 5, MaxConcurrentBoots: 3, LeaseTimeout: 2 * time.Minute})
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 8 {
		wg.Go(func() {
			for j := range 1 {
				l, err := p.Lease(ctxT(t))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				if seen[l.ID()] {
					errs <- fmt.Errorf("sandbox %s leased twice", l.ID())
				}
				seen[l.ID()] = true
				mu.Unlock()
				if i%3 == 0 && j == 0 {
					if _, err := p.LeaseGolden(ctxT(t), "shared", func(ctx context.Context, g *pool.Lease) error {
						return g.Guest().PutFile(ctx, wire.PutFileArgs{Path: "/tmp/g", Data: []byte("g")})
					}); err != nil {
						// The golden lease is not released on purpose: Close must end it.
						errs <- err
					}
				}
				l.Release(ctxT(t))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent lease: %v", err)
	}
	if s := stats(p); s.Leased > 4 {
		t.Errorf("Stats.Leased = %d after all releases; want at most the unreleased golden leases", s.Leased)
	}
}

func TestCloseEndsEverything(t *testing.T) {
	prov := newProvider(t)
	p, err := pool.New(context.Background(), prov, pool.Config{Size: 2, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.Lease(ctxT(t))
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	g, err := p.LeaseGolden(ctxT(t), "k", func(context.Context, *pool.Lease) error { return nil })
	if err != nil {
		t.Fatalf("LeaseGolden: %v", err)
	}
	procs := pooltest.NSProcs(prov.PIDNamespace(l.ID()))
	for pid, st := range pooltest.NSProcs(prov.PIDNamespace(g.ID())) {
		procs[pid] = st
	}
	if err := p.Close(ctxT(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, x := range []*pool.Lease{l, g} {
		select {
		case <-x.Dead():
		default:
			t.Errorf("lease %s not dead after Close", x.ID())
		}
	}
	if left := pooltest.Survivors(procs); len(left) > 0 {
		t.Errorf("processes left after Close: %v", left)
	}
	if _, err := p.Lease(ctxT(t)); !errors.Is(err, pool.ErrClosed) {
		t.Errorf("Lease after Close = %v; want ErrClosed", err)
	}
	l.Release(ctxT(t)) // harmless after Close
}

// TestLimitDeathReason: a leased sandbox whose agent allocates past its
// memory is ended; the lease's error is sandbox_died with detail.reason
// "oom", and the pool counts it as a limit death.
func TestLimitDeathReason(t *testing.T) {
	prov := newProvider(t)
	if prov.Capabilities().Confinement == nil || prov.Capabilities().Confinement.Cgroup == "" {
		t.Skip("no cgroups on this host")
	}
	p := newPool(t, prov, pool.Config{Size: 1, Spec: pool.Spec{MemoryBytes: 256 << 20}})
	l, err := p.Lease(ctxT(t))
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	defer l.Release(ctxT(t))
	// The sandbox may die before exec answers.
	_, _ = l.Guest().Exec(ctxT(t), wire.ExecArgs{Shell: `(python3 -c 'x = b"x" * (600 << 20)') >/dev/null 2>&1 &`, TimeoutMS: 5000})
	select {
	case <-l.Dead():
	case <-ctxT(t).Done():
		t.Fatal("lease alive after a memory hog")
	}
	var e *aci.Error
	if err := l.Err(); !errors.As(err, &e) || e.Code != aci.CodeSandboxDied || fmt.Sprint(e.Detail) != "map[reason:oom]" {
		t.Fatalf("lease error = %v (%+v); want sandbox_died with detail reason oom", err, e)
	}
	if s := stats(p); s.LimitDeaths["oom"] != 1 || s.Deaths < 1 {
		t.Fatalf("stats = %+v; want one oom limit death", s)
	}
}
