package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/pool"
	"golang.org/x/sys/unix"
)

// A snapshot copies a live sandbox's writable directories, which the agent
// owns and may rearrange while the copy runs (docs/architecture.md,
// "Snapshots copy safely"). treeCopy therefore walks by file descriptor:
// every directory and file is opened relative to its parent's descriptor
// with O_NOFOLLOW, so a symlink swapped in mid-walk is never followed out of
// the tree (a symlink is copied as a symlink, its target never opened);
// holes are kept (SEEK_DATA/SEEK_HOLE); the bytes copied are capped and
// the context is checked between chunks, inside large files too.

// DefaultSnapshotBytes bounds what one snapshot (or one restore from it)
// copies when Options.SnapshotBytes is 0.
const DefaultSnapshotBytes = 4 << 30

// entryCost is what each directory entry counts against the byte cap: a
// tree of a million empty files costs as much to copy as its data.
const entryCost = 512

// maxCopyDepth bounds directory nesting in a copied tree.
const maxCopyDepth = 256

// copyChunk is the most one copy_file_range (or read/write) moves before
// the context and the cap are checked again.
const copyChunk = 4 << 20

// ErrSnapshotTooLarge is the kind of the error a snapshot over its byte cap
// fails with (wire code too_large: the agent filled its disk).
var ErrSnapshotTooLarge = errors.New("snapshot too large")

// treeCopy is one copy of up to three trees under a shared byte cap.
type treeCopy struct {
	ctx      context.Context
	uid, gid int   // owner of what is created; -1: the copier's
	max      int64 // cap on data bytes + entryCost per entry; <= 0: none
	n        int64 // counted so far
	buf      []byte
}

// tooLarge is the typed error of a copy over its cap.
func (c *treeCopy) tooLarge() error {
	return pool.Errorf(ErrSnapshotTooLarge, aci.CodeTooLarge,
		"process: snapshot over its cap of %d bytes (data plus %d bytes per file; Options.SnapshotBytes): the sandbox's home, workspace and /tmp hold too much", c.max, entryCost)
}

// charge counts n bytes against the cap.
func (c *treeCopy) charge(n int64) error {
	c.n += n
	if c.max > 0 && c.n > c.max {
		return c.tooLarge()
	}
	return nil
}

// copyTree copies src into dst (created), regular files, dirs and symlinks
// only, skipping sockets, fifos, devices and X leftovers; what it creates
// gets uid/gid when uid >= 0. It never follows a symlink: neither src
// itself nor anything below it.
func (c *treeCopy) copyTree(src, dst string) error {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer unix.Close(sfd)
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return err
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", dst, err)
	}
	defer unix.Close(dfd)
	if err := c.dir(sfd, dfd, 0); err != nil {
		return err
	}
	if err := unix.Fchmod(dfd, st.Mode&0o7777); err != nil {
		return err
	}
	return c.own(dfd)
}

// own gives fd to the copy's owner.
func (c *treeCopy) own(fd int) error {
	if c.uid < 0 {
		return nil
	}
	return unix.Fchown(fd, c.uid, c.gid)
}

// dir copies the entries of the open directory sfd into dfd.
func (c *treeCopy) dir(sfd, dfd, depth int) error {
	if depth > maxCopyDepth {
		return pool.Errorf(ErrSnapshotTooLarge, aci.CodeTooLarge, "process: snapshot: directories nested deeper than %d", maxCopyDepth)
	}
	// Read the names through a duplicate: os.File owns (and closes) its fd.
	rfd, err := unix.Dup(sfd)
	if err != nil {
		return err
	}
	unix.CloseOnExec(rfd)
	f := os.NewFile(uintptr(rfd), "dir")
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			if err := c.ctx.Err(); err != nil {
				return err
			}
			if isXLeftover(name) {
				continue
			}
			if err := c.charge(entryCost); err != nil {
				return err
			}
			if err := c.entry(sfd, dfd, name, depth); err != nil {
				return err
			}
		}
		if err == io.EOF || (err == nil && len(names) == 0) {
			return nil
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

// entry copies one entry of sfd, named name, into dfd.
func (c *treeCopy) entry(sfd, dfd int, name string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(sfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if vanished(err) {
			return nil
		}
		return err
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
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil {
			return err
		}
		tfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(tfd)
		if err := c.dir(cfd, tfd, depth+1); err != nil {
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
		if err := unix.Symlinkat(target, dfd, name); err != nil {
			return err
		}
		if c.uid < 0 {
			return nil
		}
		return unix.Fchownat(dfd, name, c.uid, c.gid, unix.AT_SYMLINK_NOFOLLOW)
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
		out, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
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
func (c *treeCopy) file(in, out int, size int64) error {
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
func (c *treeCopy) extent(in, out int, from, to int64) error {
	for from < to {
		if err := c.ctx.Err(); err != nil {
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
func (c *treeCopy) readWrite(in, out int, off, n int64) (int, error) {
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
