package guest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// The verifier library (docs/architecture.md, "Verifiers read the agent's
// files safely"): guestd's check mode, `guestd check OP PATH`, through which
// a verifier reads what the agent left. The agent owns every file in its
// home and may plant a FIFO, a link to a device, a directory where a file
// belongs, an unlistable directory or one too big to glob; each op opens
// only a regular file or a directory, never follows a link, never blocks,
// and bounds what it reads. What it cannot vouch for it reports on stderr
// with a non-zero status of its own, which a verifier scores as a failed
// check.

// Exit statuses of guestd check.
const (
	CheckOK = 0
	// CheckMissing: nothing is at the path (or a component of it is missing).
	CheckMissing = 1
	// CheckMismatch: something of the wrong kind is at the path: a link, a
	// FIFO, a socket, a device, a directory where a file is wanted (or a
	// file where a directory is), a link as a component of the path, or,
	// for absent, anything at all.
	CheckMismatch = 2
	// CheckTooLarge: a file over CheckMaxRead bytes, a directory of more
	// than CheckMaxEntries entries.
	CheckTooLarge = 3
	// CheckUnreadable: permission denied, a lease held, an I/O error.
	CheckUnreadable = 4
	// CheckUnsafe: the output would not survive shell line processing: a
	// NUL byte in a file read, a newline in a listed name.
	CheckUnsafe = 5
	// CheckUsage: an unknown op, a wrong number of arguments, a relative path.
	CheckUsage = 64
)

// CheckMaxRead bounds the file read reads (1 MiB).
const CheckMaxRead = 1 << 20

// CheckMaxEntries bounds the entries list reports.
const CheckMaxEntries = 1 << 16

// checkOps are the ops and what each does, for the usage message.
var checkOps = []string{
	"read PATH     the contents of a regular file, text (no NUL byte)",
	"bytes PATH    the contents of a regular file, any bytes",
	"list DIR      the names in a directory, sorted, one a line",
	"type PATH     file, dir, symlink, fifo, socket, char or block",
	"mode PATH     the permission bits of a regular file or directory, as 4 octal digits",
	"file PATH     succeeds iff PATH is a regular file",
	"dir PATH      succeeds iff PATH is a directory",
	"absent PATH   succeeds iff nothing is at PATH",
	"cells PATH    the non-empty cells of a spreadsheet (.fods, .ods), one a line: SHEET, REF, VALUE, FORMULA, TYPE, PROPS",
	"paras PATH    the paragraphs of a text document (.fodt, .odt), one a line: h|p, LEVEL|STYLE, PROPS, TEXT",
	"pdftext PATH  the text of a PDF, in reading order (pdftotext)",
}

// CheckMain is `guestd check ARGS...`: it runs one op with $AGENT_HOME as
// the anchor and returns the exit status.
func CheckMain(args []string) int {
	return Check(args, os.Getenv("AGENT_HOME"), os.Stdout, os.Stderr)
}

// checkError is a failed check: its status and what to say.
type checkError struct {
	status int
	msg    string
}

func (e *checkError) Error() string { return e.msg }

// statusOf is the exit status err calls for: a failed write of the output
// is unreadable too.
func statusOf(err error) int {
	var ce *checkError
	if errors.As(err, &ce) {
		return ce.status
	}
	return CheckUnreadable
}

func failf(status int, format string, args ...any) *checkError {
	return &checkError{status, fmt.Sprintf(format, args...)}
}

// Check runs one op (args[0]) on one absolute path (args[1]). Below anchor
// (the agent's home) no component of the path is followed if it is a link;
// the anchor itself is the infrastructure's and is resolved as usual. A
// path outside the anchor is walked from / the same way.
func Check(args []string, anchor string, stdout, stderr io.Writer) int {
	if len(args) != 2 {
		fmt.Fprintf(stderr, "usage: guestd check OP PATH, with OP one of:\n\t%s\n", strings.Join(checkOps, "\n\t"))
		return CheckUsage
	}
	op, path := args[0], args[1]
	w := bufio.NewWriterSize(stdout, 64<<10)
	err := checkOp(op, path, anchor, w)
	if err == nil {
		if ferr := w.Flush(); ferr != nil {
			err = failf(CheckUnreadable, "writing the output: %v", ferr)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "guestd check %s %q: %v\n", op, path, err)
		return statusOf(err)
	}
	return CheckOK
}

func checkOp(op, path, anchor string, w *bufio.Writer) error {
	switch op {
	case "read", "bytes", "list", "type", "mode", "file", "dir", "absent":
	case "cells", "paras":
		return checkDoc(op, path, anchor, w)
	case "pdftext":
		return checkPDF(path, anchor, w)
	default:
		return failf(CheckUsage, "unknown op (want read, bytes, list, type, mode, file, dir, absent, cells, paras or pdftext)")
	}
	if !filepath.IsAbs(path) {
		return failf(CheckUsage, "the path must be absolute")
	}
	dirfd, name, err := walkParent(filepath.Clean(path), anchor)
	if err != nil {
		if op == "absent" && statusOf(err) == CheckMissing {
			return nil
		}
		return err
	}
	defer unix.Close(dirfd)
	// O_PATH opens the entry itself, whatever it is, without reading it:
	// a FIFO is not opened for reading, a link is not followed.
	fd, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		err = openError(err, "")
		if op == "absent" && statusOf(err) == CheckMissing {
			return nil
		}
		return err
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	if err != nil {
		return failf(CheckUnreadable, "stat: %v", err)
	}
	kind := kindOf(st.Mode)
	switch op {
	case "absent":
		return failf(CheckMismatch, "a %s is there", kind)
	case "type":
		_, err := fmt.Fprintln(w, kind)
		return err
	case "file", "read", "bytes":
		if kind != "file" {
			return failf(CheckMismatch, "a %s, not a regular file", kind)
		}
	case "dir", "list":
		if kind != "dir" {
			return failf(CheckMismatch, "a %s, not a directory", kind)
		}
	case "mode":
		if kind != "file" && kind != "dir" {
			return failf(CheckMismatch, "a %s, not a regular file or directory", kind)
		}
		_, err := fmt.Fprintf(w, "%04o\n", st.Mode&0o7777)
		return err
	}
	switch op {
	case "read", "bytes":
		return readFile(dirfd, name, &st, op == "read", w)
	case "list":
		return listDir(dirfd, name, &st, CheckMaxEntries, w)
	}
	return nil
}

// walkParent opens the directory that holds path's last component and
// returns it with that component's name. Below the anchor every component
// is opened from its parent's descriptor with O_NOFOLLOW|O_DIRECTORY, so a
// link anywhere below it fails rather than leads elsewhere.
func walkParent(path, anchor string) (int, string, error) {
	base := "/"
	if anchor != "" && filepath.IsAbs(anchor) {
		anchor = filepath.Clean(anchor)
		if path == anchor || strings.HasPrefix(path, anchor+"/") {
			base = anchor
		}
	}
	fd, err := unix.Open(base, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, "", openError(err, base)
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(path, base), "/")
	if rel == "" {
		return fd, ".", nil
	}
	parts := strings.Split(rel, "/")
	for i, p := range parts[:len(parts)-1] {
		next, err := unix.Openat(fd, p, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			comp := filepath.Join(append([]string{base}, parts[:i+1]...)...)
			var st unix.Stat_t
			if (errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)) && unix.Fstatat(fd, p, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				err = failf(CheckMismatch, "%s: a %s, not a directory (a link is never followed)", comp, kindOf(st.Mode))
			} else {
				err = openError(err, comp)
			}
			unix.Close(fd)
			return -1, "", err
		}
		unix.Close(fd)
		fd = next
	}
	return fd, parts[len(parts)-1], nil
}

// openError classifies an open's error; what names the component, "" for
// the path itself.
func openError(err error, what string) error {
	if what != "" {
		what += ": "
	}
	switch {
	case errors.Is(err, unix.ENOENT):
		return failf(CheckMissing, "%sno such file or directory", what)
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.ENXIO):
		return failf(CheckMismatch, "%s%v", what, err)
	default:
		return failf(CheckUnreadable, "%s%v", what, err)
	}
}

// kindOf names a file type as type prints it.
func kindOf(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "char"
	case unix.S_IFBLK:
		return "block"
	}
	return "unknown"
}

// reopen opens name for reading, never following a link nor blocking (a
// FIFO swapped in, a lease the agent holds), and checks that it is still
// the entry stat'ed before.
func reopen(dirfd int, name string, flags int, was *unix.Stat_t) (int, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return -1, openError(err, "")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, failf(CheckUnreadable, "stat: %v", err)
	}
	if st.Dev != was.Dev || st.Ino != was.Ino || st.Mode&unix.S_IFMT != was.Mode&unix.S_IFMT {
		unix.Close(fd)
		return -1, failf(CheckMismatch, "replaced while being opened (now a %s)", kindOf(st.Mode))
	}
	*was = st
	return fd, nil
}

// readFile copies a regular file of at most CheckMaxRead bytes to w; as
// text, a NUL byte in it fails it.
func readFile(dirfd int, name string, st *unix.Stat_t, text bool, w io.Writer) error {
	fd, err := reopen(dirfd, name, 0, st)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if st.Size > CheckMaxRead {
		return failf(CheckTooLarge, "%d bytes, over the %d a check reads", st.Size, CheckMaxRead)
	}
	buf := make([]byte, 0, min(st.Size+1, CheckMaxRead+1))
	for len(buf) <= CheckMaxRead {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 4096)
		}
		n, err := unix.Read(fd, buf[len(buf):min(cap(buf), CheckMaxRead+1)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return failf(CheckUnreadable, "read: %v", err)
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
	}
	if len(buf) > CheckMaxRead {
		return failf(CheckTooLarge, "over the %d bytes a check reads", CheckMaxRead)
	}
	if i := bytes.IndexByte(buf, 0); i >= 0 && text {
		return failf(CheckUnsafe, "a NUL byte at offset %d: not text a shell can hold", i)
	}
	_, err = w.Write(buf)
	return err
}

// listDir writes the names in a directory, sorted bytewise, one a line;
// more than limit entries, or a name holding a newline, fail it. Entries are
// read with getdents, never globbed.
func listDir(dirfd int, name string, st *unix.Stat_t, limit int, w io.Writer) error {
	fd, err := reopen(dirfd, name, unix.O_DIRECTORY, st)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	buf := make([]byte, 64<<10)
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return failf(CheckUnreadable, "getdents: %v", err)
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
		if len(names) > limit {
			return failf(CheckTooLarge, "more than %d entries", limit)
		}
	}
	for _, n := range names {
		if strings.IndexByte(n, '\n') >= 0 {
			return failf(CheckUnsafe, "the name %q holds a newline", n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if _, err := io.WriteString(w, n+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// verifierPrelude is the shell library runScore puts before every shell
// verifier: one function per op, on the guestd binary $SK_GUESTD names.
// Each check's status is guestd check's; a verifier scores any non-zero
// one as a failed check. A guestd the scoring uid cannot run fails the
// verifier (status 125: scorer_error), never a silent 0.
const verifierPrelude = `# The verifier library (docs/architecture.md, "Verifiers read the agent's files safely").
[ -x "$SK_GUESTD" ] || { echo "verifier library: guestd (SK_GUESTD=$SK_GUESTD) cannot be run" >&2; exit 125; }
sk_read() { "$SK_GUESTD" check read "$@"; }
sk_list() { "$SK_GUESTD" check list "$@"; }
sk_type() { "$SK_GUESTD" check type "$@"; }
sk_mode() { "$SK_GUESTD" check mode "$@"; }
sk_is_file() { "$SK_GUESTD" check file "$@"; }
sk_is_dir() { "$SK_GUESTD" check dir "$@"; }
sk_absent() { "$SK_GUESTD" check absent "$@"; }
sk_cells() { "$SK_GUESTD" check cells "$@"; }
sk_paras() { "$SK_GUESTD" check paras "$@"; }
sk_pdftext() { "$SK_GUESTD" check pdftext "$@"; }
sk_text_is() { _sk_text=$(sk_read "$1") && [ "$_sk_text" = "$2" ]; }
sk_mode_has() { _sk_mode=$(sk_mode "$1") && [ $((0$_sk_mode & $2)) -eq $(($2)) ]; }
`

// withVerifierPrelude is a shell verifier with the library before it.
func withVerifierPrelude(script string) []byte {
	return []byte(verifierPrelude + script)
}

// guestdPath is this binary's path, which the scoring uid runs as the
// verifier library (mounted where every sandbox uid may run it:
// /run/guestd for the process provider, /opt/shinken/guestd for docker).
var guestdPath = sync.OnceValue(func() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	return p
})

// sessionEnv are the desktop session's variables, which a verifier's
// environment never holds: it must not reach the X server, the session's
// buses or anything else the agent's clients may be holding.
var sessionEnv = []string{
	"DISPLAY", "XAUTHORITY", "WAYLAND_DISPLAY", "WINDOWID", "XMODIFIERS",
	"DBUS_SESSION_BUS_ADDRESS", "AT_SPI_BUS_ADDRESS", "GTK_MODULES", "SESSION_MANAGER",
	"DESKTOP_STARTUP_ID", "XDG_SESSION_ID", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS",
	"XDG_SEAT", "XDG_VTNR", "XDG_CURRENT_DESKTOP", "DESKTOP_SESSION",
}

// verifierEnv is env without the session's variables and with $SK_GUESTD.
func verifierEnv(env []string) []string {
	return setEnvVar(withoutKeys(env, sessionEnv...), "SK_GUESTD", guestdPath())
}
