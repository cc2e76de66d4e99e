package process

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"
)

// stamp identifies one state of a file: the kernel sets ctime on every
// change of content, metadata or links, and no unprivileged process can set
// it back, so an entry whose inode and ctime are unchanged is untouched.
type stamp struct {
	ino, dev uint64
	ctime    unix.Timespec
	mode     uint32
	size     int64
}

// restoreState is what a sandbox's writable dirs held right after their
// last restore: the snapshot dir they came from and every entry's stamp
// (by path relative to the sandbox dir).
type restoreState struct {
	seed    string
	entries map[string]stamp
}

// scanRestored records the stamps of the writable dirs' entries (X
// leftovers aside); nil when a dir cannot be read (the next reset then
// restores in full).
func scanRestored(dir, seed string) *restoreState {
	st := &restoreState{seed: seed, entries: map[string]stamp{}}
	for _, d := range writableDirs {
		root := filepath.Join(dir, d)
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if path != root && isXLeftover(e.Name()) {
				if e.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			s, ok := stampOf(path)
			if !ok {
				return errors.New("stat failed")
			}
			rel, _ := filepath.Rel(dir, path)
			st.entries[rel] = s
			return nil
		})
		if err != nil {
			return nil
		}
	}
	return st
}

func stampOf(path string) (stamp, bool) {
	var s unix.Stat_t
	if unix.Lstat(path, &s) != nil {
		return stamp{}, false
	}
	return stamp{ino: s.Ino, dev: s.Dev, ctime: s.Ctim, mode: s.Mode, size: s.Size}, true
}

// restore returns b's writable dirs to seed's content ("" for empty).
// When they were last restored from the same seed, only what changed
// since is removed and copied again (see stamp); otherwise they are
// emptied and copied in full. Either way the new state is recorded.
func (b *box) restore(ctx context.Context, seed string, uid, gid int) error {
	var err error
	if r := b.restored; r != nil && r.seed == seed {
		err = restoreChanged(ctx, b.dir, seed, r, uid, gid)
	} else {
		err = restoreDirs(ctx, b.dir, seed, uid, gid)
	}
	b.restored = nil
	if err != nil {
		return err
	}
	b.restored = scanRestored(b.dir, seed)
	return nil
}

// restoreChanged removes every entry that is new or changed since r was
// recorded and copies back from seed every recorded entry that is then
// missing.
func restoreChanged(ctx context.Context, dir, seed string, r *restoreState, uid, gid int) error {
	for _, d := range writableDirs {
		root := filepath.Join(dir, d)
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if path == root {
				return nil
			}
			if isXLeftover(e.Name()) && filepath.Dir(path) == filepath.Join(dir, "tmp") {
				if e.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			rel, _ := filepath.Rel(dir, path)
			was, known := r.entries[rel]
			now, ok := stampOf(path)
			switch {
			case !ok:
				return nil // gone meanwhile
			case known && now == was:
				return nil // untouched (a dir: look at its entries)
			case known && e.IsDir() && now.ino == was.ino && now.mode == was.mode:
				return nil // entries added or removed: look at them
			}
			if err := removeAll(path); err != nil {
				return err
			}
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := fixRoots(dir, seed, uid, gid); err != nil {
		return err
	}
	if seed == "" {
		return nil
	}
	missing := make([]string, 0)
	for rel := range r.entries {
		if _, err := os.Lstat(filepath.Join(dir, rel)); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, rel)
		}
	}
	slices.Sort(missing) // parents before their children
	for _, rel := range missing {
		to := filepath.Join(dir, rel)
		if _, err := os.Lstat(to); err == nil {
			continue // copied with its parent
		}
		if err := copyTree(ctx, filepath.Join(seed, rel), to, uid, gid); err != nil {
			return err
		}
	}
	return nil
}

// fixRoots gives the writable dirs themselves (which stay: they are bind
// mounts) the modes and owner a restore from seed gives them, and makes
// sure the runtime dir exists.
func fixRoots(dir, seed string, uid, gid int) error {
	for _, d := range writableDirs {
		p := filepath.Join(dir, d)
		mode := fs.FileMode(0o755)
		switch {
		case d == "tmp":
			mode = 0o1777
		case seed != "":
			fi, err := os.Stat(filepath.Join(seed, d))
			if err != nil {
				return err
			}
			mode = fi.Mode() & (fs.ModePerm | fs.ModeSticky)
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
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
