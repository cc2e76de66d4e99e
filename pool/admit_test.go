package pool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/pooltest"
)

// TestQueueAtTheCap fills a pool to its cap, queues two golden leases, and
// frees one slot: the older waiter gets it (first come, first served), and
// the younger one fails with pool_exhausted only once its own deadline has
// passed.
func TestQueueAtTheCap(t *testing.T) {
	prov := newProvider(t)
	p := newPool(t, prov, pool.Config{Size: 1, MaxSandboxes: 3, ReplicasPerGolden: -1, LeaseTimeout: 2 * time.Minute})
	setup := func(ctx context.Context, l *pool.Lease) error {
		return l.Guest().PutFile(ctx, wire.PutFileArgs{Path: "/home/workspace/task.txt", Data: []byte("task-q")})
	}
	var held []*pool.Lease
	for range 3 {
		l, err := p.LeaseGolden(ctxT(t), "q", setup)
		if err != nil {
			t.Fatalf("LeaseGolden under the cap: %v", err)
		}
		held = append(held, l)
	}
	type got struct {
		l     *pool.Lease
		err   error
		after time.Duration
	}
	lease := func(ctx context.Context, out chan<- got) {
		t0 := time.Now()
		l, err := p.LeaseGolden(ctx, "q", setup)
		out <- got{l, err, time.Since(t0)}
	}
	queued := func(n int) {
		pooltest.Eventually(t, 30*time.Second, "waiters queued", func() bool { return stats(p).Queued == n })
	}
	first, second := make(chan got, 1), make(chan got, 1)
	go lease(ctxT(t), first)
	queued(1)
	const deadline = 5 * time.Second
	ctx, cancel := context.WithTimeout(ctxT(t), deadline)
	defer cancel()
	go lease(ctx, second)
	queued(2)

	held[0].Release(ctxT(t)) // one slot frees: it is the older waiter's
	a := <-first
	if a.err != nil {
		t.Fatalf("the older waiter: %v; want the freed slot", a.err)
	}
	defer a.l.Release(ctxT(t))
	if s := pooltest.MustSh(t, a.l.Guest(), "cat /home/workspace/task.txt"); s != "task-q" {
		t.Errorf("restored golden: task.txt = %q; want task-q", s)
	}
	b := <-second
	if b.err == nil {
		b.l.Release(ctxT(t))
		t.Fatalf("the younger waiter got a sandbox over the cap of 3")
	}
	if !errors.Is(b.err, pool.ErrExhausted) || aci.CodeOf(b.err) != aci.CodePoolExhausted {
		t.Errorf("the younger waiter: %v; want pool_exhausted", b.err)
	}
	if b.after < deadline-100*time.Millisecond {
		t.Errorf("the younger waiter failed after %v; want it to wait until its deadline (%v)", b.after, deadline)
	}
	if s := stats(p); s.Queued != 0 || s.Leased != 3 {
		t.Errorf("after: %d queued, %d leased; want 0 and 3", s.Queued, s.Leased)
	}
	for _, l := range held[1:] {
		l.Release(ctxT(t))
	}
}
