package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/procstat"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/pooltest"
)

// guestdPath is built once by TestMain; "" with skipReason set when the
// tests cannot run here.
var guestdPath, skipReason string

func TestMain(m *testing.M) {
	MaybeRunInit()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if _, err := exec.LookPath("Xvfb"); err != nil {
		skipReason = "Xvfb not on PATH (apt-get install xvfb)"
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "process-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	guestdPath, err = pooltest.BuildGuestd(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func needX(t testing.TB) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

func newTestProvider(t testing.TB, opts Options) *Provider {
	t.Helper()
	needX(t)
	if opts.Root == "" {
		opts.Root = t.TempDir()
	}
	opts.GuestdPath = guestdPath
	opts.Logf = t.Logf
	p, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

func TestProviderSuite(t *testing.T) {
	pooltest.ProviderSuite(t, func(t *testing.T) pool.Provider { return newTestProvider(t, Options{}) })
}

func TestGuestdKilledNoLeak(t *testing.T) {
	p := newTestProvider(t, Options{})
	ctx := context.Background()
	sb := pooltest.Create(t, p)
	ns := p.PIDNamespace(sb.ID)
	if ns == "" {
		t.Fatalf("PIDNamespace empty for a confined sandbox")
	}
	procs := pooltest.NSProcs(ns)
	if n := len(procs); n < 3 {
		t.Fatalf("processes in the sandbox = %d; want at least guestd, Xvfb, WM", n)
	}
	if err := syscall.Kill(p.InitPID(sb.ID), syscall.SIGKILL); err != nil {
		t.Fatalf("kill guestd: %v", err)
	}
	pooltest.AwaitDead(t, sb)
	err := p.Alive(ctx, sb.ID)
	if !errors.Is(err, pool.ErrSandboxDied) || aci.CodeOf(err) != aci.CodeSandboxDied {
		t.Fatalf("Alive after guestd died = %v; want ErrSandboxDied with code sandbox_died", err)
	}
	dir := filepath.Dir(sb.GuestAddr)
	if err := p.Destroy(ctx, sb.ID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if left := pooltest.Survivors(procs); len(left) > 0 {
		t.Fatalf("processes left in the dead sandbox's namespace: %v", left)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("sandbox dir after Destroy: stat err = %v; want not exist", err)
	}
	if len(p.displays.held) != 0 {
		t.Fatalf("displays held after Destroy = %d; want 0", len(p.displays.held))
	}
}

func TestDisplaysNotSharedAcrossProviders(t *testing.T) {
	root := t.TempDir()
	a := newTestProvider(t, Options{Root: root})
	b := newTestProvider(t, Options{Root: root})
	sa, sb := pooltest.Create(t, a), pooltest.Create(t, b)
	if sa.Display == sb.Display {
		t.Fatalf("two providers on one root both got display %d", sa.Display)
	}
}

func TestSweepReapsOrphans(t *testing.T) {
	needX(t)
	root := t.TempDir()
	// A run whose owner is gone: its lock is free, a process is recorded.
	orphan := exec.Command("sleep", "300")
	orphan.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- orphan.Wait() }()
	t.Cleanup(func() { _ = orphan.Process.Kill() })
	sbDir := filepath.Join(root, "runs", "dead", "sandboxes", "x")
	if err := os.MkdirAll(sbDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writePidFile(filepath.Join(sbDir, "pid"), orphan.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "runs", "dead.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A live run of another provider must be left alone.
	live := newTestProvider(t, Options{Root: root})
	liveSb := pooltest.Create(t, live)

	newTestProvider(t, Options{Root: root})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("orphan %d still running after the start-up sweep", orphan.Process.Pid)
	}
	if _, err := os.Stat(filepath.Join(root, "runs", "dead")); !os.IsNotExist(err) {
		t.Errorf("orphaned run dir: stat err = %v; want not exist", err)
	}
	if err := live.Alive(context.Background(), liveSb.ID); err != nil {
		t.Errorf("live provider's sandbox after another's sweep: Alive = %v; want nil", err)
	}
}

func TestCleanStaleX(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".X11-unix"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A pid that cannot be alive.
	os.WriteFile(filepath.Join(dir, ".X7-lock"), []byte("  4194304\n"), 0o644)
	os.WriteFile(filepath.Join(dir, ".X11-unix", "X7"), nil, 0o644)
	if !cleanStaleX(dir, 7) {
		t.Fatalf("cleanStaleX with a dead owner = false; want true")
	}
	for _, f := range []string{".X7-lock", ".X11-unix/X7"} {
		if _, err := os.Stat(filepath.Join(dir, f)); !os.IsNotExist(err) {
			t.Errorf("%s after cleanStaleX: stat err = %v; want not exist", f, err)
		}
	}
	// A live owner keeps its display.
	os.WriteFile(filepath.Join(dir, ".X8-lock"), fmt.Appendf(nil, "%10d\n", os.Getpid()), 0o644)
	if cleanStaleX(dir, 8) {
		t.Errorf("cleanStaleX with a live owner = true; want false")
	}
}

func TestUnconfinedRefusedUnlessAllowed(t *testing.T) {
	needX(t)
	_, err := New(context.Background(), Options{Root: t.TempDir(), GuestdPath: guestdPath, noNamespaces: true})
	if err == nil || aci.CodeOf(err) != aci.CodeUnsupported || !strings.Contains(err.Error(), "AllowUnconfined") {
		t.Fatalf("New without namespaces = %v; want an unsupported error naming AllowUnconfined", err)
	}
	p := newTestProvider(t, Options{noNamespaces: true, AllowUnconfined: true})
	caps := p.Capabilities()
	if caps.Confined || !strings.Contains(caps.Notes, "UNCONFINED") {
		t.Fatalf("Capabilities = %+v; want Confined=false and a note saying UNCONFINED", caps)
	}
	sb := pooltest.Create(t, p)
	c := pooltest.Dial(t, sb)
	pooltest.MustSh(t, c, "true")
	pgid := p.InitPID(sb.ID)
	if err := p.Destroy(context.Background(), sb.ID); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	pooltest.Eventually(t, 10*time.Second, "unconfined sandbox's process group gone", func() bool {
		return syscall.Kill(-pgid, 0) != nil
	})
}

// TestDeepRootSocket: a state root deep enough that the guest socket's host
// path exceeds the 108-byte unix socket limit still boots.
func TestDeepRootSocket(t *testing.T) {
	root := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	p := newTestProvider(t, Options{Root: root})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := p.Create(ctx, pool.Spec{})
	if err != nil {
		t.Fatalf("create under a deep root: %v", err)
	}
	defer p.Destroy(ctx, sb.ID)
	if len(sb.GuestAddr) > maxSockPath {
		t.Errorf("guest address %q is %d bytes; want at most %d", sb.GuestAddr, len(sb.GuestAddr), maxSockPath)
	}
}

// TestSandboxCgroup: where the host offers cgroups, the whole sandbox is in
// its own (guestd and the X server in its guest leaf, the agent's
// processes in its agent leaf), the agent cannot reach them, score freezes
// the agent, an allocation past the sandbox's memory ends that sandbox as
// sandbox_died{reason: oom}, and destroy leaves no cgroup behind.
func TestSandboxCgroup(t *testing.T) {
	p := newTestProvider(t, Options{})
	if p.cgroups == nil {
		t.Skip("no cgroups on this host")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sb, err := p.Create(ctx, pool.Spec{MemoryBytes: 160 << 20})
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	cg := p.boxes[sb.ID].cg
	p.mu.Unlock()
	dirs := cg.dirs()
	c := pooltest.Dial(t, sb)
	if out := pooltest.MustSh(t, c, "cat /proc/self/cgroup"); strings.Count(out, "shinken-"+sb.ID+"/agent") != len(dirs) {
		t.Errorf("agent's cgroups: %s; want the sandbox's agent leaf in each of %v", out, dirs)
	}
	if out, code := pooltest.Sh(t, c, "ls /run/cgroup 2>&1"); code == 0 {
		t.Errorf("agent listed its cgroups: %q; want refused", out)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", p.InitPID(sb.ID))); err != nil || strings.Count(string(b), "shinken-"+sb.ID+"/guest") != len(dirs) {
		t.Errorf("guestd's cgroups: %s (%v); want the sandbox's guest leaf", b, err)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/oom_score_adj", p.InitPID(sb.ID))); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(sandboxOOMScoreAdj) {
		t.Errorf("sandbox oom_score_adj = %q (%v); want %d", b, err, sandboxOOMScoreAdj)
	}
	if b, _ := os.ReadFile("/proc/self/oom_score_adj"); canLowerOOMScore() && strings.TrimSpace(string(b)) != strconv.Itoa(serverOOMScoreAdj) {
		t.Errorf("server oom_score_adj = %q; want %d", b, serverOOMScoreAdj)
	}
	if p.Capabilities().Confinement.Cgroup != p.cgroups.version() {
		t.Errorf("confinement = %+v; want cgroup %s", p.Capabilities().Confinement, p.cgroups.version())
	}
	pooltest.MustSh(t, c, "sleep 600 >/dev/null 2>&1 &")
	res, err := c.Score(ctx, wire.ScoreArgs{Shell: "echo 1", TimeoutMS: 5000})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "1" || !res.Isolated || res.Frozen == 0 {
		t.Fatalf("score: %+v, %v; want 1, isolated, agent frozen", res, err)
	}
	if d := cg.binds()["freezer"]; d != "" {
		if st, _ := os.ReadFile(d + "/agent/freezer.state"); strings.TrimSpace(string(st)) != "FROZEN" {
			t.Errorf("freezer.state after score = %q; want FROZEN", st)
		}
	}
	if err := p.Destroy(ctx, sb.ID); err != nil {
		t.Fatalf("destroy of a frozen sandbox: %v", err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left after destroy (%v)", d, err)
		}
	}
}

// TestLimits: a memory hog, started as the agent would, ends its sandbox
// (and only it) as sandbox_died with detail.reason oom; a fork bomb is
// contained in the agent's leaf (its forks fail, the sandbox lives, score
// still runs the verifier); a neighbour answers throughout.
func TestLimits(t *testing.T) {
	p := newTestProvider(t, Options{})
	if p.cgroups == nil {
		t.Skip("no cgroups on this host")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	neighbour := pooltest.Create(t, p)
	nc := pooltest.Dial(t, neighbour)
	t.Run("oom", func(t *testing.T) {
		sb, err := p.Create(ctx, pool.Spec{MemoryBytes: 256 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Destroy(context.Background(), sb.ID)
		c := pooltest.Dial(t, sb)
		// The sandbox may die before exec answers.
		_, _ = c.Exec(ctx, wire.ExecArgs{Shell: `(python3 -c 'x = bytearray(600 << 20); x[::4096] = b"x" * len(x[::4096])') >/dev/null 2>&1 &`, TimeoutMS: 5000})
		select {
		case <-sb.Dead:
		case <-ctx.Done():
			t.Fatal("sandbox still alive after its memory hog")
		}
		err = p.Alive(ctx, sb.ID)
		var e *aci.Error
		if !errors.Is(err, pool.ErrSandboxDied) || !errors.As(err, &e) || fmt.Sprint(e.Detail) != "map[reason:oom]" {
			t.Fatalf("Alive = %v (detail %v); want sandbox_died with reason oom", err, e)
		}
		if r := sb.LimitHit(); r != reasonOOM {
			t.Errorf("LimitHit = %q; want oom", r)
		}
	})
	t.Run("pids", func(t *testing.T) {
		sb, err := p.Create(ctx, pool.Spec{Pids: 128})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Destroy(context.Background(), sb.ID)
		p.mu.Lock()
		pidsDir := p.boxes[sb.ID].cg.binds()["pids"]
		if pidsDir == "" {
			pidsDir = p.boxes[sb.ID].cg.binds()["unified"]
		}
		p.mu.Unlock()
		c := pooltest.Dial(t, sb)
		if r, err := c.Exec(ctx, wire.ExecArgs{Shell: `(f() { f | f & }; f) >/dev/null 2>&1 &`, TimeoutMS: 20000}); err != nil {
			t.Fatalf("start the fork bomb: %v%s", err, deathReport(p, sb, err))
		} else if r.ExitCode == nil || *r.ExitCode != 0 {
			t.Fatalf("start the fork bomb: %+v; want exit 0", r)
		}
		pooltest.Eventually(t, 30*time.Second, "the fork bomb at the agent's pids limit", func() bool {
			b, _ := os.ReadFile(filepath.Join(pidsDir, "agent", "pids.current"))
			n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return n >= 128-min(guestPids, 128/4)
		})
		if err := p.Alive(ctx, sb.ID); err != nil {
			t.Fatalf("sandbox died of a fork bomb: %v; want it contained%s", err, deathReport(p, sb, err))
		}
		if h, err := c.Health(ctx); err != nil || !h.X {
			t.Errorf("health beside the fork bomb: %+v, %v", h, err)
		}
		res, err := c.Score(ctx, wire.ScoreArgs{Shell: "echo 1", TimeoutMS: 10000})
		if err != nil || strings.TrimSpace(string(res.Stdout)) != "1" {
			t.Errorf("score beside the fork bomb: %+v, %v; want the verifier's 1", res, err)
		}
	})
	if h, err := nc.Health(ctx); err != nil || !h.X {
		t.Errorf("neighbour after the hogs: %+v, %v", h, err)
	}
}

// TestMinimalRoot: a sandbox sees the OS and its own directories, nothing
// else of the host: not this checkout (whose task files hold every answer),
// not the provider's state, not locally installed binaries, not the
// processes that are not the agent's.
func TestMinimalRoot(t *testing.T) {
	p := newTestProvider(t, Options{})
	sb := pooltest.Create(t, p)
	c := pooltest.Dial(t, sb)
	_, file, _, _ := runtime.Caller(0)
	pkg := filepath.Dir(file)
	for _, path := range []string{pkg, filepath.Dir(filepath.Dir(pkg)), p.opts.Root, guestdPath, "/usr/local/bin", "/root", "/sys/fs/cgroup"} {
		if out, code := pooltest.Sh(t, c, "ls -d "+path+"/* 2>/dev/null | head -3"); code == 0 && out != "" {
			t.Errorf("sandbox sees %s: %q", path, out)
		}
	}
	top := strings.Fields(pooltest.MustSh(t, c, "ls -A /"))
	allowed := map[string]bool{"usr": true, "bin": true, "sbin": true, "lib": true, "lib32": true, "lib64": true, "libx32": true,
		"etc": true, "home": true, "tmp": true, "run": true, "var": true, "proc": true, "dev": true}
	for _, e := range top {
		if !allowed[e] {
			t.Errorf("sandbox root holds %q; want only %v", e, allowed)
		}
	}
	// OSWorld's name for the home is the home, and the agent cannot move it.
	if got := pooltest.MustSh(t, c, `[ "$(cd /home/user && pwd -P)" = "$(cd && pwd -P)" ] && echo same; rm /home/user 2>/dev/null || echo kept`); got != "same\nkept" {
		t.Errorf("/home/user: %q; want the home, kept", got)
	}
	if os.Geteuid() == 0 {
		// hidepid: the agent sees its own processes only, not guestd's.
		if out, _ := pooltest.Sh(t, c, "ls -d /proc/1 2>&1"); !strings.Contains(out, "No such file") {
			t.Errorf("agent sees PID 1 (guestd): %q", out)
		}
		if out, code := pooltest.Sh(t, c, "kill -TERM 1 2>&1; kill -KILL 1 2>&1"); code == 0 {
			t.Errorf("agent signalled guestd: %q", out)
		}
		if h, err := c.Health(context.Background()); err != nil || !h.X {
			t.Errorf("health after the agent's kill 1: %+v, %v", h, err)
		}
	}
}

// TestScoreFreezesAgent: once score returns, no process the agent started
// can run: they are stopped (the sweep) or frozen (the cgroup freezer),
// whether or not the host has cgroups, and the X server still answers.
func TestScoreFreezesAgent(t *testing.T) {
	for _, noCgroups := range []bool{false, true} {
		t.Run(fmt.Sprintf("noCgroups=%v", noCgroups), func(t *testing.T) {
			p := newTestProvider(t, Options{noCgroups: noCgroups})
			sb := pooltest.Create(t, p)
			c := pooltest.Dial(t, sb)
			ns := p.PIDNamespace(sb.ID)
			// A busy loop, a detached session and a sleeper, like an agent's.
			pooltest.MustSh(t, c, `(while :; do :; done) >/dev/null 2>&1 & setsid sh -c 'sleep 600' >/dev/null 2>&1 & sleep 600 >/dev/null 2>&1 &`)
			res, err := c.Score(context.Background(), wire.ScoreArgs{Shell: "echo 0", TimeoutMS: 5000})
			if err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
				t.Fatalf("score: %+v, %v", res, err)
			}
			init := p.InitPID(sb.ID)
			running := 0
			for pid := range pooltest.NSProcs(ns) {
				cb, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				comm := strings.TrimSpace(string(cb))
				if pid == init || comm == "Xvfb" {
					continue
				}
				s, err := procstat.Read(pid)
				if err != nil {
					continue // gone
				}
				if st := string(s.State); st != "T" && st != "t" && st != "D" {
					running++
					t.Errorf("pid %d (%s) is %s after score; want stopped or frozen", pid, comm, st)
				}
			}
			if res.Frozen < 4 {
				t.Errorf("frozen = %d; want the window manager and the agent's three", res.Frozen)
			}
			if h, err := c.Health(context.Background()); err != nil || !h.X {
				t.Errorf("health after score: %+v, %v; want X up", h, err)
			}
		})
	}
}

// canLowerOOMScore: lowering oom_score_adj takes CAP_SYS_RESOURCE, which
// some container runtimes do not give root.
func canLowerOOMScore() bool {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			caps, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return caps&(1<<24) != 0
		}
	}
	return false
}

// TestComposeCacheShared: an X client in the sandbox maps libX11's Compose
// cache, bound read-only from the host (images/compose-cache.sh, run by make
// deps), instead of parsing half a megabyte of Compose table at start-up;
// the agent cannot write it.
func TestComposeCacheShared(t *testing.T) {
	const dir = "/var/cache/libx11/compose"
	if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
		t.Skipf("the host has no Compose cache in %s (make deps writes it as root)", dir)
	}
	p := newTestProvider(t, Options{})
	sb := pooltest.Create(t, p)
	c := pooltest.Dial(t, sb)
	out := pooltest.MustSh(t, c, `xterm -e sh -c 'grep -c `+dir+` /proc/$PPID/maps > /tmp/maps'; cat /tmp/maps`)
	if n, err := strconv.Atoi(strings.TrimSpace(out)); err != nil || n == 0 {
		t.Errorf("xterm in the sandbox maps no file of %s (grep -c: %q)", dir, out)
	}
	if out, code := pooltest.Sh(t, c, "touch "+dir+"/x 2>&1"); code == 0 {
		t.Errorf("the agent wrote into the shared Compose cache: %q", out)
	}
}
