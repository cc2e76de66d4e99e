package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/internal/safecopy"
)

// Snapshot implements pool.Snapshotter: the sandbox's home, workspace and
// /tmp are copied (sockets and X locks skipped) into the snapshot store,
// with the agent's processes frozen while the copy runs (where the host
// offers the freezer), never following a link out of the tree, holes kept,
// and at most Options.SnapshotBytes copied (docs/architecture.md,
// "Snapshots copy safely").
func (p *Provider) Snapshot(ctx context.Context, id string) (string, error) {
	p.mu.Lock()
	b := p.boxes[id]
	p.mu.Unlock()
	if b == nil {
		return "", notFound("sandbox", id)
	}
	snap := fmt.Sprintf("snap-%d", p.seq.Add(1))
	dir := filepath.Join(p.runDir, "snapshots", snap)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("process: snapshot %s: %w", id, err)
	}
	thaw := freezeAgent(ctx, b.cg, p.opts.Logf)
	var err error
	c := &safecopy.Copy{Ctx: ctx, UID: -1, GID: -1, Max: p.opts.SnapshotBytes, Skip: safecopy.SkipX}
	for _, d := range writableDirs {
		if err = c.Tree(b.dir, d, filepath.Join(dir, d)); err != nil {
			break
		}
	}
	thaw()
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("process: snapshot %s: %w", id, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = os.RemoveAll(dir)
		return "", pool.ErrClosed
	}
	p.snaps[snap] = dir
	return snap, nil
}

// DeleteSnapshot implements pool.Snapshotter.
func (p *Provider) DeleteSnapshot(ctx context.Context, snap string) error {
	p.mu.Lock()
	dir, ok := p.snaps[snap]
	delete(p.snaps, snap)
	p.mu.Unlock()
	if !ok {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("process: delete snapshot: %w", err)
	}
	return nil
}

// SnapshotBytes implements pool.SnapshotSizer: the bytes of the snapshot's
// files (regular files' sizes; directories and links count nothing).
func (p *Provider) SnapshotBytes(ctx context.Context, snap string) (int64, error) {
	p.mu.Lock()
	dir, ok := p.snaps[snap]
	p.mu.Unlock()
	if !ok {
		return 0, notFound("snapshot", snap)
	}
	n, err := safecopy.Bytes(ctx, dir)
	if err != nil {
		return 0, fmt.Errorf("process: size of snapshot %s: %w", snap, err)
	}
	return n, nil
}
