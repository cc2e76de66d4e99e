package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/internal/safecopy"
	"golang.org/x/sync/errgroup"
)

// MaxForkConcurrency bounds how many containers one Fork starts at once.
const MaxForkConcurrency = 8

// snapshot is one copy of a container's writable state and what still
// stands on it.
type snapshot struct {
	dir     string // host directory holding home/ and tmp/
	refs    int    // containers started from it that still exist
	deleted bool   // DeleteSnapshot was called: remove once refs is 0
}

// writable are the container's writable trees (its tmpfs mounts) a
// snapshot carries, as paths below its root, by the name they get in the
// snapshot directory.
var writable = [][2]string{{"home", strings.TrimPrefix(agentHome, "/")}, {"tmp", "tmp"}}

// Snapshot copies the container's home and /tmp into a directory of the
// state dir, with the container paused so the copy is consistent and the
// agent cannot rearrange the tree meanwhile. The copy reads the paused
// container's tmpfs through /proc/<pid>/root and never follows a link
// (pool/internal/safecopy): a link the agent made to a host path is copied
// as a link. Over Options.SnapshotBytes it fails with code too_large and the
// container keeps running.
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
	p.mu.Lock()
	p.seq++
	name := fmt.Sprintf("snap-%s-%d", p.run, p.seq)
	p.mu.Unlock()
	dir := filepath.Join(p.stateDir, "snapshots", name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("docker provider: snapshot: %w", err)
	}
	if err := p.copyOut(ctx, b, dir); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		os.RemoveAll(dir)
		return "", pool.ErrClosed
	}
	p.snaps[name] = &snapshot{dir: dir}
	return name, nil
}

// copyOut pauses the container and copies its writable trees into dir.
func (p *Provider) copyOut(ctx context.Context, b *box, dir string) error {
	id := b.sb.ID
	// runc's cgroup v1 freezer gives up ("unable to freeze") when the
	// container's tasks do not all stop within its short loop, which a
	// busy host can make them miss: a transient failure, retried. One that
	// persists leaves the freezer's state unknown, so the sandbox ends.
	gone := false
	err := retry(ctx, func() error {
		err := p.cli.ContainerPause(ctx, id)
		if cerrdefs.IsNotFound(err) {
			gone = true
			return nil
		}
		return err
	})
	switch {
	case gone:
		b.markDead()
		return fmt.Errorf("docker provider: pause %.12s: %w", id, pool.ErrSandboxDied)
	case err != nil:
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		p.removeContainer(rctx, id)
		b.markDead()
		return fmt.Errorf("docker provider: pause %.12s: %w: %w", id, err, pool.ErrSandboxDied)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := retry(uctx, func() error { return p.cli.ContainerUnpause(uctx, id) }); err != nil && !cerrdefs.IsNotFound(err) {
			// A container left paused would hang its env: end it.
			p.removeContainer(uctx, id)
			b.markDead()
		}
	}()
	info, err := p.cli.ContainerInspect(ctx, id)
	if err != nil {
		return fmt.Errorf("docker provider: inspect %.12s: %w", id, err)
	}
	if info.State == nil || info.State.Pid <= 0 {
		b.markDead()
		return fmt.Errorf("docker provider: container %.12s has no process: %w", id, pool.ErrSandboxDied)
	}
	root := fmt.Sprintf("/proc/%d/root", info.State.Pid)
	c := &safecopy.Copy{Ctx: ctx, UID: -1, GID: -1, Max: p.opts.SnapshotBytes, Skip: safecopy.SkipX}
	for _, w := range writable {
		if err := c.Tree(root, w[1], filepath.Join(dir, w[0])); err != nil {
			return fmt.Errorf("docker provider: snapshot %.12s: %w", id, err)
		}
	}
	return nil
}

// Restore starts one container from a snapshot; guestd relaunches the apps
// it had recorded.
func (p *Provider) Restore(ctx context.Context, snap string, spec pool.Spec) (*pool.Sandbox, error) {
	return p.start(ctx, snap, spec)
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
			sb, err := p.start(gctx, snap, spec)
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

// DeleteSnapshot releases a snapshot. Its directory is removed at once if
// no container started from it remains, else when the last one goes.
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

// collect removes the directories of deleted snapshots nothing stands on.
func (p *Provider) collect(ctx context.Context) error {
	p.gcMu.Lock()
	defer p.gcMu.Unlock()
	var errs []error
	p.mu.Lock()
	var victims []string
	for id, s := range p.snaps {
		if s.deleted && s.refs == 0 {
			victims = append(victims, id)
		}
	}
	p.mu.Unlock()
	for _, id := range victims {
		p.mu.Lock()
		s := p.snaps[id]
		delete(p.snaps, id)
		p.mu.Unlock()
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("docker provider: remove snapshot %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// Snapshots returns the ids of the snapshots the provider still holds
// (deleted ones included while a container started from one remains).
func (p *Provider) Snapshots() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := make([]string, 0, len(p.snaps))
	for id := range p.snaps {
		ids = append(ids, id)
	}
	return ids
}

// SnapshotBytes implements pool.SnapshotSizer: the bytes of the files the
// snapshot copied out of the container (home and /tmp).
func (p *Provider) SnapshotBytes(ctx context.Context, snap string) (int64, error) {
	p.mu.Lock()
	sn, ok := p.snaps[snap]
	p.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("docker provider: snapshot %.12s: %w", snap, pool.ErrNotFound)
	}
	n, err := safecopy.Bytes(ctx, sn.dir)
	if err != nil {
		return 0, fmt.Errorf("docker provider: size of snapshot %.12s: %w", snap, err)
	}
	return n, nil
}
