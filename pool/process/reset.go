package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/internal/safecopy"
)

var _ pool.Resetter = (*Provider)(nil)

// ResetInPlace implements pool.Resetter (docs/architecture.md, "Reset in
// place"): guestd ends every process of the episode and resets the X
// server (quiesce); the sandbox's home, workspace and /tmp are then
// emptied and refilled from the snapshot, leaving only the live session's
// own files (X sockets and locks, its buses' directory, guestd's logs);
// guestd relaunches the apps the snapshot records. The sandbox keeps its
// display, uid, cgroups and namespaces.
func (p *Provider) ResetInPlace(ctx context.Context, id, snap string, g *client.Client) error {
	p.mu.Lock()
	b := p.boxes[id]
	dir, ok := p.snaps[snap]
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
	if _, err := g.Reset(ctx, wire.ResetArgs{Phase: wire.ResetQuiesce}); err != nil {
		return fmt.Errorf("process: reset %s: quiesce: %w", id, err)
	}
	for _, d := range writableDirs {
		skip := keepSession(d, b.display)
		if err := restoreTree(ctx, filepath.Join(dir, d), filepath.Join(b.dir, d), b.uidOr(-1), b.uidOr(-1), skip); err != nil {
			return fmt.Errorf("process: reset %s: restore %s: %w", id, d, err)
		}
	}
	if _, err := g.Reset(ctx, wire.ResetArgs{Phase: wire.ResetRelaunch}); err != nil {
		return fmt.Errorf("process: reset %s: relaunch: %w", id, err)
	}
	return nil
}

// uidOr is the box's agent uid, or def without one.
func (b *box) uidOr(def int) int {
	if b.uid == 0 {
		return def
	}
	return b.uid
}

// keepSession is the set of entries of writable dir d (relative paths)
// that belong to the live session, not to the episode: the X server's
// socket and lock for display. Such an entry is neither removed nor
// overwritten by a restore; everything else the episode left, X-looking or
// not, goes (the session's logs and bus configuration live in guestd's own
// directory beside the guest socket, which the agent cannot write).
func keepSession(d string, display int) func(rel string, isDir bool) (keep, descend bool) {
	sock, lock := fmt.Sprintf(".X11-unix/X%d", display), fmt.Sprintf(".X%d-lock", display)
	return func(rel string, isDir bool) (bool, bool) {
		switch d {
		case "tmp":
			switch {
			case rel == ".X11-unix" && isDir:
				return false, true
			case rel == sock || rel == lock:
				return true, false
			}
			return false, false
		}
		return false, false
	}
}

// restoreTree makes dst (a live directory, mounted into the sandbox, so it
// is emptied rather than replaced) a copy of src: every entry of dst that
// keep does not name is removed, then src is copied in, skipping what keep
// names. Nothing of the sandbox runs meanwhile (quiesce ended it).
func restoreTree(ctx context.Context, src, dst string, uid, gid int, keep func(rel string, isDir bool) (bool, bool)) error {
	if err := emptyExcept(dst, "", keep); err != nil {
		return err
	}
	c := &safecopy.Copy{Ctx: ctx, UID: uid, GID: gid, Skip: func(rel string, isDir bool) bool {
		k, _ := keep(rel, isDir)
		return k || safecopy.XLeftover(filepath.Base(rel))
	}}
	return c.Into(src, dst)
}

// removeAll is os.RemoveAll tried a few times: a kept session process (the
// window manager writing a cache) may create an entry in a directory while
// it is being removed.
func removeAll(path string) error {
	var err error
	for range 5 {
		if err = os.RemoveAll(path); err == nil {
			return nil
		}
	}
	return err
}

// emptyExcept removes every entry under dir/rel that keep neither keeps nor
// descends into. Entries are read without following symlinks.
func emptyExcept(dir, rel string, keep func(rel string, isDir bool) (bool, bool)) error {
	ents, err := os.ReadDir(filepath.Join(dir, rel))
	if err != nil {
		return err
	}
	for _, e := range ents {
		r := filepath.Join(rel, e.Name())
		k, descend := keep(r, e.IsDir())
		switch {
		case k:
		case descend && e.IsDir():
			if err := emptyExcept(dir, r, keep); err != nil {
				return err
			}
		default:
			if err := removeAll(filepath.Join(dir, r)); err != nil {
				return err
			}
		}
	}
	return nil
}
