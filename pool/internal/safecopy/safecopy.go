// Package safecopy copies a sandbox's writable tree to or from the
// snapshot store without trusting the tree (docs/architecture.md,
// "Snapshots copy safely"). The agent owns the tree and may rearrange it
// while the copy runs, so the walk goes by file descriptor: every
// directory and file is opened relative to its parent's descriptor with
// O_NOFOLLOW, so a symlink swapped in mid-walk is never followed out of the
// tree (a symlink is copied as a symlink, its target never opened); holes
// are kept (SEEK_DATA/SEEK_HOLE); the bytes copied are capped with a typed
// error and the context is checked between chunks, inside large files too.
// Both providers snapshot through it.
package safecopy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/pool"
	"golang.org/x/sys/unix"
)

// DefaultMax bounds what one snapshot (or one restore from it) copies
// when a provider's SnapshotBytes option is 0.
const DefaultMax = 4 << 30

// EntryCost is what each directory entry counts against the byte cap: a
// tree of a million empty files costs as much to copy as its data.
const EntryCost = 512

// maxCopyDepth bounds directory nesting in a copied tree.
const maxCopyDepth = 256

// copyChunk is the most one copy_file_range (or read/write) moves before
// the context and the cap are checked again.
const copyChunk = 4 << 20

// ErrTooLarge is the kind of the error a copy over its byte cap fails
// with (wire code too_large: the agent filled its disk).
var ErrTooLarge = errors.New("snapshot too large")

// Copy is one copy of one or more trees under a shared byte cap.
type Copy struct {
	Ctx      context.Context
	UID, GID int   // owner of what is created; -1: the copier's
	Max      int64 // cap on data bytes + EntryCost per entry; <= 0: none
	// Skip, when set, names entries left out of the copy by their path
	// relative to the copied tree's root; a skipped directory is left out
	// whole. SkipX leaves out X's leftovers at any depth.
	Skip func(rel string, isDir bool) bool

	into bool  // Into: dst exists and may hold entries
	n    int64 // counted so far
	buf  []byte
}

// Copied is what the copy counted against its cap so far.
func (c *Copy) Copied() int64 { return c.n }

// XLeftover reports X lock files and socket dirs, which never belong in a
// snapshot or a fresh sandbox.
func XLeftover(name string) bool {
	return name == ".X11-unix" || name == ".ICE-unix" ||
		(strings.HasPrefix(name, ".X") && strings.HasSuffix(name, "-lock"))
}

// SkipX is a Skip that leaves out X's leftovers (XLeftover) at any depth.
func SkipX(rel string, _ bool) bool { return XLeftover(filepath.Base(rel)) }

// tooLarge is the typed error of a copy over its cap.
func (c *Copy) tooLarge() error {
	return pool.Errorf(ErrTooLarge, aci.CodeTooLarge,
		"snapshot over its cap of %d bytes (data plus %d bytes per file; snapshot_bytes): the sandbox's writable directories hold too much", c.Max, EntryCost)
}

// charge counts n bytes against the cap.
func (c *Copy) charge(n int64) error {
	c.n += n
	if c.Max > 0 && c.n > c.Max {
		return c.tooLarge()
	}
	return nil
}

// Tree copies the directory rel below base into dst (created): regular
// files, dirs and symlinks only, skipping sockets, fifos, devices and what
// Skip names; what it creates gets UID/GID when UID >= 0. base is trusted
// (the caller's own directory, or a container's /proc/<pid>/root); rel is
// resolved beneath it without following any symlink, and nothing below it
// is followed either.
func (c *Copy) Tree(base, rel, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	return c.tree(base, rel, dst)
}

// Into copies the tree src (trusted: a snapshot the caller wrote) into
// dst, an existing directory that may already hold entries (a live
// sandbox's directory a restore emptied of all but the session's own):
// existing directories are merged into, never through a symlink, and an
// existing file or link the copy also holds is replaced by the copy.
// Holes, the cap, Skip and ownership are as for Tree.
func (c *Copy) Into(src, dst string) error {
	c.into = true
	defer func() { c.into = false }()
	return c.tree(src, ".", dst)
}

func (c *Copy) tree(base, rel, dst string) error {
	bfd, err := unix.Open(base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", base, err)
	}
	defer unix.Close(bfd)
	sfd, err := unix.Openat2(bfd, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return fmt.Errorf("open %s beneath %s: %w", rel, base, err)
	}
	defer unix.Close(sfd)
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return err
	}
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dst, err)
	}
	defer unix.Close(dfd)
	if err := c.dir(sfd, dfd, "", 0); err != nil {
		return err
	}
	if err := unix.Fchmod(dfd, st.Mode&0o7777); err != nil {
		return err
	}
	return c.own(dfd)
}

// own gives fd to the copy's owner.
func (c *Copy) own(fd int) error {
	if c.UID < 0 {
		return nil
	}
	return unix.Fchown(fd, c.UID, c.GID)
}

// dir copies the entries of the open directory sfd (at rel in the tree)
// into dfd.
func (c *Copy) dir(sfd, dfd int, rel string, depth int) error {
	if depth > maxCopyDepth {
		return pool.Errorf(ErrTooLarge, aci.CodeTooLarge, "snapshot: directories nested deeper than %d", maxCopyDepth)
	}
	// Read the names through a duplicate: os.File owns (and closes) its fd.
	rfd, err := unix.FcntlInt(uintptr(sfd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(rfd), "dir")
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			if err := c.Ctx.Err(); err != nil {
				return err
			}
			if err := c.charge(EntryCost); err != nil {
				return err
			}
			if err := c.entry(sfd, dfd, name, path.Join(rel, name), depth); err != nil {
				return err
			}
		}
		if err == io.EOF || (err == nil && len(names) == 0) || vanished(err) {
			return nil // done, or the directory was removed meanwhile
		}
		if err != nil {
			return err
		}
	}
}

// vanished reports errors of an entry the agent removed or swapped while it
// was copied: it is skipped, as if it had gone a moment earlier.
func vanished(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)
}

// entry copies one entry of sfd, named name (rel in the tree), into dfd.
func (c *Copy) entry(sfd, dfd int, name, rel string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if vanished(err) {
			return nil
		}
		return err
	}
	if c.Skip != nil && c.Skip(rel, st.Mode&unix.S_IFMT == unix.S_IFDIR) {
		return nil
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		cfd, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			if vanished(err) {
				return nil // swapped for a symlink or a file since the stat
			}
			return err
		}
		defer unix.Close(cfd)
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil && !(c.into && errors.Is(err, unix.EEXIST)) {
			return err
		}
		// O_NOFOLLOW: an existing entry that is a link fails here.
		tfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(tfd)
		if err := c.dir(cfd, tfd, rel, depth+1); err != nil {
			return err
		}
		// The mode last: a read-only directory still receives its entries.
		if err := unix.Fchmod(tfd, st.Mode&0o1777); err != nil {
			return err
		}
		return c.own(tfd)
	case unix.S_IFLNK:
		target, err := readlinkat(sfd, name)
		if err != nil {
			if vanished(err) || errors.Is(err, unix.EINVAL) {
				return nil
			}
			return err
		}
		if err := c.charge(int64(len(target))); err != nil {
			return err
		}
		if err := c.replace(dfd, name, func() error { return unix.Symlinkat(target, dfd, name) }); err != nil {
			return err
		}
		if c.UID < 0 {
			return nil
		}
		return unix.Fchownat(dfd, name, c.UID, c.GID, unix.AT_SYMLINK_NOFOLLOW)
	case unix.S_IFREG:
		// O_NONBLOCK: a fifo swapped in since the stat does not hang the
		// open; it is refused by the type check below.
		in, err := unix.Openat(sfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
		if err != nil {
			if vanished(err) {
				return nil
			}
			return err
		}
		defer unix.Close(in)
		if err := unix.Fstat(in, &st); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil
		}
		var out int
		if err := c.replace(dfd, name, func() (err error) {
			out, err = unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
			return err
		}); err != nil {
			return err
		}
		defer unix.Close(out)
		if err := c.file(in, out, st.Size); err != nil {
			return fmt.Errorf("copy %s: %w", name, err)
		}
		if err := unix.Fchmod(out, st.Mode&0o777); err != nil {
			return err
		}
		return c.own(out)
	default:
		return nil // sockets, fifos, devices
	}
}

// replace runs create (which makes dfd's entry name); copying Into, an
// existing file or link of that name (a kept session process wrote it
// since the restore emptied the directory) is removed first: the copy
// wins.
func (c *Copy) replace(dfd int, name string, create func() error) error {
	err := create()
	if c.into && errors.Is(err, unix.EEXIST) {
		if err = unix.Unlinkat(dfd, name, 0); err == nil {
			err = create()
		}
	}
	return err
}

// readlinkat reads a symlink's target, bounded by PATH_MAX.
func readlinkat(dirfd int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dirfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// file copies the first size bytes of in to out, data extents only: holes
// stay holes, so a sparse file of any apparent size costs its data.
func (c *Copy) file(in, out int, size int64) error {
	if size == 0 {
		return nil
	}
	off := int64(0)
	for off < size {
		data, err := unix.Seek(in, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole remains
		}
		if err != nil {
			// No SEEK_DATA here: all of it is data.
			data = off
		}
		end := size
		if err == nil {
			if h, herr := unix.Seek(in, data, unix.SEEK_HOLE); herr == nil {
				end = min(h, size)
			}
		}
		if data >= size {
			break
		}
		if err := c.extent(in, out, data, end); err != nil {
			return err
		}
		off = end
	}
	// The file's length, a trailing hole included.
	return unix.Ftruncate(out, size)
}

// extent copies [from, to) of in to the same offsets of out, in chunks,
// checking the context and the cap before each.
func (c *Copy) extent(in, out int, from, to int64) error {
	for from < to {
		if err := c.Ctx.Err(); err != nil {
			return err
		}
		n := min(to-from, copyChunk)
		if err := c.charge(n); err != nil {
			return err
		}
		roff, woff := from, from
		k, err := unix.CopyFileRange(in, &roff, out, &woff, int(n), 0)
		if err != nil || k == 0 {
			// Not supported between these files (or EOF: the file
			// shrank): read and write.
			k, err = c.readWrite(in, out, from, n)
			if err != nil {
				return err
			}
			if k == 0 {
				return nil // the file shrank under us
			}
		}
		c.n -= n - int64(k) // charge what was actually moved
		from += int64(k)
	}
	return nil
}

// readWrite copies up to n bytes at off with pread/pwrite.
func (c *Copy) readWrite(in, out int, off, n int64) (int, error) {
	if c.buf == nil {
		c.buf = make([]byte, 1<<20)
	}
	done := 0
	for int64(done) < n {
		want := min(n-int64(done), int64(len(c.buf)))
		k, err := unix.Pread(in, c.buf[:want], off+int64(done))
		if err != nil {
			return done, err
		}
		if k == 0 {
			return done, nil
		}
		if _, err := unix.Pwrite(out, c.buf[:k], off+int64(done)); err != nil {
			return done, err
		}
		done += k
	}
	return done, nil
}

// Bytes is the size of the regular files under dir (a snapshot the
// provider wrote; directories and links count nothing), checking ctx as it
// walks. It is what pool.SnapshotSizer reports for both providers.
func Bytes(ctx context.Context, dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n, err
}
