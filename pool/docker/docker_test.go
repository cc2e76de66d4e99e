package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	dockerclient "github.com/docker/docker/client"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/images"
	"github.com/shinken-rl/shinken/internal/procstat"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/pooltest"
	"github.com/shinken-rl/shinken/pool/process"
)

// guestdBin is a static guestd built once by TestMain, or "" with skipWhy set.
var (
	guestdBin string
	skipWhy   string
)

func TestMain(m *testing.M) {
	process.MaybeRunInit() // the benchmarks' baseline provider re-execs this binary
	dir, err := os.MkdirTemp("", "shinken-docker-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	skipWhy = setup(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// setup checks for an engine and the image, and builds a static guestd into
// dir. It returns why docker tests must skip, or "".
func setup(dir string) string {
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		return "no docker engine: " + err.Error()
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return "no docker engine answers: " + err.Error()
	}
	if _, err := cli.ImageInspect(ctx, images.Ref()); err != nil {
		return "docker image not built: run make image (" + images.Ref() + ")"
	}
	if p := os.Getenv("SHINKEN_GUESTD"); p != "" {
		guestdBin = p
		return ""
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "go toolchain not on PATH: cannot build guestd"
	}
	out := filepath.Join(dir, "guestd")
	cmd := exec.Command(goBin, "build", "-o", out, "github.com/shinken-rl/shinken/cmd/guestd")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Sprintf("cannot build guestd: %v: %s", err, b)
	}
	guestdBin = out
	return ""
}

// engine returns a client for assertions made from outside the provider.
func engine(t testing.TB) *dockerclient.Client {
	t.Helper()
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newProvider returns a provider with a fresh instance name, closed in
// t.Cleanup, after which nothing labelled with its run may remain.
func newProvider(t testing.TB) *Provider {
	t.Helper()
	return newProviderInstance(t, fmt.Sprintf("test-%s", randomID()))
}

func newProviderInstance(t testing.TB, instance string) *Provider {
	t.Helper()
	return newProviderOpts(t, Options{Instance: instance})
}

// newProviderOpts starts a provider with opts (this test's guestd; a fresh
// instance unless named), closed and checked for leaks when t ends.
func newProviderOpts(t testing.TB, opts Options) *Provider {
	t.Helper()
	if skipWhy != "" {
		pooltest.SkipUnless(t, pooltest.RequireDocker, skipWhy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts.GuestdPath = guestdBin
	if opts.Instance == "" {
		opts.Instance = fmt.Sprintf("test-%s", randomID())
	}
	p, err := New(ctx, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
		assertNoLeaks(t, p.Run())
	})
	return p
}

// assertNoLeaks fails the test if any container or image still carries run.
func assertNoLeaks(t testing.TB, run string) {
	t.Helper()
	cli := engine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", LabelRun+"="+run))
	cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	ims, err := cli.ImageList(ctx, image.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatalf("list images: %v", err)
	}
	if len(cs) != 0 || len(ims) != 0 {
		t.Errorf("after Close, run %s left: got %d containers, %d images; want 0, 0", run, len(cs), len(ims))
	}
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// dial connects to a sandbox's guest, closed in t.Cleanup.
func dial(t testing.TB, ctx context.Context, sb *pool.Sandbox) *client.Client {
	t.Helper()
	c, err := client.Dial(ctx, sb.GuestNetwork, sb.GuestAddr)
	if err != nil {
		t.Fatalf("dial guest of %.12s: %v", sb.ID, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sh runs a shell command in the sandbox and returns its stdout; a non-zero
// exit fails the test.
func sh(t testing.TB, ctx context.Context, c *client.Client, script string) string {
	t.Helper()
	res, err := c.Exec(ctx, wire.ExecArgs{Shell: script, TimeoutMS: 10000})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	if res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %v signal %q stderr %q", script, res.ExitCode, res.Signal, res.Stderr)
	}
	return string(res.Stdout)
}

func TestNoEngineOrImageIsTyped(t *testing.T) {
	if guestdBin == "" {
		pooltest.SkipUnless(t, pooltest.RequireDocker, skipWhy)
	}
	ctx := testCtx(t, 30*time.Second)
	_, err := New(ctx, Options{GuestdPath: guestdBin, Image: "shinken-sandbox:does-not-exist"})
	if !errors.Is(err, ErrNoImage) {
		t.Fatalf("New with a missing image: got %v; want ErrNoImage", err)
	}
	_, err = New(ctx, Options{GuestdPath: filepath.Join(t.TempDir(), "nope")})
	if err == nil {
		t.Fatal("New with a missing guestd: got nil error; want one")
	}
}

// TestContainerConfinement checks the container's settings as the engine
// reports them and as seen from inside.
func TestContainerConfinement(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	ctx := testCtx(t, 2*time.Minute)
	sb, err := p.Create(ctx, pool.Spec{MemoryBytes: 512 << 20, Pids: 300})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	info, err := engine(t).ContainerInspect(ctx, sb.ID)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	hc := info.HostConfig
	if got := string(hc.NetworkMode); got != "none" {
		t.Errorf("network mode: got %q; want none", got)
	}
	if hc.Init != nil && *hc.Init {
		t.Errorf("init: got docker's init; want guestd as PID 1")
	}
	if hc.NanoCPUs != DefaultCPUs*1e9 {
		t.Errorf("cpus: got %d nano; want %d", hc.NanoCPUs, DefaultCPUs)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != 300 {
		t.Errorf("pids limit: got %v; want 300", hc.PidsLimit)
	}
	if hc.Memory != 512<<20 {
		t.Errorf("memory: got %d; want %d", hc.Memory, 512<<20)
	}
	if hc.ShmSize != DefaultShm {
		t.Errorf("shm size: got %d; want %d", hc.ShmSize, DefaultShm)
	}
	if got := info.Config.Labels[LabelInstance]; got != p.Instance() {
		t.Errorf("instance label: got %q; want %q", got, p.Instance())
	}
	for _, m := range info.Mounts {
		if strings.Contains(m.Source, "docker.sock") {
			t.Errorf("mount %s -> %s: the docker socket must not be inside", m.Source, m.Destination)
		}
	}
	c := dial(t, ctx, sb)
	if got := strings.TrimSpace(sh(t, ctx, c, "id -u")); got == "0" || got == "" {
		t.Errorf("desktop uid: got %q; want an unprivileged uid", got)
	}
	if got := strings.TrimSpace(sh(t, ctx, c, "stat -c %u $HOME; id -u")); len(strings.Fields(got)) != 2 || strings.Fields(got)[0] != strings.Fields(got)[1] {
		t.Errorf("home owner and agent uid: got %q; want equal", got)
	}
	if got := strings.TrimSpace(sh(t, ctx, c, `[ "$(cd /home/user && pwd -P)" = "$(cd && pwd -P)" ] && echo same`)); got != "same" {
		t.Errorf("/home/user (OSWorld's home): %q; want the home", got)
	}
	// The agent cannot reach the host's channel to guestd.
	if got := sh(t, ctx, c, "python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"/run/shinken/guest.sock\")' 2>&1 || echo refused"); !strings.Contains(got, "refused") {
		t.Errorf("agent connected to the guest socket: %q", got)
	}
	// Only loopback: no interface but lo.
	if got := strings.TrimSpace(sh(t, ctx, c, "ls /sys/class/net")); got != "lo" {
		t.Errorf("network interfaces: got %q; want lo", got)
	}
	if got := sh(t, ctx, c, "test -e /var/run/docker.sock && echo present || echo absent"); strings.TrimSpace(got) != "absent" {
		t.Errorf("docker socket inside: got %s; want absent", got)
	}
	// The root filesystem outside home belongs to root.
	res, err := c.Exec(ctx, wire.ExecArgs{Shell: "touch /usr/bin/owned", TimeoutMS: 5000})
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if res.ExitCode != nil && *res.ExitCode == 0 {
		t.Errorf("agent wrote /usr/bin: got exit 0; want a failure")
	}
}

// TestKilledFromOutside: a container killed through the engine closes Dead,
// Alive reports ErrSandboxDied, and a guest call reports sandbox_died.
func TestKilledFromOutside(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	ctx := testCtx(t, 2*time.Minute)
	sb, err := p.Create(ctx, pool.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	c := dial(t, ctx, sb)
	if err := p.Alive(ctx, sb.ID); err != nil {
		t.Fatalf("Alive before kill: got %v; want nil", err)
	}
	if err := engine(t).ContainerKill(ctx, sb.ID, "KILL"); err != nil {
		t.Fatalf("kill: %v", err)
	}
	select {
	case <-sb.Dead:
	case <-time.After(30 * time.Second):
		t.Fatal("Dead not closed 30s after the container was killed")
	}
	if err := p.Alive(ctx, sb.ID); !errors.Is(err, pool.ErrSandboxDied) {
		t.Errorf("Alive after kill: got %v; want ErrSandboxDied", err)
	}
	_, err = c.Health(ctx)
	if got := aci.CodeOf(err); got != aci.CodeSandboxDied {
		t.Errorf("guest call after kill: got code %q (%v); want %q", got, err, aci.CodeSandboxDied)
	}
	// The provider still works: a replacement boots.
	sb2, err := p.Create(ctx, pool.Spec{})
	if err != nil {
		t.Fatalf("Create replacement: %v", err)
	}
	if err := p.Alive(ctx, sb2.ID); err != nil {
		t.Errorf("replacement Alive: got %v; want nil", err)
	}
	if err := p.Destroy(ctx, sb.ID); err != nil {
		t.Errorf("Destroy of the killed one: %v", err)
	}
	if err := p.Destroy(ctx, sb.ID); err != nil {
		t.Errorf("second Destroy: got %v; want nil (idempotent)", err)
	}
	if err := p.Alive(ctx, sb.ID); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("Alive after Destroy: got %v; want ErrNotFound", err)
	}
}

// TestForkAndSnapshotGC: forks inherit files written before the snapshot
// and are isolated from each other; a deleted snapshot's directory stays
// while a fork started from it remains and goes with the last one.
func TestForkAndSnapshotGC(t *testing.T) {
	t.Parallel()
	p := newProvider(t)
	ctx := testCtx(t, 5*time.Minute)
	sb, err := p.Create(ctx, pool.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	sh(t, ctx, dial(t, ctx, sb), "echo seeded > $HOME/seed.txt && echo tmp > /tmp/in-tmp.txt")
	snap, err := p.Snapshot(ctx, sb.ID)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	forks, err := p.Fork(ctx, snap, 2, pool.Spec{})
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	if len(forks) != 2 || forks[0].ID == forks[1].ID || forks[0].GuestAddr == forks[1].GuestAddr {
		t.Fatalf("Fork(2): got %d sandboxes %+v; want 2 distinct", len(forks), forks)
	}
	c0, c1 := dial(t, ctx, forks[0]), dial(t, ctx, forks[1])
	for i, c := range []*client.Client{c0, c1} {
		if got := sh(t, ctx, c, "cat $HOME/seed.txt /tmp/in-tmp.txt"); got != "seeded\ntmp\n" {
			t.Errorf("fork %d sees %q; want %q", i, got, "seeded\ntmp\n")
		}
	}
	sh(t, ctx, c0, "echo mine > $HOME/only-fork0.txt && rm $HOME/seed.txt")
	if got := sh(t, ctx, c1, "ls $HOME/only-fork0.txt 2>/dev/null; cat $HOME/seed.txt"); got != "seeded\n" {
		t.Errorf("fork 1 after fork 0 wrote: got %q; want %q", got, "seeded\n")
	}
	// A snapshot of a fork stands on snap's image too.
	snap2, err := p.Snapshot(ctx, forks[1].ID)
	if err != nil {
		t.Fatalf("Snapshot of fork: %v", err)
	}
	if err := p.DeleteSnapshot(ctx, snap); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	if _, err := p.Restore(ctx, snap, pool.Spec{}); !errors.Is(err, pool.ErrNotFound) {
		t.Errorf("Restore of a deleted snapshot: got %v; want ErrNotFound", err)
	}
	dir := filepath.Join(p.stateDir, "snapshots")
	exists := func(id string) bool {
		_, err := os.Stat(filepath.Join(dir, id))
		return err == nil
	}
	if !exists(snap) {
		t.Fatal("snapshot removed while forks still use it")
	}
	for _, f := range forks {
		if err := p.Destroy(ctx, f.ID); err != nil {
			t.Fatalf("Destroy fork: %v", err)
		}
	}
	if exists(snap) {
		t.Error("snapshot kept after its last fork went")
	}
	if !exists(snap2) {
		t.Fatal("a live snapshot was removed")
	}
	if err := p.DeleteSnapshot(ctx, snap2); err != nil {
		t.Fatalf("DeleteSnapshot 2: %v", err)
	}
	if exists(snap2) {
		t.Errorf("after DeleteSnapshot with nothing on it: snap2 exists")
	}
	if err := p.DeleteSnapshot(ctx, snap); err != nil {
		t.Errorf("second DeleteSnapshot: got %v; want nil", err)
	}
	if got := p.Snapshots(); len(got) != 0 {
		t.Errorf("snapshots held: got %v; want none", got)
	}
}

// TestSweepRemovesOrphans: a run that never closed (a crash) leaves a
// container and an image; the next run of the same instance removes them and
// leaves other instances alone.
func TestSweepRemovesOrphans(t *testing.T) {
	t.Parallel()
	instance := "test-sweep-" + randomID()
	crashed := newProviderInstance(t, instance)
	other := newProvider(t)
	ctx := testCtx(t, 5*time.Minute)
	sb, err := crashed.Create(ctx, pool.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := crashed.Snapshot(ctx, sb.ID); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	bystander, err := other.Create(ctx, pool.Spec{})
	if err != nil {
		t.Fatalf("Create in another instance: %v", err)
	}
	newProviderInstance(t, instance) // the restarted server
	cli := engine(t)
	if _, err := cli.ContainerInspect(ctx, sb.ID); !cerrdefs.IsNotFound(err) {
		t.Errorf("orphan container after sweep: got %v; want not found", err)
	}
	if err := other.Alive(ctx, bystander.ID); err != nil {
		t.Errorf("other instance's sandbox after sweep: got %v; want alive", err)
	}
}

// TestSweepRemovesDeadOwners: a server killed without Close leaves its
// containers running under an instance no later server may share (a test's
// temporary state dir); any provider's start removes them once their owner
// process has ended, and leaves a live owner's alone.
func TestSweepRemovesDeadOwners(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t, 5*time.Minute)
	dead := exec.Command("true")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	st, err := procstat.Read(dead.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	dead.Wait()
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	killed := newProvider(t)
	killed.owner = fmt.Sprintf("%s %d %d", ns, dead.Process.Pid, st.Start)
	sb, err := killed.Create(ctx, pool.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	live := newProvider(t)
	bystander, err := live.Create(ctx, pool.Spec{})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	newProvider(t) // another server starts
	if _, err := engine(t).ContainerInspect(ctx, sb.ID); !cerrdefs.IsNotFound(err) {
		t.Errorf("a dead owner's container after a start: got %v; want not found", err)
	}
	if err := live.Alive(ctx, bystander.ID); err != nil {
		t.Errorf("a live owner's sandbox after a start: got %v; want alive", err)
	}
}
