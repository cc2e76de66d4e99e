package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/shinken-rl/shinken/aci"
)

// Snapshots a caller owns (docs/architecture.md, "Named checkpoints"): the
// env server snapshots a leased sandbox mid-episode, starts new sandboxes
// from it with LeaseSnapshot and ForkSnapshot, and deletes it with
// DeleteSnapshot. The pool does not track them; their owner deletes them
// (and the provider removes what is left when it closes).

// SnapshotSizer is implemented by providers that can say how many bytes a
// snapshot holds on the host.
type SnapshotSizer interface {
	SnapshotBytes(ctx context.Context, snap string) (int64, error)
}

func (p *Pool) unsupported(what string) error {
	return Errorf(ErrUnsupported, aci.CodeUnsupported, "pool: provider %s cannot %s (snapshot_kind %s)", p.caps.Provider, what, p.caps.SnapshotKind)
}

// Snapshot freezes the state of src's sandbox (of the provider's
// snapshot_kind) into a new snapshot the caller owns. The sandbox keeps
// running.
func (p *Pool) Snapshot(ctx context.Context, src *Lease) (string, error) {
	if p.snapper == nil {
		return "", p.unsupported("snapshot")
	}
	if err := src.Err(); err != nil {
		return "", err
	}
	snap, err := p.snapper.Snapshot(ctx, src.m.sb.ID)
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	return snap, nil
}

// SnapshotBytes is what snap holds on the host, where the provider can say
// (ok false otherwise).
func (p *Pool) SnapshotBytes(ctx context.Context, snap string) (n int64, ok bool, err error) {
	sz, is := p.prov.(SnapshotSizer)
	if !is {
		return 0, false, nil
	}
	n, err = sz.SnapshotBytes(ctx, snap)
	return n, err == nil, err
}

// LeaseSnapshot starts one sandbox from snap, leased to the caller, once
// there is room under MaxSandboxes (queued like any restore).
func (p *Pool) LeaseSnapshot(ctx context.Context, snap string) (*Lease, error) {
	if p.snapper == nil {
		return nil, p.unsupported("restore")
	}
	return p.restore(ctx, snap, nil, "snapshot "+snap)
}

// DeleteSnapshot removes a snapshot made by Snapshot; idempotent. Sandboxes
// already started from it are not affected.
func (p *Pool) DeleteSnapshot(snap string) {
	if p.snapper != nil {
		p.deleteSnapshot(snap)
	}
}

// deleteSnapshot removes snap with a bounded deadline, logging a failure.
func (p *Pool) deleteSnapshot(snap string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.snapper.DeleteSnapshot(ctx, snap); err != nil {
		p.cfg.Logf("pool: delete snapshot %s: %v", snap, err)
	}
}
