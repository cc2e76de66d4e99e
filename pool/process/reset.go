package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
)

var _ interface {
	pool.Resetter
	pool.SnapshotSizer
} = (*Provider)(nil)

// ResetInPlace implements pool.Resetter. The sandbox's Xvfb, window
// manager and guestd keep running; guestd ends every other process and
// returns the X server to its boot state (phase clear); the writable
// directories are then emptied and copied again from the snapshot (or left
// empty for snap ""), which is cheap for the small trees a task sets up;
// finally guestd relaunches the apps recorded in the restored home (phase
// start) and its health is checked. Any failure is returned and the
// sandbox should be destroyed: a half-reset sandbox is never handed out.
func (p *Provider) ResetInPlace(ctx context.Context, id, snap string) error {
	p.mu.Lock()
	b := p.boxes[id]
	seed := ""
	ok := true
	if snap != "" {
		seed, ok = p.snaps[snap]
	}
	p.mu.Unlock()
	if b == nil {
		return notFound("sandbox", id)
	}
	if !ok {
		return notFound("snapshot", snap)
	}
	select {
	case <-b.dead:
		return pool.Errorf(pool.ErrSandboxDied, aci.CodeSandboxDied, "process: sandbox %s died", id)
	default:
	}
	c, err := client.Dial(ctx, b.sb.GuestNetwork, b.sb.GuestAddr)
	if err != nil {
		return fmt.Errorf("process: reset %s: connect: %w", id, err)
	}
	defer c.Close()
	if _, err := c.Reset(ctx, wire.ResetClear); err != nil {
		return fmt.Errorf("process: reset %s: clear: %w", id, err)
	}
	uid, gid := -1, -1
	if b.uid != 0 {
		uid, gid = b.uid, b.uid
	}
	b.resetMu.Lock()
	err = b.restore(ctx, seed, uid, gid)
	b.resetMu.Unlock()
	if err != nil {
		return fmt.Errorf("process: reset %s: restore: %w", id, err)
	}
	if _, err := c.Reset(ctx, wire.ResetStart); err != nil {
		return fmt.Errorf("process: reset %s: start: %w", id, err)
	}
	h, err := c.Health(ctx)
	if err != nil {
		return fmt.Errorf("process: reset %s: health: %w", id, err)
	}
	if !h.X || !h.WM {
		return fmt.Errorf("process: reset %s: unhealthy after reset (x %v, wm %v) %s", id, h.X, h.WM, h.Error)
	}
	return nil
}

// restoreDirs empties the sandbox's writable directories (keeping the X
// server's socket and lock in tmp) and copies seed's into them; every
// process that could write there has ended. The directories themselves
// stay: they are bind-mounted into the running sandbox.
func restoreDirs(ctx context.Context, dir, seed string, uid, gid int) error {
	for _, d := range writableDirs {
		p := filepath.Join(dir, d)
		ents, err := os.ReadDir(p)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if d == "tmp" && isXLeftover(e.Name()) {
				continue
			}
			if err := removeAll(filepath.Join(p, e.Name())); err != nil {
				return err
			}
		}
		if seed != "" {
			if err := copyTree(ctx, filepath.Join(seed, d), p, uid, gid); err != nil {
				return err
			}
		}
		// Modes as makeDirs leaves them on a boot.
		switch {
		case d == "tmp":
			if err := os.Chmod(p, 0o1777); err != nil {
				return err
			}
		case seed == "":
			if err := os.Chmod(p, 0o755); err != nil {
				return err
			}
		}
		if err := chown(p, uid, gid); err != nil {
			return err
		}
	}
	rt := filepath.Join(dir, "tmp", "runtime")
	if err := os.MkdirAll(rt, 0o700); err != nil {
		return err
	}
	return chown(rt, uid, gid)
}

// removeAll is os.RemoveAll that makes directories the agent locked
// (chmod 000) writable again, and tries again when an entry appeared while
// it removed (the window manager, which keeps running, writes its cache
// under home).
func removeAll(path string) error {
	var err error
	for range 3 {
		if err = os.RemoveAll(path); err == nil {
			return nil
		}
		if errors.Is(err, fs.ErrPermission) {
			_ = filepath.WalkDir(path, func(p string, e fs.DirEntry, err error) error {
				if e != nil && e.IsDir() {
					_ = os.Chmod(p, 0o700)
				}
				return nil
			})
		}
	}
	return err
}

// SnapshotBytes implements pool.SnapshotSizer: the bytes of the snapshot's
// files.
func (p *Provider) SnapshotBytes(ctx context.Context, snap string) (int64, error) {
	p.mu.Lock()
	dir, ok := p.snaps[snap]
	p.mu.Unlock()
	if !ok {
		return 0, notFound("snapshot", snap)
	}
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}
