package guest

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

// The trainer's chunked files and directories (docs/api.md, "Trainer
// files"), with the agent's filesystem identity (asAgentFS) and the
// verifier library's rules: below the agent's home no link is followed,
// no FIFO is opened, nothing blocks, and every read and every archive is
// bounded.

// agentPath resolves a trainer path: "~/" is the agent's home.
func (s *Server) agentPath(p, op string) (abs, home string, err error) {
	home = envHome(s.cfg.Env)
	abs = p
	if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
		abs = filepath.Join(home, rest)
	}
	if !filepath.IsAbs(abs) {
		return "", "", aci.Errorf(aci.CodeBadRequest, "%s: path %q is not absolute (or ~/...)", op, p)
	}
	return filepath.Clean(abs), home, nil
}

// wireCheckError maps a safe reader's failure to the wire's codes.
func wireCheckError(err error, op, p string) error {
	switch statusOf(err) {
	case CheckMissing:
		return aci.Errorf(aci.CodeNotFound, "%s %s: %v", op, p, err)
	case CheckTooLarge:
		return aci.Errorf(aci.CodeTooLarge, "%s %s: %v", op, p, err)
	}
	return aci.Errorf(aci.CodeBadRequest, "%s %s: %v", op, p, err)
}

// openEntry opens p's entry (O_PATH, no link followed anywhere below home)
// and stats it; the caller closes dirfd.
func openEntry(p, home string) (dirfd int, name string, st unix.Stat_t, err error) {
	dirfd, name, err = walkParent(p, home)
	if err != nil {
		return -1, "", st, err
	}
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(dirfd)
		return -1, "", st, openError(err, "")
	}
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	if err != nil {
		unix.Close(dirfd)
		return -1, "", st, failf(CheckUnreadable, "stat: %v", err)
	}
	return dirfd, name, st, nil
}

// getAgentRange reads a.Length bytes (at most MaxGetFile) at a.Offset of
// one of the agent's regular files.
func (s *Server) getAgentRange(a wire.GetFileArgs) (*wire.GetFileResult, error) {
	p, home, err := s.agentPath(a.Path, "get_file")
	if err != nil {
		return nil, err
	}
	if a.Offset < 0 || a.Length <= 0 || a.Length > wire.MaxGetFile {
		return nil, aci.Errorf(aci.CodeBadRequest, "get_file: offset %d length %d: want offset ≥ 0 and 1..%d bytes", a.Offset, a.Length, wire.MaxGetFile)
	}
	var res wire.GetFileResult
	err = s.asAgentFS(func() error {
		dirfd, name, st, err := openEntry(p, home)
		if err != nil {
			return err
		}
		defer unix.Close(dirfd)
		if kind := kindOf(st.Mode); kind != "file" {
			return failf(CheckMismatch, "a %s, not a regular file", kind)
		}
		fd, err := reopen(dirfd, name, 0, &st)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		res.Total = st.Size
		if a.Offset >= st.Size {
			res.Data = []byte{}
			return nil
		}
		buf := make([]byte, min(int64(a.Length), st.Size-a.Offset))
		n := 0
		for n < len(buf) {
			k, err := unix.Pread(fd, buf[n:], a.Offset+int64(n))
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return failf(CheckUnreadable, "read: %v", err)
			}
			if k == 0 {
				break // the file shrank: what is there
			}
			n += k
		}
		res.Data = buf[:n]
		return nil
	})
	if err != nil {
		return nil, wireCheckError(err, "get_file", a.Path)
	}
	return &res, nil
}

// putAgentChunk writes a.Data at a.Offset of a file of exactly a.Offset
// bytes: the chunks of a large file arrive in order, without holes.
func (s *Server) putAgentChunk(a wire.PutFileArgs) error {
	p, _, err := s.agentPath(a.Path, "put_file")
	if err != nil {
		return err
	}
	if a.Offset < 0 || a.Offset+int64(len(a.Data)) > wire.MaxPutFile {
		return aci.Errorf(aci.CodeTooLarge, "put_file: a chunk at %d of %d bytes ends past %d", a.Offset, len(a.Data), wire.MaxPutFile)
	}
	err = s.asAgentFS(func() error {
		f, err := os.OpenFile(p, os.O_WRONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s is not a regular file", a.Path)
		}
		if fi.Size() != a.Offset {
			return fmt.Errorf("a chunk at offset %d, but the file holds %d bytes (chunks go in order, the first at 0)", a.Offset, fi.Size())
		}
		if _, err := f.WriteAt(a.Data, a.Offset); err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return aci.Errorf(aci.CodeNotFound, "put_file %s: a chunk at %d of a file not started (the first chunk is at offset 0)", a.Path, a.Offset)
		}
		return aci.Errorf(aci.CodeBadRequest, "put_file %s: %v", a.Path, err)
	}
	return nil
}

// tarName checks an archive entry's name: relative, clean, inside.
func tarName(n string) (string, error) {
	c := path.Clean(strings.TrimPrefix(n, "./"))
	if n == "" || strings.ContainsRune(n, 0) || path.IsAbs(n) || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("entry %q: names must be relative and stay inside the directory", n)
	}
	return c, nil
}

// putAgentTree unpacks a.Data, a tar, below a.Path as the agent: only
// directories and regular files, each name inside the directory, each
// file written as put_file writes one (no link followed at its place, no
// FIFO opened). A link the agent planted inside the directory leads
// nowhere: parents are opened without following links. The whole archive
// is checked before anything is written.
func (s *Server) putAgentTree(a wire.PutFileArgs) error {
	root, home, err := s.agentPath(a.Path, "put_file")
	if err != nil {
		return err
	}
	type entry struct {
		name string
		dir  bool
		mode os.FileMode
		data []byte
	}
	var entries []entry
	tr := tar.NewReader(bytes.NewReader(a.Data))
	total := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return aci.Errorf(aci.CodeBadRequest, "put_file %s: not a tar archive: %v", a.Path, err)
		}
		if len(entries) >= wire.MaxTreeEntries {
			return aci.Errorf(aci.CodeTooLarge, "put_file %s: more than %d entries", a.Path, wire.MaxTreeEntries)
		}
		name, err := tarName(h.Name)
		if err != nil {
			return aci.Errorf(aci.CodeBadRequest, "put_file %s: %v", a.Path, err)
		}
		mode := os.FileMode(h.Mode) & 0o777
		switch h.Typeflag {
		case tar.TypeDir:
			entries = append(entries, entry{name: name, dir: true, mode: mode})
		case tar.TypeReg:
			// Bounded by what is left of MaxPutFile, so a sparse entry
			// that claims more than the archive holds is refused.
			data, err := io.ReadAll(io.LimitReader(tr, int64(wire.MaxPutFile-total)+1))
			if err != nil {
				return aci.Errorf(aci.CodeBadRequest, "put_file %s: entry %q: %v", a.Path, h.Name, err)
			}
			if total += len(data); total > wire.MaxPutFile {
				return aci.Errorf(aci.CodeTooLarge, "put_file %s: the archive unpacks past %d bytes", a.Path, wire.MaxPutFile)
			}
			if name == "." {
				return aci.Errorf(aci.CodeBadRequest, "put_file %s: a file entry names the directory itself", a.Path)
			}
			entries = append(entries, entry{name: name, mode: mode, data: data})
		default:
			return aci.Errorf(aci.CodeBadRequest, "put_file %s: entry %q is a %s: a directory carries directories and regular files only",
				a.Path, h.Name, tarKind(h.Typeflag))
		}
	}
	err = s.asAgentFS(func() error {
		rootfd, err := dirAt(root, home, 0o755)
		if err != nil {
			return err
		}
		defer unix.Close(rootfd)
		for _, e := range entries {
			dir, base := path.Split(e.name)
			if e.dir {
				dir, base = e.name, ""
			}
			dfd := rootfd
			if dir != "" && dir != "./" {
				mode := os.FileMode(0o755)
				if e.dir && e.mode != 0 {
					mode = e.mode
				}
				if dfd, err = dirBelow(rootfd, dir, mode); err != nil {
					return fmt.Errorf("%s: %w", e.name, err)
				}
			}
			if !e.dir {
				mode := e.mode
				if mode == 0 {
					mode = 0o644
				}
				err = writeAt(dfd, base, e.data, mode)
			}
			if dfd != rootfd {
				unix.Close(dfd)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return aci.Errorf(aci.CodeBadRequest, "put_file %s: %v", a.Path, err)
	}
	return nil
}

// dirAt opens directory p (O_PATH), making it and its missing parents;
// below home no component is followed if it is a link, so a link the
// agent planted fails the put instead of leading it elsewhere.
func dirAt(p, home string, mode os.FileMode) (int, error) {
	base := "/"
	if home != "" && (p == home || strings.HasPrefix(p, home+"/")) {
		base = home
	}
	fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, base), "/")
	if rel == "" {
		return fd, nil
	}
	next, err := dirBelow(fd, rel, mode)
	unix.Close(fd)
	return next, err
}

// dirBelow opens rel (slash-separated) below the directory open at fd,
// making what is missing with mode, one component at a time, none of
// them followed if it is a link. The caller closes the result.
func dirBelow(fd int, rel string, mode os.FileMode) (int, error) {
	cur, err := unix.Dup(fd)
	if err != nil {
		return -1, err
	}
	for _, part := range strings.Split(strings.Trim(rel, "/"), "/") {
		if part == "" || part == "." {
			continue
		}
		next, err := unix.Openat(cur, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(cur, part, uint32(mode.Perm())); err == nil || errors.Is(err, unix.EEXIST) {
				next, err = unix.Openat(cur, part, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
		}
		unix.Close(cur)
		if err != nil {
			if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
				return -1, fmt.Errorf("%s: not a directory (a link is never followed)", part)
			}
			return -1, fmt.Errorf("%s: %w", part, err)
		}
		cur = next
	}
	return cur, nil
}

// writeAt writes data to name in the directory open at dirfd as put_file
// writes a file: no link followed at its place, nothing but a regular
// file written to, never blocking on a FIFO.
func writeAt(dirfd int, name string, data []byte, mode os.FileMode) error {
	fd, err := unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		if err == nil {
			err = fmt.Errorf("%s is not a regular file", name)
		}
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	return f.Close()
}

func tarKind(t byte) string {
	switch t {
	case tar.TypeSymlink:
		return "symlink"
	case tar.TypeLink:
		return "hard link"
	case tar.TypeChar, tar.TypeBlock:
		return "device"
	case tar.TypeFifo:
		return "FIFO"
	}
	return fmt.Sprintf("type %q entry", t)
}

// getAgentTree archives the agent's directory a.Path as a tar: its
// directories and regular files, its links as links; every entry is
// opened from its parent's descriptor without following a link, a file
// without blocking. FIFOs, sockets and devices are skipped and named.
func (s *Server) getAgentTree(a wire.GetFileArgs) (*wire.GetFileResult, error) {
	root, home, err := s.agentPath(a.Path, "get_file")
	if err != nil {
		return nil, err
	}
	var res wire.GetFileResult
	err = s.asAgentFS(func() error {
		dirfd, name, st, err := openEntry(root, home)
		if err != nil {
			return err
		}
		defer unix.Close(dirfd)
		if kind := kindOf(st.Mode); kind != "dir" {
			return failf(CheckMismatch, "a %s, not a directory", kind)
		}
		fd, err := reopen(dirfd, name, unix.O_DIRECTORY, &st)
		if err != nil {
			return err
		}
		w := &treeWriter{buf: &cappedBuffer{max: wire.MaxGetFile}}
		w.tw = tar.NewWriter(w.buf)
		if err := w.dir(fd, ".", 0); err != nil {
			return err
		}
		if err := w.tw.Close(); err != nil {
			return w.fail(err)
		}
		res.Data, res.Skipped = w.buf.Bytes(), w.skipped
		return nil
	})
	if err != nil {
		return nil, wireCheckError(err, "get_file", a.Path)
	}
	return &res, nil
}

// treeWriter writes a directory's tree into a tar, bounded in entries and
// bytes.
type treeWriter struct {
	tw      *tar.Writer
	buf     *cappedBuffer
	entries int
	skipped []string
}

func (w *treeWriter) fail(err error) error {
	if errors.Is(err, errArchiveFull) {
		return failf(CheckTooLarge, "the archive passes %d bytes", wire.MaxGetFile)
	}
	return failf(CheckUnreadable, "%v", err)
}

func (w *treeWriter) count() error {
	if w.entries++; w.entries > wire.MaxTreeEntries {
		return failf(CheckTooLarge, "more than %d entries", wire.MaxTreeEntries)
	}
	return nil
}

// maxTreeDepth bounds how deep an archived tree goes (each level holds a
// descriptor while its children are read).
const maxTreeDepth = 64

// dir archives the directory open at fd (closed here) as rel, depth
// levels below the archive's root.
func (w *treeWriter) dir(fd int, rel string, depth int) error {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if depth > maxTreeDepth {
		return failf(CheckTooLarge, "%s: deeper than %d directories", rel, maxTreeDepth)
	}
	names, err := f.Readdirnames(wire.MaxTreeEntries + 1)
	if err != nil && err != io.EOF {
		return failf(CheckUnreadable, "%s: %v", rel, err)
	}
	if len(names) > wire.MaxTreeEntries {
		return failf(CheckTooLarge, "%s: more than %d entries", rel, wire.MaxTreeEntries)
	}
	slices.Sort(names)
	for _, n := range names {
		if err := w.count(); err != nil {
			return err
		}
		child := path.Join(rel, n)
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		h := &tar.Header{Name: child, Mode: int64(st.Mode & 0o777), ModTime: time.Unix(st.Mtim.Unix())}
		switch kindOf(st.Mode) {
		case "dir":
			h.Typeflag, h.Name = tar.TypeDir, child+"/"
			if err := w.tw.WriteHeader(h); err != nil {
				return w.fail(err)
			}
			sub, err := reopen(fd, n, unix.O_DIRECTORY, &st)
			if err != nil {
				return err
			}
			if err := w.dir(sub, child, depth+1); err != nil {
				return err
			}
		case "file":
			sub, err := reopen(fd, n, 0, &st)
			if err != nil {
				return err
			}
			h.Typeflag, h.Size = tar.TypeReg, st.Size
			if st.Size > wire.MaxGetFile {
				unix.Close(sub)
				return failf(CheckTooLarge, "%s: %d bytes, past the archive's %d", child, st.Size, wire.MaxGetFile)
			}
			err = w.tw.WriteHeader(h)
			if err == nil {
				f := os.NewFile(uintptr(sub), child)
				_, err = io.Copy(w.tw, io.LimitReader(f, st.Size))
				f.Close()
			} else {
				unix.Close(sub)
			}
			if err != nil {
				return w.fail(err)
			}
		case "symlink":
			buf := make([]byte, 4096)
			k, err := unix.Readlinkat(fd, n, buf)
			if err != nil {
				continue
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, string(buf[:k])
			if err := w.tw.WriteHeader(h); err != nil {
				return w.fail(err)
			}
		default:
			w.skipped = append(w.skipped, child)
		}
	}
	return nil
}

// errArchiveFull is a cappedBuffer's refusal.
var errArchiveFull = errors.New("archive full")

// cappedBuffer is a bytes.Buffer that refuses a write past max bytes (an error, where verifypdf's limitedBuffer truncates).
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, errArchiveFull
	}
	return b.Buffer.Write(p)
}
