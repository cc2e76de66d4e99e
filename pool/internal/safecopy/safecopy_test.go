package safecopy

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

// hostSecret is a file outside the copied tree that only root may read,
// standing for any host file a sandbox must never get.
func hostSecret(t *testing.T) (dir, file string, secret []byte) {
	t.Helper()
	dir = t.TempDir()
	secret = []byte("host-secret-7d1c0f")
	file = filepath.Join(dir, "secret")
	if err := os.WriteFile(file, secret, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file, secret
}

// assertNoSecret walks tree without following links and fails if any
// regular file holds secret.
func assertNoSecret(t *testing.T, tree string, secret []byte) {
	t.Helper()
	err := filepath.WalkDir(tree, func(path string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, secret) {
			t.Errorf("%s holds the host's secret", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCopyTreeNeverFollowsLinks: links to a host file and a host directory
// are copied as links, never opened; the source tree's root may not itself
// be a link, nor be reached through one.
func TestCopyTreeNeverFollowsLinks(t *testing.T) {
	hostDir, hostFile, secret := hostSecret(t)
	src := filepath.Join(t.TempDir(), "home")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"leak": hostFile, "sub/dirleak": hostDir, "rel": "../../../../../../" + hostFile} {
		if err := os.Symlink(target, filepath.Join(src, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "own"), []byte("mine"), 0o640); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "copy")
	c := &Copy{Ctx: context.Background(), UID: -1, GID: -1, Max: 1 << 20}
	if err := c.Tree(filepath.Dir(src), filepath.Base(src), dst); err != nil {
		t.Fatal(err)
	}
	assertNoSecret(t, dst, secret)
	if got, err := os.Readlink(filepath.Join(dst, "sub", "dirleak")); err != nil || got != hostDir {
		t.Errorf("dirleak: got %q %v; want a link to %s", got, err, hostDir)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "sub", "own")); err != nil || string(b) != "mine" {
		t.Errorf("own file: got %q %v", b, err)
	}
	if st, err := os.Stat(filepath.Join(dst, "sub", "own")); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("own file mode: %v %v; want 0640", st.Mode(), err)
	}

	link := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(hostDir, link); err != nil {
		t.Fatal(err)
	}
	c = &Copy{Ctx: context.Background(), UID: -1, GID: -1}
	if err := c.Tree(filepath.Dir(link), filepath.Base(link), filepath.Join(t.TempDir(), "copy")); !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("copying a tree whose root is a link: got %v; want ELOOP", err)
	}
	if err := c.Tree(filepath.Dir(link), "home/sub", filepath.Join(t.TempDir(), "copy")); !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.EXDEV) {
		t.Errorf("copying a tree reached through a link: got %v; want ELOOP", err)
	}
	if err := c.Tree(src, "../../", filepath.Join(t.TempDir(), "copy")); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("copying a tree above its base: got %v; want EXDEV", err)
	}
}

// TestCopyTreeKeepsHoles: a 100 GB sparse file with a few bytes of data
// copies its data only: the copy has the same length and bytes, and
// allocates about what the source does.
func TestCopyTreeKeepsHoles(t *testing.T) {
	src := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	const size = 100 << 30
	f, err := os.Create(filepath.Join(src, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Skipf("this filesystem cannot hold a %d-byte sparse file: %v", int64(size), err)
	}
	for _, off := range []int64{0, size / 2, size - 4} {
		if _, err := f.WriteAt([]byte("data"), off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	dst := filepath.Join(t.TempDir(), "copy")
	c := &Copy{Ctx: context.Background(), UID: -1, GID: -1, Max: 64 << 20}
	if err := c.Tree(filepath.Dir(src), filepath.Base(src), dst); err != nil {
		t.Fatalf("copying a sparse file: %v", err)
	}
	if c.Copied() > 32<<20 {
		t.Errorf("counted %d bytes; want the data extents only", c.Copied())
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dst, "sparse"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != size || st.Blocks*512 > 64<<20 {
		t.Errorf("copy: size %d, %d bytes allocated; want %d, holes kept", st.Size, st.Blocks*512, int64(size))
	}
	g, err := os.Open(filepath.Join(dst, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	buf := make([]byte, 4)
	for _, off := range []int64{0, size / 2, size - 4} {
		if _, err := g.ReadAt(buf, off); err != nil || string(buf) != "data" {
			t.Errorf("copy at %d: %q %v; want \"data\"", off, buf, err)
		}
	}
}

// TestCopyTreeCapped: a tree holding more data than the cap fails with a
// typed too_large error; a cancelled context stops inside a large file.
func TestCopyTreeCapped(t *testing.T) {
	src := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "big"), bytes.Repeat([]byte{1}, 12<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &Copy{Ctx: context.Background(), UID: -1, GID: -1, Max: 8 << 20}
	err := c.Tree(filepath.Dir(src), filepath.Base(src), filepath.Join(t.TempDir(), "copy"))
	if !errors.Is(err, ErrTooLarge) || aci.CodeOf(err) != aci.CodeTooLarge {
		t.Fatalf("copying 12 MiB under an 8 MiB cap: got %v; want too_large", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c = &Copy{Ctx: ctx, UID: -1, GID: -1}
	in, err := os.Open(filepath.Join(src, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if err := c.file(int(in.Fd()), int(out.Fd()), 12<<20); !errors.Is(err, context.Canceled) {
		t.Errorf("copying a large file under a cancelled context: got %v; want context.Canceled", err)
	}
}

// TestCopyTreeUnderSwaps: while the tree is copied over and over, another
// goroutine keeps replacing a directory (holding a file) with a link to a
// root-only host directory and a file with a link to the host file, as an
// agent would during /v1/fork when nothing freezes it. No copy ever holds
// the host's bytes.
func TestCopyTreeUnderSwaps(t *testing.T) {
	hostDir, hostFile, secret := hostSecret(t)
	src := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		d, f := filepath.Join(src, "swap"), filepath.Join(src, "f")
		for {
			select {
			case <-stop:
				return
			default:
			}
			os.RemoveAll(d)
			os.Mkdir(d, 0o755)
			os.WriteFile(filepath.Join(d, "x"), []byte("decoy"), 0o644)
			os.Remove(f)
			os.WriteFile(f, []byte("decoy"), 0o644)
			os.RemoveAll(d)
			os.Symlink(hostDir, d)
			os.Remove(f)
			os.Symlink(hostFile, f)
		}
	}()
	defer func() { close(stop); <-done }()
	out := t.TempDir()
	for i := range 300 {
		dst := filepath.Join(out, strconv.Itoa(i))
		c := &Copy{Ctx: context.Background(), UID: -1, GID: -1, Max: 1 << 20}
		if err := c.Tree(filepath.Dir(src), "home", dst); err != nil {
			t.Fatalf("copy %d: %v", i, err)
		}
	}
	assertNoSecret(t, out, secret)
}

// TestCopyInto: a snapshot copied into a live directory merges into the
// directories already there, replaces a file the session rewrote, leaves
// out what Skip names by path (and keeps dst's own copy of it), and never
// writes through a link planted where the snapshot has a directory.
func TestCopyInto(t *testing.T) {
	hostDir, _, _ := hostSecret(t)
	src, dst := t.TempDir(), t.TempDir()
	write := func(root, rel, data string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(b)
	}
	write(src, "cfg/a", "snap-a")
	write(src, "cfg/kept.log", "snap-log")
	write(src, "file", "snap-file")
	write(src, ".X0-lock", "x")
	write(dst, "cfg/kept.log", "live-log") // the session's own: kept
	write(dst, "file", "live-file")        // rewritten since the emptying
	c := &Copy{Ctx: context.Background(), UID: -1, GID: -1, Skip: func(rel string, isDir bool) bool {
		return rel == "cfg/kept.log" || SkipX(rel, isDir)
	}}
	if err := c.Into(src, dst); err != nil {
		t.Fatal(err)
	}
	for rel, want := range map[string]string{"cfg/a": "snap-a", "cfg/kept.log": "live-log", "file": "snap-file"} {
		if got := read(rel); got != want {
			t.Errorf("%s: %q; want %q", rel, got, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, ".X0-lock")); err == nil {
		t.Error("an X lock was copied")
	}

	// A link where the snapshot has a directory: refused, nothing written
	// in the link's target.
	dst2 := t.TempDir()
	if err := os.Symlink(hostDir, filepath.Join(dst2, "cfg")); err != nil {
		t.Fatal(err)
	}
	if err := (&Copy{Ctx: context.Background(), UID: -1, GID: -1}).Into(src, dst2); err == nil {
		t.Error("copied into a directory through a link")
	}
	if _, err := os.Stat(filepath.Join(hostDir, "a")); err == nil {
		t.Error("the copy wrote through a link into the host's directory")
	}
}
