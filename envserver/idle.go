package envserver

import (
	"time"

	"github.com/shinken-rl/shinken/pool"
)

// settledIdle reports whether a leased sandbox sat idle longer than the
// batch's settle bounds, so that its screen has nothing left to draw.
func settledIdle(l *pool.Lease, b *batch) bool {
	if b.obs.Settle == nil {
		return false
	}
	bound := time.Duration(max(b.obs.Settle.MaxMS, b.obs.Settle.FirstMS+b.obs.Settle.QuietMS)) * time.Millisecond
	return l.IdleFor() > bound
}
