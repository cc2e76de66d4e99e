package pool_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/process"
)

// flaky is a real process provider whose next `fail` restores and forks
// are real boots of a sandbox whose guestd exits at start (the host's
// false(1) in its place), so they fail as a broken boot does.
type flaky struct {
	*process.Provider
	bad  *process.Provider
	fail atomic.Int32
}

func (f *flaky) broken(ctx context.Context, spec pool.Spec) error {
	if f.fail.Add(-1) < 0 {
		return nil
	}
	sb, err := f.bad.Create(ctx, spec)
	if err == nil {
		f.bad.Destroy(ctx, sb.ID)
		return errors.New("a sandbox without guestd booted")
	}
	return err
}

func (f *flaky) Restore(ctx context.Context, snap string, spec pool.Spec) (*pool.Sandbox, error) {
	if err := f.broken(ctx, spec); err != nil {
		return nil, err
	}
	return f.Provider.Restore(ctx, snap, spec)
}

func (f *flaky) Fork(ctx context.Context, snap string, n int, spec pool.Spec) ([]*pool.Sandbox, error) {
	if err := f.broken(ctx, spec); err != nil {
		return nil, err
	}
	return f.Provider.Fork(ctx, snap, n, spec)
}

// TestBootFailureRetried: a restore or fork whose boot fails is retried
// transparently, each failure counted; once the attempts are spent the
// caller gets sandbox_died carrying the cause.
func TestBootFailureRetried(t *testing.T) {
	good := newProvider(t)
	falsePath, err := exec.LookPath("false")
	if err != nil {
		t.Skip(err)
	}
	bad, err := process.New(context.Background(), process.Options{Root: t.TempDir(), GuestdPath: falsePath, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bad.Close(context.Background()) })
	f := &flaky{Provider: good, bad: bad}
	p := newPool(t, f, pool.Config{Size: 1, ReplicasPerGolden: -1, BootBackoff: 10 * time.Millisecond})
	noop := func(context.Context, *pool.Lease) error { return nil }
	first, err := p.LeaseGolden(ctxT(t), "k", noop)
	if err != nil {
		t.Fatalf("first LeaseGolden: %v", err)
	}
	defer first.Release(context.Background())

	before := p.Stats().BootFailures
	f.fail.Store(2)
	l, err := p.LeaseGolden(ctxT(t), "k", noop)
	if err != nil {
		t.Fatalf("LeaseGolden with 2 failing boots: %v; want a lease (retried)", err)
	}
	defer l.Release(context.Background())
	if got := p.Stats().BootFailures - before; got != 2 {
		t.Errorf("boot failures counted: got %d; want 2", got)
	}

	before = p.Stats().BootFailures
	f.fail.Store(1)
	kids, err := p.Fork(ctxT(t), l, 2)
	if err != nil {
		t.Fatalf("Fork with a failing boot: %v; want 2 leases (retried)", err)
	}
	for _, k := range kids {
		defer k.Release(context.Background())
	}
	if got := p.Stats().BootFailures - before; got != 1 {
		t.Errorf("fork boot failures counted: got %d; want 1", got)
	}

	// No warm sandbox to reset in place either: the one warm is leased
	// (the filler's refills fail from here on), so the golden lease must
	// restore, and every restore fails.
	if err := p.WaitWarm(ctxT(t), 1); err != nil {
		t.Fatal(err)
	}
	f.fail.Store(100)
	w, err := p.Lease(ctxT(t))
	if err != nil {
		t.Fatalf("Lease of the warm sandbox: %v", err)
	}
	defer w.Release(context.Background())
	_, err = p.LeaseGolden(ctxT(t), "k", noop)
	if !errors.Is(err, pool.ErrSandboxDied) || aci.CodeOf(err) != aci.CodeSandboxDied {
		t.Fatalf("LeaseGolden with every boot failing: got %v; want sandbox_died", err)
	}
	for _, want := range []string{"3 boot attempts failed", "init exited before the guest answered"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if got := f.fail.Load(); 100-got < 3 {
		t.Errorf("boots tried: %d; want at least the restore's 3 (the filler's refills may add theirs)", 100-got)
	}
}

// TestSlowGuestIsNotDead: a guest that stops answering health probes for
// a while (a stopped process, as on an overloaded host) is reported slow,
// not dead, and keeps its lease once it answers again; one that stays
// silent is declared dead after maxSlowProbes timeouts.
func TestSlowGuestIsNotDead(t *testing.T) {
	prov := newProvider(t)
	slow := make(chan string, 16)
	p := newPool(t, prov, pool.Config{Size: 1, HealthInterval: 50 * time.Millisecond, HealthTimeout: time.Second,
		Logf: func(format string, args ...any) {
			msg := fmt.Sprintf(format, args...)
			t.Log(msg)
			if strings.Contains(msg, " slow: ") {
				select {
				case slow <- msg:
				default:
				}
			}
		}})
	l, err := p.Lease(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	pid := prov.InitPID(l.ID())
	syscall.Kill(pid, syscall.SIGSTOP)
	select {
	case <-slow:
	case <-time.After(30 * time.Second):
		syscall.Kill(pid, syscall.SIGCONT)
		t.Fatal("a stopped guest was never reported slow")
	}
	syscall.Kill(pid, syscall.SIGCONT)
	if _, err := l.Guest().Health(ctxT(t)); err != nil {
		t.Fatalf("health after SIGCONT: %v", err)
	}
	if err := l.Err(); err != nil || stats(p).Deaths != 0 {
		t.Fatalf("a guest that was slow for a while: lease err %v, deaths %d; want alive", err, stats(p).Deaths)
	}
	// Silent for good: dead, typed.
	syscall.Kill(pid, syscall.SIGSTOP)
	defer syscall.Kill(pid, syscall.SIGCONT)
	select {
	case <-l.Dead():
	case <-time.After(time.Minute):
		t.Fatal("a guest stopped for good was never declared dead")
	}
	if !errors.Is(l.Err(), pool.ErrSandboxDied) {
		t.Errorf("lease err %v; want sandbox_died", l.Err())
	}
}
