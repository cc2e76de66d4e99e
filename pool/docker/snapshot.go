package docker

import (
	"context"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/pool"
	"golang.org/x/sync/errgroup"
)

// MaxForkConcurrency bounds how many containers one Fork starts at once.
const MaxForkConcurrency = 8

// snapshot is one committed image and what still stands on it.
type snapshot struct {
	parent   string // snapshot the committed container was started from
	refs     int    // containers started from it that still exist
	children int    // snapshots committed from those containers that still exist
	deleted  bool   // DeleteSnapshot was called: remove once refs and children are 0
}

// Snapshot commits the container's filesystem to a new image (paused while
// committing, so the copy is consistent) and returns the image id.
func (p *Provider) Snapshot(ctx context.Context, id string) (string, error) {
	p.mu.Lock()
	b, ok := p.boxes[id]
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return "", pool.ErrClosed
	}
	if !ok {
		return "", fmt.Errorf("docker provider: snapshot %.12s: %w", id, pool.ErrNotFound)
	}
	if err := p.Alive(ctx, id); err != nil {
		return "", err
	}
	res, err := p.cli.ContainerCommit(ctx, id, container.CommitOptions{
		Pause:   true,
		Comment: "shinken snapshot of " + id,
		Changes: []string{fmt.Sprintf("LABEL %s=true %s=%q %s=%q",
			LabelManaged, LabelInstance, p.opts.Instance, LabelRun, p.run)},
	})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			b.markDead()
			return "", fmt.Errorf("docker provider: commit %.12s: %w", id, pool.ErrSandboxDied)
		}
		return "", fmt.Errorf("docker provider: commit %.12s: %w", id, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, dup := p.snaps[res.ID]; !dup {
		p.snaps[res.ID] = &snapshot{parent: b.from}
		if s, ok := p.snaps[b.from]; ok {
			s.children++
		}
	}
	return res.ID, nil
}

// Restore starts one container from a snapshot; guestd relaunches the apps
// it had recorded.
func (p *Provider) Restore(ctx context.Context, snap string, spec pool.Spec) (*pool.Sandbox, error) {
	return p.start(ctx, snap, snap, spec)
}

// Fork starts n containers from a snapshot concurrently. On any failure the
// ones already started are destroyed and the first error is returned.
func (p *Provider) Fork(ctx context.Context, snap string, n int, spec pool.Spec) ([]*pool.Sandbox, error) {
	if n < 1 {
		return nil, aci.Errorf(aci.CodeBadRequest, "fork n=%d; want n >= 1", n)
	}
	out := make([]*pool.Sandbox, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(MaxForkConcurrency)
	for i := range out {
		g.Go(func() error {
			sb, err := p.start(gctx, snap, snap, spec)
			out[i] = sb
			return err
		})
	}
	if err := g.Wait(); err != nil {
		for _, sb := range out {
			if sb != nil {
				p.Destroy(context.WithoutCancel(ctx), sb.ID)
			}
		}
		return nil, err
	}
	return out, nil
}

// DeleteSnapshot releases a snapshot. Its image is removed at once if no
// container or later snapshot stands on it, else when the last one goes.
// Idempotent; unknown ids are ignored.
func (p *Provider) DeleteSnapshot(ctx context.Context, snap string) error {
	p.mu.Lock()
	s, ok := p.snaps[snap]
	if ok {
		s.deleted = true
	}
	p.mu.Unlock()
	if !ok {
		return nil
	}
	return p.collect(ctx)
}

// collect removes the images of deleted snapshots nothing stands on, walking
// up to parents that become free in turn.
func (p *Provider) collect(ctx context.Context) error {
	p.gcMu.Lock()
	defer p.gcMu.Unlock()
	for {
		p.mu.Lock()
		victim := ""
		for id, s := range p.snaps {
			if s.deleted && s.refs == 0 && s.children == 0 {
				victim = id
				break
			}
		}
		p.mu.Unlock()
		if victim == "" {
			return nil
		}
		if err := p.removeImage(ctx, victim); err != nil {
			return err
		}
		p.mu.Lock()
		if s, ok := p.snaps[victim]; ok {
			delete(p.snaps, victim)
			if parent, ok := p.snaps[s.parent]; ok {
				parent.children--
			}
		}
		p.mu.Unlock()
	}
}

// removeImage removes one image by id; an image already gone is success.
func (p *Provider) removeImage(ctx context.Context, id string) error {
	return retry(ctx, func() error {
		_, err := p.cli.ImageRemove(ctx, id, image.RemoveOptions{PruneChildren: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("docker provider: remove image %.19s: %w", id, err)
		}
		return nil
	})
}

// Snapshots returns the ids of the snapshots the provider still holds
// (deleted ones included while something stands on them).
func (p *Provider) Snapshots() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.snaps))
	for id := range p.snaps {
		ids = append(ids, id)
	}
	return ids
}

// SnapshotBytes implements pool.SnapshotSizer: the size of the layer the
// commit added (what the snapshot holds beyond the image it stands on).
func (p *Provider) SnapshotBytes(ctx context.Context, snap string) (int64, error) {
	p.mu.Lock()
	_, ok := p.snaps[snap]
	p.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("docker provider: snapshot %.12s: %w", snap, pool.ErrNotFound)
	}
	h, err := p.cli.ImageHistory(ctx, snap)
	if err != nil {
		return 0, fmt.Errorf("docker provider: history of %.12s: %w", snap, err)
	}
	if len(h) == 0 {
		return 0, nil
	}
	return h[0].Size, nil // newest first: the committed layer
}
