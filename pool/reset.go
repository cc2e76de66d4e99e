package pool

import (
	"context"
	"time"
)

// Resetter is implemented by providers that can return a live sandbox to
// a snapshot's state (or, for snap "", to a fresh boot's) in place: its X
// server, window manager and guest keep running, every process the episode
// started ends, its writable state returns to the snapshot's, its X state
// (clipboard, keyboard mapping, pointer, focus, windows) to a fresh boot's,
// and the snapshot's apps are relaunched. A sandbox reset in place is
// indistinguishable from one restored from snap (the conformance suite
// proves it). On any error the sandbox must not be used again: the pool
// destroys it.
type Resetter interface {
	ResetInPlace(ctx context.Context, id, snap string) error
}

// SnapshotSizer is implemented by providers that can say how many bytes a
// snapshot holds (checkpoint limits count them).
type SnapshotSizer interface {
	SnapshotBytes(ctx context.Context, snap string) (int64, error)
}

// resetTimeout bounds one in-place reset.
const resetTimeout = 30 * time.Second
