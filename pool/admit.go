package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Admission (docs/architecture.md, "Bursts"): callers that find no
// sandbox (Lease) or no room under MaxSandboxes (reserve: restores and
// forks) queue first come, first served, so a burst of resets is served in
// arrival order and never fails while the machine has room. A caller fails
// with ErrExhausted only when its deadline passes while it waits: the
// earlier of LeaseTimeout and its context's deadline.

// waiter is one queued caller.
type waiter struct{ n int }

// queue is a FIFO of waiters.
type queue []*waiter

// first reports whether w is the oldest waiter.
func (q queue) first(w *waiter) bool { return len(q) > 0 && q[0] == w }

// without returns q less w.
func (q queue) without(w *waiter) queue {
	for i, x := range q {
		if x == w {
			return append(q[:i:i], q[i+1:]...)
		}
	}
	return q
}

// admission bounds one caller's wait: its timer and its context.
type admission struct {
	p     *Pool
	ctx   context.Context
	timer *time.Timer
	start time.Time
	what  string
}

func (p *Pool) admission(ctx context.Context, what string) *admission {
	return &admission{p: p, ctx: ctx, timer: time.NewTimer(p.cfg.LeaseTimeout), start: time.Now(), what: what}
}

func (a *admission) stop() { a.timer.Stop() }

// wait blocks until ch is closed (a state change), or fails: ErrExhausted
// when the caller's deadline passed (LeaseTimeout, or ctx's deadline), the
// context's error when the caller went away.
func (a *admission) wait(ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-a.timer.C:
		return a.p.exhausted(a.what, time.Since(a.start))
	case <-a.ctx.Done():
		if errors.Is(a.ctx.Err(), context.DeadlineExceeded) {
			return a.p.exhausted(a.what, time.Since(a.start))
		}
		return fmt.Errorf("pool: wait for %s: %w", a.what, a.ctx.Err())
	}
}

// DesktopBytes is the memory one live desktop is budgeted (Xvfb, window
// manager, guestd and a task's apps). Measured in docs/architecture.md,
// "Bursts": ~25 MiB proportional set per xterm desktop; the budget leaves
// room for heavier apps. The default MaxSandboxes is the number of such
// desktops that fit in 3/4 of the host's memory.
const DesktopBytes = 64 << 20

// hostDesktops is how many desktops of DesktopBytes fit in 3/4 of the
// host's memory (0 when it cannot be read).
func hostDesktops() int {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return int(kb << 10 * 3 / 4 / DesktopBytes)
		}
	}
	return 0
}
