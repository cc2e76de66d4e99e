// Package pooltest is the conformance suite every pool.Provider passes, in
// the spirit of containerd's snapshotter testsuite: a provider's test is a
// single call to ProviderSuite. It drives real sandboxes through their real
// guest (guest/client): nothing is faked.
package pooltest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/procstat"
	"github.com/shinken-rl/shinken/pool"
)

// Timeout bounds each step of the suite (boots included).
const Timeout = 60 * time.Second

// ProviderSuite runs the conformance tests. newProvider is called once per
// subtest and must return a fresh provider; the suite closes it (and
// newProvider may register its own t.Cleanup as a backstop).
//
// What a provider's Capabilities claim is what the suite proves: an op it
// claims must work, an op it does not claim must fail with
// pool.ErrUnsupported (when the provider implements the interface at all).
func ProviderSuite(t *testing.T, newProvider func(t *testing.T) pool.Provider) {
	tests := []struct {
		name string
		fn   func(t *testing.T, p pool.Provider)
	}{
		{"CreateReadyDestroy", testCreateReadyDestroy},
		{"AliveUnknown", testAliveUnknown},
		{"XDeathVisible", testXDeathVisible},
		{"Confinement", testConfinement},
		{"ConcurrentCreate", testConcurrentCreate},
		{"CloseEndsAll", testCloseEndsAll},
		{"Unsupported", testUnsupported},
		{"SnapshotRestore", testSnapshotRestore},
		{"ForkIsolated", testForkIsolated},
		{"ForkRelaunchesApps", testForkRelaunchesApps},
		{"ResetInPlace", testResetInPlace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := newProvider(t)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), Timeout)
				defer cancel()
				if err := p.Close(ctx); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, p)
		})
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	t.Cleanup(cancel)
	return ctx
}

// Create creates a sandbox that the test destroys on cleanup.
func Create(t *testing.T, p pool.Provider) *pool.Sandbox {
	t.Helper()
	sb, err := p.Create(ctxT(t), pool.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	own(t, p, sb)
	return sb
}

func own(t *testing.T, p pool.Provider, sb *pool.Sandbox) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		_ = p.Destroy(ctx, sb.ID)
	})
}

// Dial connects to a sandbox's guest; the test closes it on cleanup.
func Dial(t *testing.T, sb *pool.Sandbox) *client.Client {
	t.Helper()
	c, err := client.Dial(ctxT(t), sb.GuestNetwork, sb.GuestAddr)
	if err != nil {
		t.Fatalf("dial guest of %s: %v", sb.ID, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Sh runs a shell script in the sandbox and returns its stdout and exit
// code (-1 when killed).
func Sh(t *testing.T, c *client.Client, script string) (string, int) {
	t.Helper()
	r, err := c.Exec(ctxT(t), wire.ExecArgs{Shell: script, TimeoutMS: 20000})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	code := -1
	if r.ExitCode != nil {
		code = *r.ExitCode
	}
	return strings.TrimSpace(string(r.Stdout)), code
}

// MustSh is Sh that fails the test unless the script exits 0.
func MustSh(t *testing.T, c *client.Client, script string) string {
	t.Helper()
	out, code := Sh(t, c, script)
	if code != 0 {
		t.Fatalf("exec %q: exit %d; want 0 (stdout %q)", script, code, out)
	}
	return out
}

// Eventually polls cond every 20 ms until it holds or d passes.
func Eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// AwaitDead waits (bounded) for sb.Dead to close.
func AwaitDead(t *testing.T, sb *pool.Sandbox) {
	t.Helper()
	select {
	case <-sb.Dead:
	case <-time.After(Timeout):
		t.Fatalf("sandbox %s: Dead not closed within %v", sb.ID, Timeout)
	}
}

func testCreateReadyDestroy(t *testing.T, p pool.Provider) {
	ctx := ctxT(t)
	sb := Create(t, p)
	if sb.ID == "" || sb.GuestAddr == "" || sb.Dead == nil {
		t.Fatalf("sandbox = %+v; want ID, GuestAddr and Dead set", sb)
	}
	// Readiness is the provider's promise: no sleeping or retrying here.
	c := Dial(t, sb)
	h, err := c.Health(ctx)
	if err != nil {
		t.Fatalf("Health: %v", err)
	}
	if !h.X || !h.WM {
		t.Fatalf("Health right after Create = %+v; want x and wm up", h)
	}
	if got := MustSh(t, c, "echo hello"); got != "hello" {
		t.Fatalf("echo: got %q; want %q", got, "hello")
	}
	if err := p.Alive(ctx, sb.ID); err != nil {
		t.Fatalf("Alive(live) = %v; want nil", err)
	}
	if err := p.Destroy(ctx, sb.ID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	AwaitDead(t, sb)
	if err := p.Alive(ctx, sb.ID); !errors.Is(err, pool.ErrNotFound) && !errors.Is(err, pool.ErrSandboxDied) {
		t.Fatalf("Alive(destroyed) = %v; want ErrNotFound or ErrSandboxDied", err)
	}
	if err := p.Destroy(ctx, sb.ID); err != nil {
		t.Fatalf("second Destroy = %v; want nil (idempotent)", err)
	}
	select {
	case <-c.Done():
	case <-time.After(Timeout):
		t.Fatalf("guest connection still open after Destroy")
	}
}

func testAliveUnknown(t *testing.T, p pool.Provider) {
	err := p.Alive(ctxT(t), "no-such-sandbox")
	if !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("Alive(unknown) = %v; want ErrNotFound", err)
	}
	if err := p.Destroy(ctxT(t), "no-such-sandbox"); err != nil {
		t.Fatalf("Destroy(unknown) = %v; want nil", err)
	}
}

func testXDeathVisible(t *testing.T, p pool.Provider) {
	sb := Create(t, p)
	c := Dial(t, sb)
	// Kill the X server: the guest stays up and reports it. The agent
	// cannot (Xvfb is not its process), so a provider that isolates it
	// kills it from the host.
	if k, ok := p.(XKiller); ok {
		if err := k.KillX(ctxT(t), sb.ID); err != nil {
			t.Fatalf("KillX: %v", err)
		}
	} else {
		Sh(t, c, `kill -9 $(pidof Xvfb)`)
	}
	Eventually(t, 10*time.Second, "health x:false after Xvfb was killed", func() bool {
		h, err := c.Health(ctxT(t))
		return err == nil && !h.X
	})
}

// XKiller is implemented by providers whose sandboxes hide the X server from
// the agent: tests end it from the host.
type XKiller interface {
	KillX(ctx context.Context, id string) error
}

// sandboxDirs is implemented by providers whose sandboxes' files live in a
// host directory (the process provider).
type sandboxDirs interface {
	SandboxDir(id string) string
}

func testConfinement(t *testing.T, p pool.Provider) {
	if !p.Capabilities().Confined {
		SkipUnless(t, RequireNamespaces, fmt.Sprintf("provider %s is not confined (%s)", p.Capabilities().Provider, p.Capabilities().Notes))
	}
	a, b := Create(t, p), Create(t, p)
	ca, cb := Dial(t, a), Dial(t, b)
	if uid := MustSh(t, ca, "id -u"); uid == "0" {
		t.Errorf("desktop uid = 0; want an unprivileged user")
	}
	// The host's filesystem is read-only inside.
	for _, path := range []string{"/usr/shinken-probe", "/etc/shinken-probe", "/shinken-probe"} {
		if out, code := Sh(t, ca, "touch "+path+" 2>&1"); code == 0 {
			t.Errorf("touch %s succeeded (%q); want the host read-only", path, out)
			os.Remove(path)
		}
	}
	// Own dirs are writable.
	MustSh(t, ca, `echo secret > "$HOME/a.txt" && echo x > /tmp/a.txt`)
	// Loopback only.
	ifaces := MustSh(t, ca, `tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`)
	if ifaces != "lo" {
		t.Errorf("interfaces = %q; want only lo", ifaces)
	}
	// The other sandbox sees none of it: not at the host path of a's home
	// (where the provider can name it; the path is checked to hold the
	// file, so this can fail), nor anywhere writable dirs live.
	if sd, ok := p.(sandboxDirs); ok {
		host := filepath.Join(sd.SandboxDir(a.ID), "home", "a.txt")
		if b, err := os.ReadFile(host); err != nil || strings.TrimSpace(string(b)) != "secret" {
			t.Fatalf("host path of a's file %s: %q, %v; want it to hold a's secret", host, b, err)
		}
		if out, code := Sh(t, cb, "cat "+host+" 2>&1"); code == 0 {
			t.Errorf("sandbox b read a's file at its host path %s: %q", host, out)
		}
	}
	find := `find /tmp /var/tmp /home /run /root /srv /mnt /opt -name a.txt 2>/dev/null | xargs -r grep -l secret 2>/dev/null`
	if out := MustSh(t, ca, find+"; true"); out == "" {
		t.Fatalf("sandbox a cannot find its own file with %q; the cross-read check would prove nothing", find)
	}
	if out, _ := Sh(t, cb, find); out != "" {
		t.Errorf("sandbox b found a's secret file: %q", out)
	}
	if ua, ub := MustSh(t, ca, "id -u"), MustSh(t, cb, "id -u"); ua == ub && ua != "0" {
		t.Errorf("sandboxes a and b both run as uid %s; want their own", ua)
	}
	// Processes of other sandboxes are invisible (its own X server may be
	// hidden too: it is not the agent's).
	if n := MustSh(t, ca, "pidof Xvfb | wc -w"); n != "1" && n != "0" {
		t.Errorf("Xvfb processes visible = %s; want at most 1 (its own)", n)
	}
}

func testConcurrentCreate(t *testing.T, p pool.Provider) {
	const n = 3
	var wg sync.WaitGroup
	sbs := make([]*pool.Sandbox, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { sbs[i], errs[i] = p.Create(ctxT(t), pool.Spec{}) })
	}
	wg.Wait()
	ids := map[string]bool{}
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Create %d: %v", i, errs[i])
		}
		own(t, p, sbs[i])
		if ids[sbs[i].ID] {
			t.Fatalf("duplicate sandbox id %q", sbs[i].ID)
		}
		ids[sbs[i].ID] = true
		MustSh(t, Dial(t, sbs[i]), "true")
	}
}

func testCloseEndsAll(t *testing.T, p pool.Provider) {
	a, b := Create(t, p), Create(t, p)
	if err := p.Close(ctxT(t)); err != nil {
		t.Fatalf("Close: %v", err)
	}
	AwaitDead(t, a)
	AwaitDead(t, b)
	if _, err := p.Create(ctxT(t), pool.Spec{}); err == nil {
		t.Fatalf("Create after Close succeeded; want an error")
	}
}

func testUnsupported(t *testing.T, p pool.Provider) {
	caps := p.Capabilities()
	switch caps.SnapshotKind {
	case pool.SnapshotNone, pool.SnapshotDisk, pool.SnapshotMemory, pool.SnapshotProcess, pool.SnapshotProviderManaged:
	default:
		t.Fatalf("SnapshotKind = %q; want one of none|disk|memory|process|provider_managed", caps.SnapshotKind)
	}
	if (caps.SnapshotKind == pool.SnapshotNone) != !caps.Snapshot {
		t.Errorf("SnapshotKind %q with Snapshot=%v; want none exactly when Snapshot is false", caps.SnapshotKind, caps.Snapshot)
	}
	s, isSnap := p.(pool.Snapshotter)
	f, isFork := p.(pool.Forker)
	if caps.Snapshot && !isSnap || caps.Restore && !isSnap || caps.Fork && !isSnap {
		t.Fatalf("Capabilities claim snapshot/restore/fork but %T is no pool.Snapshotter", p)
	}
	if isSnap && !caps.Snapshot {
		sb := Create(t, p)
		if _, err := s.Snapshot(ctxT(t), sb.ID); !errors.Is(err, pool.ErrUnsupported) || aci.CodeOf(err) != aci.CodeUnsupported {
			t.Errorf("Snapshot on a provider not claiming it = %v; want ErrUnsupported with code unsupported", err)
		}
	}
	if isFork && !caps.Fork {
		if _, err := f.Fork(ctxT(t), "any", 1, pool.Spec{}); !errors.Is(err, pool.ErrUnsupported) {
			t.Errorf("Fork on a provider not claiming it = %v; want ErrUnsupported", err)
		}
	}
}

// seed creates a sandbox, writes marker files, snapshots it, then writes a
// file after the snapshot.
func seed(t *testing.T, p pool.Provider) (pool.Snapshotter, string) {
	t.Helper()
	s := p.(pool.Snapshotter)
	sb := Create(t, p)
	c := Dial(t, sb)
	MustSh(t, c, `echo before > "$HOME/before.txt" && mkdir -p "$HOME/d/e" && echo deep > "$HOME/d/e/f.txt"`)
	if err := c.PutFile(ctxT(t), wire.PutFileArgs{Path: "/tmp/put.txt", Data: []byte("put")}); err != nil {
		t.Fatalf("PutFile: %v", err)
	}
	snap, err := s.Snapshot(ctxT(t), sb.ID)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	t.Cleanup(func() { _ = s.DeleteSnapshot(context.Background(), snap) })
	MustSh(t, c, `echo after > "$HOME/after.txt"`)
	return s, snap
}

func checkSeeded(t *testing.T, c *client.Client) {
	t.Helper()
	if got := MustSh(t, c, `cat "$HOME/before.txt" "$HOME/d/e/f.txt" /tmp/put.txt`); got != "before\ndeep\nput" {
		t.Errorf("files written before the snapshot = %q; want %q", got, "before\ndeep\nput")
	}
	if out, code := Sh(t, c, `cat "$HOME/after.txt" 2>&1`); code == 0 {
		t.Errorf("file written after the snapshot is present (%q); want absent", out)
	}
}

func testSnapshotRestore(t *testing.T, p pool.Provider) {
	caps := p.Capabilities()
	if !caps.Snapshot || !caps.Restore {
		t.Skipf("provider %s does not claim snapshot+restore", caps.Provider)
	}
	s, snap := seed(t, p)
	if sz, ok := p.(pool.SnapshotSizer); ok {
		// The seeded files hold 15 bytes; a snapshot says it holds at least that.
		if n, err := sz.SnapshotBytes(ctxT(t), snap); err != nil || n < 15 {
			t.Errorf("SnapshotBytes = %d, %v; want at least the 15 bytes seeded", n, err)
		}
		if _, err := sz.SnapshotBytes(ctxT(t), "no-such-snapshot"); !errors.Is(err, pool.ErrNotFound) {
			t.Errorf("SnapshotBytes(unknown) = %v; want ErrNotFound", err)
		}
	}
	sb, err := s.Restore(ctxT(t), snap, pool.Spec{})
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	own(t, p, sb)
	c := Dial(t, sb)
	checkSeeded(t, c)
	if h, err := c.Health(ctxT(t)); err != nil || !h.X || !h.WM {
		t.Errorf("restored Health = %+v, %v; want x and wm up", h, err)
	}
	if err := s.DeleteSnapshot(ctxT(t), snap); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if err := s.DeleteSnapshot(ctxT(t), snap); err != nil {
		t.Fatalf("second DeleteSnapshot = %v; want nil", err)
	}
	if _, err := s.Restore(ctxT(t), snap, pool.Spec{}); !errors.Is(err, pool.ErrNotFound) {
		t.Fatalf("Restore(deleted) = %v; want ErrNotFound", err)
	}
}

// forkN forks n sandboxes through Forker when the provider has it, else
// through n Restores.
func forkN(t *testing.T, p pool.Provider, s pool.Snapshotter, snap string, n int) []*pool.Sandbox {
	t.Helper()
	var sbs []*pool.Sandbox
	if f, ok := p.(pool.Forker); ok {
		var err error
		sbs, err = f.Fork(ctxT(t), snap, n, pool.Spec{})
		if err != nil {
			t.Fatalf("Fork(%d): %v", n, err)
		}
	} else {
		for range n {
			sb, err := s.Restore(ctxT(t), snap, pool.Spec{})
			if err != nil {
				t.Fatalf("Restore: %v", err)
			}
			sbs = append(sbs, sb)
		}
	}
	if len(sbs) != n {
		t.Fatalf("Fork(%d) returned %d sandboxes", n, len(sbs))
	}
	for _, sb := range sbs {
		own(t, p, sb)
	}
	return sbs
}

func testForkIsolated(t *testing.T, p pool.Provider) {
	caps := p.Capabilities()
	if !caps.Fork {
		t.Skipf("provider %s does not claim fork", caps.Provider)
	}
	s, snap := seed(t, p)
	sbs := forkN(t, p, s, snap, 2)
	c0, c1 := Dial(t, sbs[0]), Dial(t, sbs[1])
	checkSeeded(t, c0)
	checkSeeded(t, c1)
	MustSh(t, c0, `echo mine > "$HOME/before.txt" && echo new > "$HOME/only0.txt"`)
	if got := MustSh(t, c1, `cat "$HOME/before.txt"`); got != "before" {
		t.Errorf("fork 1 sees fork 0's write: before.txt = %q; want %q", got, "before")
	}
	if out, code := Sh(t, c1, `cat "$HOME/only0.txt" 2>&1`); code == 0 {
		t.Errorf("fork 1 sees fork 0's new file (%q)", out)
	}
	if sbs[0].ID == sbs[1].ID {
		t.Errorf("forks share id %q", sbs[0].ID)
	}
}

func testForkRelaunchesApps(t *testing.T, p pool.Provider) {
	caps := p.Capabilities()
	if !caps.Fork && !caps.Restore {
		t.Skipf("provider %s does not claim fork or restore", caps.Provider)
	}
	if _, err := exec.LookPath("xterm"); err != nil && caps.Provider == "process" {
		t.Skip("xterm not installed")
	}
	s := p.(pool.Snapshotter)
	sb := Create(t, p)
	c := Dial(t, sb)
	if _, err := c.Act(ctxT(t), wire.ActArgs{Action: aci.Action{Verb: aci.LaunchApp, App: "xterm", Args: []string{"-title", "relaunched"}}}); err != nil {
		t.Fatalf("launch_app xterm: %v", err)
	}
	snap, err := s.Snapshot(ctxT(t), sb.ID)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	t.Cleanup(func() { _ = s.DeleteSnapshot(context.Background(), snap) })
	fc := Dial(t, forkN(t, p, s, snap, 1)[0])
	Eventually(t, 20*time.Second, "xterm relaunched in the fork", func() bool {
		ws, err := fc.ListWindows(ctxT(t))
		if err != nil {
			return false
		}
		for _, w := range ws.Windows {
			if strings.Contains(strings.ToLower(w.Class+" "+w.Title), "xterm") || w.Title == "relaunched" {
				return true
			}
		}
		return false
	})
}

// BuildGuestd builds ./cmd/guestd of the enclosing module into dir and
// returns the binary's path. Use it from TestMain. SHINKEN_GUESTD, when
// set, names a prebuilt binary instead.
func BuildGuestd(dir string) (string, error) {
	if p := os.Getenv("SHINKEN_GUESTD"); p != "" {
		return p, nil
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(dir, "guestd")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/guestd")
	// Static, so the same binary serves process sandboxes and containers.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build guestd: %w: %s", err, out)
	}
	return bin, nil
}

// NSProcs lists the processes in pid namespace ns as pid → start time.
// Namespace ids are recycled, so Survivors compares start times too.
func NSProcs(ns string) map[int]string {
	procs := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if l, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns/pid")); err == nil && l == ns {
			procs[pid] = procStart(pid)
		}
	}
	return procs
}

// procStart is the process's start time ("" if gone).
func procStart(pid int) string {
	st, err := procstat.Read(pid)
	if err != nil {
		return ""
	}
	return strconv.FormatUint(st.Start, 10)
}

// Survivors returns the processes of procs still running.
func Survivors(procs map[int]string) []int {
	var left []int
	for pid, st := range procs {
		if procStart(pid) == st {
			left = append(left, pid)
		}
	}
	return left
}

// Environment variables with which a CI run says what the host must
// provide; `make test` sets them where it finds the engine or root.
const (
	RequireDocker     = "SHINKEN_REQUIRE_DOCKER"
	RequireNamespaces = "SHINKEN_REQUIRE_NAMESPACES"
)

// SkipUnless skips t for why, or fails it when the environment variable
// require is "1" (the run said this must be there).
func SkipUnless(t testing.TB, require, why string) {
	t.Helper()
	if os.Getenv(require) == "1" {
		t.Fatalf("%s (required: %s=1)", why, require)
	}
	t.Skip(why)
}
