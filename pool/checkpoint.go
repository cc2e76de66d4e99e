package pool

import (
	"context"
	"fmt"

	"github.com/shinken-rl/shinken/aci"
)

// Checkpoint snapshots the leased sandbox's state now and returns the
// snapshot and its size in bytes (0 where the provider cannot say). The
// caller owns the snapshot: it starts sandboxes from it with ForkSnapshot
// and ends it with DeleteCheckpoint.
func (p *Pool) Checkpoint(ctx context.Context, l *Lease) (snap string, bytes int64, err error) {
	if p.snapper == nil {
		return "", 0, Errorf(ErrUnsupported, aci.CodeUnsupported, "pool: provider %s cannot snapshot (snapshot_kind %s)", p.caps.Provider, p.caps.SnapshotKind)
	}
	if err := l.Err(); err != nil {
		return "", 0, err
	}
	snap, err = p.snapper.Snapshot(ctx, l.m.sb.ID)
	if err != nil {
		return "", 0, fmt.Errorf("pool: checkpoint: %w", err)
	}
	if sz, ok := p.prov.(SnapshotSizer); ok {
		if bytes, err = sz.SnapshotBytes(ctx, snap); err != nil {
			p.deleteSnapshot(snap)
			return "", 0, fmt.Errorf("pool: checkpoint: size: %w", err)
		}
	}
	return snap, bytes, nil
}

// DeleteCheckpoint removes a snapshot made by Checkpoint.
func (p *Pool) DeleteCheckpoint(snap string) {
	if p.snapper != nil {
		p.deleteSnapshot(snap)
	}
}
