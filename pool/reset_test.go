package pool_test

import (
	"context"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/pooltest"
)

// goldenSetup writes the task's file, as a task's setup does.
func goldenSetup(ctx context.Context, l *pool.Lease) error {
	return l.Guest().PutFile(ctx, wire.PutFileArgs{Path: "/home/workspace/task.txt", Data: []byte("task")})
}

// dirtyAndRelease leaves traces of an episode in l's sandbox and releases it.
func dirtyAndRelease(t *testing.T, l *pool.Lease) {
	t.Helper()
	pooltest.MustSh(t, l.Guest(), `echo dirty > "$HOME/dirty.txt" && rm /home/workspace/task.txt && (setsid sleep 600 </dev/null >/dev/null 2>&1 &)`)
	l.Release(context.Background())
}

// checkClean asserts that l is in the golden's state.
func checkClean(t *testing.T, l *pool.Lease) {
	t.Helper()
	if got := pooltest.MustSh(t, l.Guest(), `cat /home/workspace/task.txt; ls "$HOME/dirty.txt" 2>/dev/null; pgrep -x sleep || true`); got != "task" {
		t.Errorf("lease %s after an episode: %q; want the golden's task.txt, no dirty.txt, no sleep", l.ID(), got)
	}
}

// TestReleaseResetsInPlace: in inplace mode a released golden lease is
// reset in place and leased again as the golden's replica (same sandbox, no
// boot), clean; in reboot mode it is retired and never seen again.
func TestReleaseResetsInPlace(t *testing.T) {
	for _, mode := range []string{pool.ResetModeInPlace, pool.ResetModeReboot} {
		t.Run(mode, func(t *testing.T) {
			prov := newProvider(t)
			p := newPool(t, prov, pool.Config{Size: 1, ReplicasPerGolden: 1, ResetMode: mode})
			if got := p.ResetMode(); got != mode {
				t.Fatalf("ResetMode() = %q; want %q", got, mode)
			}
			first, err := p.LeaseGolden(ctxT(t), "a", goldenSetup)
			if err != nil {
				t.Fatalf("LeaseGolden: %v", err)
			}
			id := first.ID()
			dirtyAndRelease(t, first)
			if mode == pool.ResetModeInPlace {
				pooltest.Eventually(t, time.Minute, "the released lease reset in place", func() bool { return stats(p).Resets == 1 })
			}
			if err := p.WaitReplicas(ctxT(t), "a", 1); err != nil {
				t.Fatal(err)
			}
			var held []*pool.Lease
			defer func() {
				for _, l := range held {
					l.Release(context.Background())
				}
			}()
			reused := false
			for range 2 {
				l, err := p.LeaseGolden(ctxT(t), "a", goldenSetup)
				if err != nil {
					t.Fatalf("LeaseGolden: %v", err)
				}
				held = append(held, l)
				checkClean(t, l)
				reused = reused || l.ID() == id
			}
			if want := mode == pool.ResetModeInPlace; reused != want {
				t.Errorf("the released sandbox %s leased again: %v; want %v", id, reused, want)
			}
			if s := stats(p); mode == pool.ResetModeReboot && s.Resets != 0 {
				t.Errorf("reboot mode reset %d sandboxes in place; want 0", s.Resets)
			}
		})
	}
}

// TestForkResetsIdle: a fork takes idle sandboxes and resets them in place
// to the source's snapshot instead of booting; the children carry the
// source's files and are isolated from each other.
func TestForkResetsIdle(t *testing.T) {
	prov := newProvider(t)
	p := newPool(t, prov, pool.Config{Size: 3})
	src, err := p.Lease(ctxT(t))
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	defer src.Release(context.Background())
	pooltest.MustSh(t, src.Guest(), `echo seed > "$HOME/seed.txt"`)
	if err := p.WaitWarm(ctxT(t), 3); err != nil {
		t.Fatal(err)
	}
	before := stats(p)
	kids, err := p.Fork(ctxT(t), src, 2)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	for _, k := range kids {
		defer k.Release(context.Background())
		if got := pooltest.MustSh(t, k.Guest(), `cat "$HOME/seed.txt"`); got != "seed" {
			t.Errorf("child %s: seed.txt = %q; want seed", k.ID(), got)
		}
	}
	pooltest.MustSh(t, kids[0].Guest(), `echo changed > "$HOME/seed.txt"`)
	if got := pooltest.MustSh(t, kids[1].Guest(), `cat "$HOME/seed.txt"`); got != "seed" {
		t.Errorf("child 1 sees child 0's write: %q", got)
	}
	after := stats(p)
	if n := after.Resets - before.Resets; n != 2 {
		t.Errorf("fork of 2 with 3 warm sandboxes reset %d in place; want 2", n)
	}
}

// TestGoldenLeaseResetsWarm: a golden lease that finds no idle replica
// takes a warm general sandbox and resets it in place to the golden rather
// than restoring one (a burst of one task is served by the warm pool);
// each such lease is in the golden's state, not the bare sandbox's.
func TestGoldenLeaseResetsWarm(t *testing.T) {
	prov := newProvider(t)
	p := newPool(t, prov, pool.Config{Size: 3, ReplicasPerGolden: -1})
	first, err := p.LeaseGolden(ctxT(t), "a", goldenSetup)
	if err != nil {
		t.Fatalf("LeaseGolden: %v", err)
	}
	defer first.Release(context.Background())
	if err := p.WaitWarm(ctxT(t), 3); err != nil {
		t.Fatal(err)
	}
	before := stats(p)
	for range 2 {
		l, err := p.LeaseGolden(ctxT(t), "a", goldenSetup)
		if err != nil {
			t.Fatalf("LeaseGolden: %v", err)
		}
		defer l.Release(context.Background())
		checkClean(t, l)
	}
	after := stats(p)
	if n := after.Resets - before.Resets; n != 2 {
		t.Errorf("two golden leases with 3 warm sandboxes reset %d in place; want 2", n)
	}
	if n := after.OnDemandRestores - before.OnDemandRestores; n != 0 {
		t.Errorf("two golden leases with 3 warm sandboxes restored %d on demand; want 0", n)
	}
}

// TestBurstReplicasDecay: a burst of three leases of one golden leaves
// more idle replicas than ReplicasPerGolden (a golden keeps about as many
// as it recently had in use); once unused for ReplicaIdleTTL, the extra
// ones are retired and ReplicasPerGolden stay.
func TestBurstReplicasDecay(t *testing.T) {
	prov := newProvider(t)
	p := newPool(t, prov, pool.Config{Size: 1, ReplicasPerGolden: 1, ReplicaIdleTTL: time.Second, HealthInterval: 200 * time.Millisecond})
	var burst []*pool.Lease
	for range 3 {
		l, err := p.LeaseGolden(ctxT(t), "a", goldenSetup)
		if err != nil {
			t.Fatalf("LeaseGolden: %v", err)
		}
		burst = append(burst, l)
	}
	for _, l := range burst {
		l.Release(context.Background())
	}
	replicas := func() int {
		n := 0
		for _, v := range p.Sandboxes() {
			if v.State == "replica" && v.Golden == "a" {
				n++
			}
		}
		return n
	}
	pooltest.Eventually(t, time.Minute, "the burst's sandboxes kept as replicas", func() bool { return replicas() >= 2 })
	pooltest.Eventually(t, time.Minute, "the extra replicas retired after ReplicaIdleTTL", func() bool { return replicas() == 1 })
	l, err := p.LeaseGolden(ctxT(t), "a", goldenSetup)
	if err != nil {
		t.Fatalf("LeaseGolden after the decay: %v", err)
	}
	checkClean(t, l)
	l.Release(context.Background())
}
