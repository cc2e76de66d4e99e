package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The verifier library's check mode against hostile files, real ones on a
// real filesystem, run as a process the way a verifier runs it
// (docs/architecture.md, "Verifiers read the agent's files safely").

// checkHelperEnv makes the test binary run as `guestd check ...`.
const checkHelperEnv = "SHINKEN_TEST_CHECK_HELPER"

// TestCheckHelperProcess is the check mode's process when checkHelperEnv
// is set (the arguments after "--" are guestd's); otherwise it skips.
func TestCheckHelperProcess(t *testing.T) {
	if os.Getenv(checkHelperEnv) != "1" {
		t.Skip("the check mode's helper process; runs only when exec'd by the tests below")
	}
	args := os.Args
	if i := slices.Index(args, "--"); i >= 0 {
		args = args[i+1:]
	}
	if len(args) == 0 || args[0] != "check" {
		os.Exit(CheckUsage)
	}
	os.Exit(CheckMain(args[1:]))
}

// otherUID is a uid that owns nothing here, for the checks that depend on
// who reads.
const otherUID = 65534

// checkEnv is a directory every uid may traverse (the agent's home, the
// library's binary) and the binary: a wrapper that runs this test binary
// as `guestd`, so that `$bin check OP PATH` is the check mode's command line.
type checkEnv struct {
	root, home, bin string
}

func newCheckEnv(t *testing.T) *checkEnv {
	t.Helper()
	root, err := os.MkdirTemp("", "verifylib-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(root, "guest.test")
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "guestd")
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=1 exec %s -test.run='^TestCheckHelperProcess$' -- \"$@\"\n", checkHelperEnv, exe)
	if err := os.WriteFile(bin, []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	// The home is on tmpfs where there is one: 9,000 files on a busy
	// disk take seconds to create.
	home := filepath.Join(root, "home")
	if d, err := os.MkdirTemp("/dev/shm", "verifylib-home-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(d) })
		home = filepath.Join(d, "home")
	}
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Dir(home), 0o755); err != nil {
		t.Fatal(err)
	}
	return &checkEnv{root: root, home: home, bin: bin}
}

// checkRun is one run of the check mode.
type checkRun struct {
	stdout, stderr string
	status         int
	took           time.Duration
}

// run runs `guestd check args...` with $AGENT_HOME the home, as uid when
// uid >= 0. A run that does not end in 10 s is killed and fails the test:
// a check must never hang.
func (e *checkEnv) run(t *testing.T, uid int, args ...string) checkRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, append([]string{"check"}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "AGENT_HOME=" + e.home}
	cmd.Dir = e.root
	killGroupOnCancel(cmd)
	if uid >= 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	t0 := time.Now()
	err := cmd.Run()
	r := checkRun{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(t0)}
	if ctx.Err() != nil {
		t.Fatalf("check %q hung: killed after %v", args, r.took)
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		r.status = ee.ExitCode()
	default:
		t.Fatalf("check %q: %v (%s)", args, err, r.stderr)
	}
	return r
}

// killGroupOnCancel puts cmd in a process group of its own, which its
// context's end kills whole (a check a verifier's shell started with it),
// and bounds the wait for its output after.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return unix.Kill(-cmd.Process.Pid, unix.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the checks run as another uid")
	}
}

func writeFile(t *testing.T, path string, data []byte, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestCheckHostileFiles plays each file an agent can plant against the op
// a verifier would use on it: each fails at once with the status of its
// kind, and an honest file passes.
func TestCheckHostileFiles(t *testing.T) {
	needRoot(t)
	e := newCheckEnv(t)
	h := e.home
	writeFile(t, h+"/hello.txt", []byte("hello shinken\n"), 0o644)
	writeFile(t, h+"/run.sh", []byte("#!/bin/sh\n"), 0o744)
	writeFile(t, h+"/secret.txt", []byte("mine\n"), 0o600)
	writeFile(t, h+"/nul.txt", []byte("hello\x00shinken"), 0o644)
	exact := bytes.Repeat([]byte("x"), CheckMaxRead)
	writeFile(t, h+"/exact.txt", exact, 0o644)
	writeFile(t, h+"/big.txt", append(exact, 'x'), 0o644)
	if err := unix.Mkfifo(h+"/fifo.txt", 0o666); err != nil {
		t.Fatal(err)
	}
	for _, l := range [][2]string{{"/dev/zero", "zero.txt"}, {"hello.txt", "link.txt"}, {"nowhere", "dangling.txt"}, {h + "/real", "sub"}} {
		if err := os.Symlink(l[0], filepath.Join(h, l[1])); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"dir.txt", "real"} {
		if err := os.Mkdir(filepath.Join(h, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, h+"/real/hello.txt", []byte("hello shinken\n"), 0o644)

	for _, c := range []struct {
		args   []string
		uid    int
		status int
		stdout string
	}{
		{[]string{"read", h + "/hello.txt"}, otherUID, CheckOK, "hello shinken\n"},
		{[]string{"read", h + "/fifo.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"read", h + "/zero.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"read", h + "/link.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"read", h + "/dir.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"read", h + "/missing.txt"}, otherUID, CheckMissing, ""},
		{[]string{"read", h + "/nowhere/hello.txt"}, otherUID, CheckMissing, ""},
		{[]string{"read", h + "/sub/hello.txt"}, otherUID, CheckMismatch, ""}, // a link in the path
		{[]string{"read", h + "/hello.txt/x"}, otherUID, CheckMismatch, ""},   // a file in the path
		{[]string{"read", h + "/real/../sub/hello.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"read", h + "/secret.txt"}, otherUID, CheckUnreadable, ""},
		{[]string{"read", h + "/big.txt"}, otherUID, CheckTooLarge, ""},
		{[]string{"read", h + "/nul.txt"}, otherUID, CheckUnsafe, ""},
		{[]string{"bytes", h + "/nul.txt"}, otherUID, CheckOK, "hello\x00shinken"}, // binary: bytes reads it
		{[]string{"bytes", h + "/fifo.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"bytes", h + "/link.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"bytes", h + "/sub/hello.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"bytes", h + "/big.txt"}, otherUID, CheckTooLarge, ""},
		{[]string{"list", h + "/fifo.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"list", h + "/sub"}, otherUID, CheckMismatch, ""},
		{[]string{"list", h + "/sub/"}, otherUID, CheckMismatch, ""},
		{[]string{"list", h + "/hello.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"list", h + "/real"}, otherUID, CheckOK, "hello.txt\n"},
		{[]string{"type", h + "/fifo.txt"}, otherUID, CheckOK, "fifo\n"},
		{[]string{"type", h + "/zero.txt"}, otherUID, CheckOK, "symlink\n"},
		{[]string{"type", h + "/dir.txt"}, otherUID, CheckOK, "dir\n"},
		{[]string{"type", h + "/hello.txt"}, otherUID, CheckOK, "file\n"},
		{[]string{"type", "/dev/null"}, otherUID, CheckOK, "char\n"},
		{[]string{"type", h + "/missing.txt"}, otherUID, CheckMissing, ""},
		{[]string{"mode", h + "/run.sh"}, otherUID, CheckOK, "0744\n"},
		{[]string{"mode", h + "/secret.txt"}, otherUID, CheckOK, "0600\n"}, // no read needed
		{[]string{"mode", h + "/dir.txt"}, otherUID, CheckOK, "0755\n"},
		{[]string{"mode", h + "/fifo.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"mode", h + "/link.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"file", h + "/hello.txt"}, otherUID, CheckOK, ""},
		{[]string{"file", h + "/dir.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"file", h + "/link.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"file", h + "/missing.txt"}, otherUID, CheckMissing, ""},
		{[]string{"dir", h + "/dir.txt"}, otherUID, CheckOK, ""},
		{[]string{"dir", h + "/sub"}, otherUID, CheckMismatch, ""},
		{[]string{"dir", h}, otherUID, CheckOK, ""},
		{[]string{"absent", h + "/missing.txt"}, otherUID, CheckOK, ""},
		{[]string{"absent", h + "/nowhere/x"}, otherUID, CheckOK, ""},
		{[]string{"absent", h + "/dangling.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"absent", h + "/fifo.txt"}, otherUID, CheckMismatch, ""},
		{[]string{"read", "hello.txt"}, otherUID, CheckUsage, ""},
		{[]string{"cat", h + "/hello.txt"}, otherUID, CheckUsage, ""},
		{[]string{"read"}, otherUID, CheckUsage, ""},
		{[]string{"read", h + "/hello.txt", h + "/run.sh"}, otherUID, CheckUsage, ""},
	} {
		r := e.run(t, c.uid, c.args...)
		if r.status != c.status || r.stdout != c.stdout {
			t.Errorf("check %q as uid %d: status %d stdout %q (stderr %q); want %d %q",
				c.args, c.uid, r.status, r.stdout, r.stderr, c.status, c.stdout)
		}
		if c.status != CheckOK && !strings.Contains(r.stderr, "guestd check") && !strings.Contains(r.stderr, "usage") {
			t.Errorf("check %q: status %d with stderr %q; want the reason said", c.args, r.status, r.stderr)
		}
	}
	// A file of exactly the cap is read whole.
	if r := e.run(t, otherUID, "read", h+"/exact.txt"); r.status != CheckOK || r.stdout != string(exact) {
		t.Errorf("read of %d bytes: status %d, %d bytes out; want all of it", len(exact), r.status, len(r.stdout))
	}
	// A FIFO fails as fast as a plain file is read: its open never waits
	// for a writer (the bound is loose; a blocked open would be killed at
	// 10 s).
	if r := e.run(t, otherUID, "read", h+"/fifo.txt"); r.took > 3*time.Second {
		t.Errorf("read of a FIFO took %v", r.took)
	}
}

// TestCheckList: a directory of 9,000 names of 250 characters (past what a
// glob can pass in argv: 2.4 MB of paths against 2 MiB) lists whole and
// sorted; a directory the reader may
// not list (0311), a name with a newline and one entry past the bound fail.
func TestCheckList(t *testing.T) {
	needRoot(t)
	e := newCheckEnv(t)
	junk := filepath.Join(e.home, "junk")
	if err := os.Mkdir(junk, 0o755); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 9000 {
		n := fmt.Sprintf("%0246d.tmp", i)
		want = append(want, n)
		writeFile(t, filepath.Join(junk, n), nil, 0o644)
	}
	for _, n := range []string{"a.tmp", "keep.txt", "-n", "é"} {
		want = append(want, n)
		writeFile(t, filepath.Join(junk, n), nil, 0o644)
	}
	slices.Sort(want)
	r := e.run(t, otherUID, "list", junk)
	if got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); r.status != CheckOK || !slices.Equal(got, want) {
		t.Fatalf("list of %d names: status %d (%s), %d names; want all, sorted", len(want), r.status, r.stderr, len(got))
	}

	if err := os.Chmod(junk, 0o311); err != nil {
		t.Fatal(err)
	}
	if r := e.run(t, otherUID, "list", junk); r.status != CheckUnreadable || r.stdout != "" {
		t.Errorf("list of a 0311 directory by another uid: status %d stdout %d bytes; want %d, nothing", r.status, len(r.stdout), CheckUnreadable)
	}
	// Its files are still there to be found by name: the check on them
	// works, the listing does not.
	if r := e.run(t, otherUID, "file", filepath.Join(junk, "a.tmp")); r.status != CheckOK {
		t.Errorf("file in a 0311 directory: status %d (%s); want found", r.status, r.stderr)
	}

	odd := filepath.Join(e.home, "odd")
	if err := os.Mkdir(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(odd, "keep.txt"), nil, 0o644)
	writeFile(t, filepath.Join(odd, "a.tmp\nkeep.txt"), nil, 0o644)
	if r := e.run(t, otherUID, "list", odd); r.status != CheckUnsafe || r.stdout != "" {
		t.Errorf("list with a newline in a name: status %d stdout %q; want %d, nothing", r.status, r.stdout, CheckUnsafe)
	}
}

// TestCheckListBound: one entry past the bound fails the listing (the
// bound is listDir's parameter here, CheckMaxEntries in guestd check).
func TestCheckListBound(t *testing.T) {
	dir := t.TempDir()
	for i := range 101 {
		writeFile(t, filepath.Join(dir, fmt.Sprint(i)), nil, 0o644)
	}
	for _, c := range []struct{ max, status int }{{101, CheckOK}, {100, CheckTooLarge}} {
		var out bytes.Buffer
		err := func() error {
			dirfd, name, err := walkParent(dir, filepath.Dir(dir))
			if err != nil {
				return err
			}
			defer unix.Close(dirfd)
			var st unix.Stat_t
			if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
			return listDir(dirfd, name, &st, c.max, &out)
		}()
		got := CheckOK
		if err != nil {
			got = statusOf(err)
		}
		if got != c.status {
			t.Errorf("101 entries, bound %d: %v; want status %d", c.max, err, c.status)
		}
		if c.status == CheckOK && strings.Count(out.String(), "\n") != 101 {
			t.Errorf("101 entries, bound %d: %d lines", c.max, strings.Count(out.String(), "\n"))
		}
	}
}

// TestVerifierPrelude runs shell verifiers with the library before them,
// as another uid, against hostile files: each reads as a failed check
// (status non-zero) at once, honest files pass, and a guestd the verifier
// cannot run fails the whole verifier (125), never a silent 0.
func TestVerifierPrelude(t *testing.T) {
	needRoot(t)
	e := newCheckEnv(t)
	h := e.home
	writeFile(t, h+"/hello.txt", []byte("hello shinken\n"), 0o644)
	writeFile(t, h+"/run.sh", []byte("#!/bin/sh\n"), 0o744)
	writeFile(t, h+"/plain.sh", []byte("#!/bin/sh\n"), 0o644)
	if err := unix.Mkfifo(h+"/fifo.txt", 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", h+"/zero.txt"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(h+"/dir.sh", 0o755); err != nil {
		t.Fatal(err)
	}
	script := `H="$AGENT_HOME"
for c in 'sk_text_is "$H/hello.txt" "hello shinken"' 'sk_text_is "$H/hello.txt" hello' \
	'sk_text_is "$H/fifo.txt" ""' 'sk_text_is "$H/zero.txt" ""' 'sk_read "$H/fifo.txt"' \
	'sk_mode_has "$H/run.sh" 0100' 'sk_mode_has "$H/plain.sh" 0100' 'sk_mode_has "$H/run.sh" 0744' \
	'sk_is_file "$H/hello.txt"' 'sk_is_file "$H/dir.sh"' 'sk_is_dir "$H/dir.sh"' \
	'sk_absent "$H/nope"' 'sk_absent "$H/zero.txt"' '[ "$(sk_type "$H/fifo.txt")" = fifo ]' \
	'[ "$(sk_mode "$H/run.sh")" = 0744 ]' 'sk_list "$H" > names && grep -qxF dir.sh names'; do
	eval "$c" >/dev/null 2>&1; echo "$?"
done
`
	// Wanted statuses, in the loop's order.
	want := []int{0, 1, CheckMismatch, CheckMismatch, CheckMismatch, 0, 1, 0, 0, CheckMismatch, 0, 0, CheckMismatch, 0, 0, 0}
	run := func(guestd string) (string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		work, err := os.MkdirTemp(e.root, "work-")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(work, otherUID, otherUID); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, "/bin/sh", "-s")
		base := []string{"PATH=/usr/bin:/bin", "AGENT_HOME=" + h, "HOME=" + work, "DISPLAY=:7"}
		cmd.Env = setEnvVar(verifierEnv(base), "SK_GUESTD", guestd)
		cmd.Dir = work
		cmd.Stdin = bytes.NewReader(withVerifierPrelude(script))
		killGroupOnCancel(cmd)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: otherUID, Gid: otherUID}
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		err = cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("verifier hung")
		}
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatalf("verifier: %v", err)
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}
	out, status := run(e.bin)
	var got []int
	for _, l := range strings.Fields(out) {
		var n int
		fmt.Sscan(l, &n)
		got = append(got, n)
	}
	if status != 0 || !slices.Equal(got, want) {
		t.Errorf("verifier statuses %v (exit %d); want %v", got, status, want)
	}

	// The library's binary where the scoring uid cannot run it.
	hidden := filepath.Join(e.root, "hidden")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(e.bin, filepath.Join(hidden, "guestd")); err != nil {
		t.Fatal(err)
	}
	if out, status := run(filepath.Join(hidden, "guestd")); status != 125 || out != "" {
		t.Errorf("verifier with a guestd it cannot run: exit %d stdout %q; want 125 and no reward", status, out)
	}
}

// TestVerifierEnv: the verifier's environment keeps the rest but holds no
// session variable (no X server, no bus), and names guestd's binary.
func TestVerifierEnv(t *testing.T) {
	in := []string{"PATH=/usr/bin:/bin", "DISPLAY=:3", "XAUTHORITY=/x", "DBUS_SESSION_BUS_ADDRESS=unix:path=/b",
		"AT_SPI_BUS_ADDRESS=unix:path=/b", "GTK_MODULES=gail:atk-bridge", "WAYLAND_DISPLAY=w", "AGENT_HOME=/home/agent",
		"DISPLAYX=kept", "SK_GUESTD=/elsewhere"}
	self, _ := os.Executable()
	want := []string{"PATH=/usr/bin:/bin", "AGENT_HOME=/home/agent", "DISPLAYX=kept", "SK_GUESTD=" + self}
	if got := verifierEnv(in); !slices.Equal(got, want) {
		t.Errorf("verifierEnv = %q; want %q", got, want)
	}
}
