package envserver

import (
	"time"

	"github.com/shinken-rl/shinken/pool"
)

// settledIdle reports whether a leased sandbox sat idle longer than a
// settle waits for a first damage plus its quiet period: an app that was
// going to draw has drawn by then, and one still drawing shows damage
// within the quiet period, which the capture then waits out. (The task's
// windows exist: reset waits for them before it observes.)
func settledIdle(l *pool.Lease, b *batch) bool {
	if b.obs.Settle == nil {
		return false
	}
	bound := time.Duration(b.obs.Settle.FirstMS+b.obs.Settle.QuietMS) * time.Millisecond
	return l.IdleFor() > bound
}
