// Package process is the embedded default pool provider: each sandbox is a
// process tree on this host in its own pid, mount, ipc and network
// namespaces (network: loopback only), with a scrubbed environment, rlimits,
// its own uid, its own writable home, workspace and /tmp, and its own X
// display. Inside, the host's filesystem is read-only.
//
// A sandbox boots by re-executing the current binary as a small init
// (MaybeRunInit must be called at the top of main and TestMain), which
// confines itself and execs guestd in session mode as the namespace's PID 1;
// guestd starts Xvfb and the window manager and answers hello only once the
// desktop is ready. Killing PID 1 ends the whole sandbox.
//
// Snapshots are of the disk tier: the sandbox's writable directories are
// copied into a snapshot store, and sandboxes restored or forked from it
// relaunch the apps guestd had recorded. In-memory app state (unsaved text,
// scroll positions, window placement) is not carried.
package process

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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shinken-rl/shinken/aci"

	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/internal/safecopy"
	"golang.org/x/sync/errgroup"
)

// Options configure a Provider. The zero value works where the host allows
// namespaces and guestd is next to the executable or on PATH.
type Options struct {
	// Root is the state directory (sandbox dirs, snapshots, display locks);
	// default <os.TempDir()>/shinken-process. Providers sharing a Root
	// cooperate: each reaps only the runs whose owner is gone.
	Root string
	// GuestdPath is the guestd binary; default: next to the executable, else PATH.
	GuestdPath string
	// DisplayBase and Displays bound the X display numbers handed out
	// (default 100 and 1000).
	DisplayBase, Displays int
	// UIDBase and UIDs: when running as root, a sandbox's agent runs as its
	// own uid/gid, its verifiers as the next uid and its window manager as
	// the one after, three from [UIDBase, UIDBase+UIDs) (defaults 200000
	// and 60000: 20000 sandboxes), so sandboxes cannot touch each other's
	// files, RLIMIT_NPROC counts per sandbox, and no agent shares a uid
	// with any sandbox's verifiers or window manager. Claims are host-wide
	// (flocks in UIDLockDir, named by the agent's uid), so providers with
	// different roots never share one.
	UIDBase, UIDs int
	// UIDLockDir holds the host-wide uid claims (default /run/shinken/uids).
	UIDLockDir string
	// NoFile and NProc are the sandbox's RLIMIT_NOFILE and RLIMIT_NPROC
	// (defaults 4096 and 512; Spec.Pids overrides NProc).
	NoFile, NProc uint64
	// ShmBytes sizes the sandbox's private /dev/shm (default 64 MiB).
	ShmBytes int64
	// SnapshotBytes caps what one snapshot copies (file data, holes not
	// counted, plus 512 bytes per entry); a sandbox holding more fails
	// Snapshot (and so /v1/fork) with code too_large. 0 means
	// 4 GiB; negative means no cap.
	SnapshotBytes int64
	// MemoryBytes, CPUs, CPUWeight and IOWeight bound one whole sandbox
	// (init, guestd, the X server and the agent) through its cgroup
	// (docs/architecture.md, "Sandbox limits"): memory (default 2 GiB;
	// Spec.MemoryBytes overrides it), a CPU quota in whole CPUs (default
	// 1), a relative CPU and IO weight (1..10000, default 100). The pids
	// limit is NProc (Spec.Pids overrides it).
	MemoryBytes int64
	CPUs        int
	CPUWeight   int
	IOWeight    int
	// StateBytes bounds a sandbox's writable state (home, workspace, /tmp:
	// one tmpfs; default 1 GiB) and FileBytes any one file it writes
	// (RLIMIT_FSIZE; default 512 MiB).
	StateBytes, FileBytes int64
	// BootTimeout bounds one boot, from start to hello (default 30 s).
	BootTimeout time.Duration
	// MaxConcurrentBoots bounds the boots of one Fork (default 4).
	MaxConcurrentBoots int
	// AllowUnconfined runs sandboxes as plain process groups when the host
	// cannot create namespaces, instead of refusing to start. Capabilities
	// then say Confined=false.
	AllowUnconfined bool
	// Logf receives operational messages; default discards.
	Logf func(format string, args ...any)

	// noNamespaces simulates a host without namespaces (tests).
	noNamespaces bool
	// noCgroups simulates a host without cgroups (tests).
	noCgroups bool
}

// Provider is the process provider. It implements pool.Provider,
// pool.Snapshotter and pool.Forker.
type Provider struct {
	opts     Options
	guestd   string
	runDir   string // this provider's run: sandboxes and snapshots
	runLock  *os.File
	confined bool
	notes    string
	cgroups  cgroupHost // nil: the host gives none (or noCgroups)
	displays *displays
	uids     *displays // host-wide uid claims (root only); same flock scheme
	seq      atomic.Uint64

	mu     sync.Mutex
	boxes  map[string]*box
	snaps  map[string]string // snapshot id -> dir
	closed bool
}

// box is one live (or dying) sandbox.
type box struct {
	sb      *pool.Sandbox
	dir     string
	display int
	uid     int // claimed host-wide; 0 when none
	cmd     *exec.Cmd
	dead    chan struct{} // closed after the init was reaped
	pidNS   string        // pid namespace id, "" when unconfined
	cg      sandboxCgroup // the sandbox's cgroup; nil when none
	unwatch func()        // stops the cgroup's limit watch; nil when none
	state   bool          // dir is a tmpfs of this provider's (StateBytes)
	limit   atomic.Value  // string: the limit the sandbox was ended by
	exitErr error         // valid after dead is closed
}

var _ interface {
	pool.Provider
	pool.Snapshotter
	pool.Forker
} = (*Provider)(nil)

// New starts a provider: it claims a run directory under Root, reaps the
// orphans of previous runs whose owner is gone, and checks that the host can
// confine sandboxes. Without namespaces it fails unless AllowUnconfined.
func New(ctx context.Context, opts Options) (*Provider, error) {
	if opts.Root == "" {
		opts.Root = filepath.Join(os.TempDir(), "shinken-process")
	}
	if opts.DisplayBase == 0 {
		opts.DisplayBase = 100
	}
	if opts.Displays == 0 {
		opts.Displays = 1000
	}
	if opts.UIDBase == 0 {
		opts.UIDBase = 200000
	}
	if opts.UIDs == 0 {
		opts.UIDs = 60000
	}
	if opts.UIDLockDir == "" {
		opts.UIDLockDir = "/run/shinken/uids"
	}
	if opts.NoFile == 0 {
		opts.NoFile = 4096
	}
	if opts.NProc == 0 {
		opts.NProc = 512
	}
	if opts.ShmBytes == 0 {
		opts.ShmBytes = 64 << 20
	}
	if opts.MemoryBytes == 0 {
		opts.MemoryBytes = 2 << 30
	}
	if opts.CPUs == 0 {
		opts.CPUs = 1
	}
	if opts.CPUWeight == 0 {
		opts.CPUWeight = 100
	}
	if opts.IOWeight == 0 {
		opts.IOWeight = 100
	}
	if opts.StateBytes == 0 {
		opts.StateBytes = 1 << 30
	}
	if opts.FileBytes == 0 {
		opts.FileBytes = 512 << 20
	}
	if opts.SnapshotBytes == 0 {
		opts.SnapshotBytes = safecopy.DefaultMax
	}
	if opts.BootTimeout == 0 {
		opts.BootTimeout = 30 * time.Second
	}
	if opts.MaxConcurrentBoots == 0 {
		opts.MaxConcurrentBoots = 4
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	guestd, err := findGuestd(opts.GuestdPath)
	if err != nil {
		return nil, err
	}
	root, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("process: root: %w", err)
	}
	opts.Root = root
	for _, d := range []string{"runs", "displays"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, fmt.Errorf("process: state root: %w", err)
		}
	}
	if n := sweep(ctx, root, opts.Logf); n > 0 {
		opts.Logf("process: reaped %d orphaned sandbox(es) of previous runs", n)
	}
	p := &Provider{
		opts:     opts,
		guestd:   guestd,
		boxes:    make(map[string]*box),
		snaps:    make(map[string]string),
		displays: newDisplays(filepath.Join(root, "displays"), opts.DisplayBase, opts.Displays),
	}
	if err := p.claimRun(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		err = errRootless
		if !opts.AllowUnconfined {
			p.releaseRun()
			return nil, pool.Errorf(pool.ErrUnsupported, aci.CodeUnsupported, "process: %s; run the server as root (each sandbox then gets its own uid, cgroup and a root it cannot remount), use the docker provider, or set AllowUnconfined to run sandboxes knowingly unconfined", errRootless)
		}
	} else {
		err = p.probeNamespaces()
	}
	if err != nil {
		if !opts.AllowUnconfined {
			p.releaseRun()
			return nil, pool.Errorf(pool.ErrUnsupported, aci.CodeUnsupported, "process: this host cannot confine sandboxes (%v); run as root or enable unprivileged user namespaces, or set AllowUnconfined to run them unconfined", err)
		}
		p.notes = "UNCONFINED: the host cannot confine sandboxes (" + err.Error() + "); sandboxes share the host's filesystem, network and processes. "
		opts.Logf("process: WARNING: running sandboxes unconfined: %v", err)
		p.displays.checkHostX = true
	} else {
		p.confined = true
	}
	if p.confined && !opts.noCgroups {
		p.cgroups = probeCgroups()
	}
	if p.confined {
		// The OOM killer picks a sandbox long before the server
		// (docs/architecture.md, "Sandbox limits").
		_ = os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(serverOOMScoreAdj)), 0)
	}
	if p.confined {
		if err := os.MkdirAll(opts.UIDLockDir, 0o755); err != nil {
			p.releaseRun()
			return nil, fmt.Errorf("process: uid claims: %w", err)
		}
		// A claim holds three uids: the agent's and, above it, its
		// verifiers' and its desktop's own. Nothing else hands out uids in
		// the range, so no agent ever shares a uid with another sandbox's
		// verifier or window manager.
		p.uids = newDisplays(opts.UIDLockDir, opts.UIDBase, opts.UIDs/uidsPerSandbox)
		p.uids.stride = uidsPerSandbox
		p.uids.what = "sandbox uid triples"
	}
	p.notes += "disk tier: home, workspace and /tmp are snapshotted and apps recorded by guestd are relaunched on restore/fork; in-memory app state is not carried."
	return p, nil
}

// findGuestd resolves the guestd binary.
func findGuestd(path string) (string, error) {
	if path == "" {
		if exe, err := os.Executable(); err == nil {
			cand := filepath.Join(filepath.Dir(exe), "guestd")
			if _, err := os.Stat(cand); err == nil {
				path = cand
			}
		}
	}
	if path == "" {
		p, err := exec.LookPath("guestd")
		if err != nil {
			return "", fmt.Errorf("process: guestd not found next to the executable or on PATH; set Options.GuestdPath: %w", err)
		}
		path = p
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("process: guestd: %w", err)
	}
	if _, err := os.Stat(abs); err != nil {
		return "", fmt.Errorf("process: guestd: %w", err)
	}
	return abs, nil
}

// cloneFlags are the namespaces every sandbox gets.
const cloneFlags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWNET | syscall.CLONE_NEWUTS

// namespaceNames are cloneFlags' namespaces as /v1/spec lists them.
var namespaceNames = []string{"pid", "mount", "ipc", "net", "uts"}

// errRootless is why a non-root server runs no confined sandbox: in a user
// namespace the agent would be its uid 0 with every capability over the
// sandbox's mounts (docs/architecture.md, "Rootless").
var errRootless = errors.New("rootless sandboxes are refused: without root the agent would run as uid 0 of its user namespace, able to unmount and remount its view of the host")

// sysProcAttr returns the attributes that start a sandbox init (root
// only: see errRootless).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Cloneflags: cloneFlags, Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// probeNamespaces starts a trivial process in the sandbox namespaces.
func (p *Provider) probeNamespaces() error {
	if p.opts.noNamespaces {
		return errors.New("namespaces disabled")
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		return err
	}
	cmd := exec.Command(truePath)
	cmd.SysProcAttr = sysProcAttr()
	return cmd.Run()
}

// Create implements pool.Provider.
func (p *Provider) Create(ctx context.Context, spec pool.Spec) (*pool.Sandbox, error) {
	return p.boot(ctx, spec, "")
}

// Restore implements pool.Snapshotter.
func (p *Provider) Restore(ctx context.Context, snap string, spec pool.Spec) (*pool.Sandbox, error) {
	p.mu.Lock()
	dir, ok := p.snaps[snap]
	p.mu.Unlock()
	if !ok {
		return nil, notFound("snapshot", snap)
	}
	return p.boot(ctx, spec, dir)
}

// Fork implements pool.Forker: n sandboxes restored from snap, booted
// concurrently (at most MaxConcurrentBoots at once). On any failure the
// sandboxes already made are destroyed.
func (p *Provider) Fork(ctx context.Context, snap string, n int, spec pool.Spec) ([]*pool.Sandbox, error) {
	if n < 1 {
		return nil, aci.Errorf(aci.CodeBadRequest, "fork: n must be at least 1; got %d", n)
	}
	out := make([]*pool.Sandbox, n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(p.opts.MaxConcurrentBoots)
	for i := range n {
		g.Go(func() error {
			sb, err := p.Restore(gctx, snap, spec)
			out[i] = sb
			return err
		})
	}
	if err := g.Wait(); err != nil {
		for _, sb := range out {
			if sb != nil {
				_ = p.Destroy(context.WithoutCancel(ctx), sb.ID)
			}
		}
		return nil, err
	}
	return out, nil
}

func notFound(what, id string) error {
	return pool.Errorf(pool.ErrNotFound, aci.CodeNotFound, "process: %s %q not found", what, id)
}

// boot starts one sandbox, seeded from the snapshot directory seed when it
// is not empty, and returns once its guest answered hello.
func (p *Provider) boot(ctx context.Context, spec pool.Spec, seed string) (_ *pool.Sandbox, err error) {
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return nil, pool.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.BootTimeout)
	defer cancel()

	display, err := p.displays.acquire()
	if err != nil {
		return nil, err
	}
	id := fmt.Sprintf("px%s-%d", filepath.Base(p.runDir), p.seq.Add(1))
	dir := filepath.Join(p.runDir, "sandboxes", id)
	b := &box{dir: dir, display: display, dead: make(chan struct{})}
	defer func() {
		if err != nil {
			b.sb = nil // the error carries the log tail already
			p.teardown(b)
		}
	}()
	uid, gid := -1, -1
	if p.uids != nil {
		if uid, err = p.uids.acquire(); err != nil {
			return nil, err
		}
		gid = uid
		b.uid = uid
	}
	if p.confined {
		if err := mountState(dir, p.opts.StateBytes); err != nil {
			return nil, fmt.Errorf("process: sandbox state: %w", err)
		}
		b.state = true
	}
	if err := makeDirs(ctx, dir, seed, uid, gid, p.opts.SnapshotBytes); err != nil {
		return nil, fmt.Errorf("process: sandbox dirs: %w", err)
	}
	if p.cgroups != nil {
		lim := cgroupLimits{memory: p.opts.MemoryBytes, pids: int64(p.opts.NProc), cpus: p.opts.CPUs,
			cpuWeight: p.opts.CPUWeight, ioWeight: p.opts.IOWeight}
		if spec.MemoryBytes > 0 {
			lim.memory = spec.MemoryBytes
		}
		if spec.Pids > 0 {
			lim.pids = int64(spec.Pids)
		}
		lim.agentPids = lim.pids - min(guestPids, lim.pids/4)
		if b.cg, err = p.cgroups.create("shinken-"+id, lim); err != nil {
			return nil, fmt.Errorf("process: sandbox %s: %w", id, err)
		}
	}
	cmd, err := p.command(spec, b, seed != "", uid, gid)
	if err != nil {
		return nil, err
	}
	var gate *os.File
	if b.cg != nil {
		gr, gw, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("process: %w", err)
		}
		cmd.ExtraFiles = []*os.File{gr}
		defer gr.Close()
		gate = gw
		defer gate.Close() // opens the gate, or ends a failed boot's init
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		return nil, fmt.Errorf("process: %w", err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return nil, fmt.Errorf("process: start sandbox: %w", err)
	}
	b.cmd = cmd
	if b.cg != nil {
		// The init waits for this (see initConfig.Gate) before it starts
		// anything: every process of the sandbox is born in its cgroup.
		if err := b.cg.enter(cmd.Process.Pid); err != nil {
			return nil, fmt.Errorf("process: sandbox cgroups: %w", err)
		}
		if b.unwatch, err = b.cg.watch(func(reason string) { p.limitKill(b, reason) }); err != nil {
			return nil, fmt.Errorf("process: sandbox cgroups: %w", err)
		}
		gate.Close()
	}
	if p.confined {
		b.pidNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", cmd.Process.Pid))
	}
	if err := writePidFile(filepath.Join(dir, "pid"), cmd.Process.Pid); err != nil {
		return nil, fmt.Errorf("process: %w", err)
	}
	go func() {
		b.exitErr = cmd.Wait()
		close(b.dead)
	}()
	addr := b.guestSock()
	if len(addr) > maxSockPath && p.confined {
		// A unix socket path is limited to 108 bytes; a deep state root
		// exceeds it. Reach the same socket through the init's root, which
		// is the sandbox's own mount namespace.
		addr = fmt.Sprintf("/proc/%d/root%s/guest.sock", cmd.Process.Pid, sandboxRun)
	}
	b.sb = &pool.Sandbox{
		ID:           id,
		GuestNetwork: "unix",
		GuestAddr:    addr,
		Display:      display,
		Dead:         b.dead,
		LimitHit:     b.limitHit,
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, pool.ErrClosed
	}
	p.boxes[id] = b
	p.mu.Unlock()

	if err := awaitHello(ctx, b.sb.GuestAddr, b.dead); err != nil {
		p.mu.Lock()
		delete(p.boxes, id)
		p.mu.Unlock()
		return nil, fmt.Errorf("process: sandbox %s not ready: %w%s%s", id, err, logTail(filepath.Join(dir, "log")),
			logTail(filepath.Join(dir, "run", "session", "wm.log")))
	}
	return b.sb, nil
}

// Destroy implements pool.Provider: it kills the sandbox's PID 1 (the
// kernel then kills everything in its pid namespace), waits until it is
// reaped, then frees its display and removes its directory. Unknown ids
// are not an error.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	p.mu.Lock()
	b := p.boxes[id]
	delete(p.boxes, id)
	p.mu.Unlock()
	if b == nil {
		return nil
	}
	return p.teardownCtx(ctx, b)
}

// teardown ends b with a fixed deadline (used on boot failure).
func (p *Provider) teardown(b *box) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.teardownCtx(ctx, b); err != nil {
		p.opts.Logf("process: teardown %s: %v", b.dir, err)
	}
}

func (p *Provider) teardownCtx(ctx context.Context, b *box) error {
	if b.cmd != nil && b.sb != nil {
		select {
		case <-b.dead:
			// It ended on its own: keep the cause before its log goes.
			p.opts.Logf("process: sandbox %s had ended by itself (%v)%s", b.sb.ID, b.exitErr, logTail(filepath.Join(b.dir, "log")))
		default:
		}
	}
	if b.cmd != nil {
		pid := b.cmd.Process.Pid
		if b.cg != nil {
			b.cg.thaw() // frozen processes cannot die
		}
		// Through the process handle (a pidfd): once the init is reaped its
		// pid may be another process's, which a kill by number would hit.
		_ = b.cmd.Process.Kill()
		select {
		case <-b.dead:
		default:
			if !p.confined {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
		select {
		case <-b.dead:
		case <-ctx.Done():
			// The display stays reserved: teardown was not confirmed.
			return fmt.Errorf("process: destroy %s: %w", filepath.Base(b.dir), ctx.Err())
		}
		if !p.confined {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			cleanStaleX(os.TempDir(), b.display)
		}
	}
	if b.unwatch != nil {
		b.unwatch()
	}
	if b.cg != nil {
		if err := b.cg.remove(); err != nil {
			p.opts.Logf("process: sandbox %s: cgroups: %v", filepath.Base(b.dir), err)
		}
	}
	var err error
	if b.state {
		err = unmountState(b.dir)
	}
	if rerr := os.RemoveAll(b.dir); err == nil {
		err = rerr
	}
	p.displays.release(b.display)
	if b.uid != 0 {
		// Nothing runs as it any more: the pid namespace is gone.
		p.uids.release(b.uid)
	}
	if err != nil {
		return fmt.Errorf("process: remove sandbox dir: %w", err)
	}
	return nil
}

// Alive implements pool.Provider.
func (p *Provider) Alive(ctx context.Context, id string) error {
	p.mu.Lock()
	b := p.boxes[id]
	p.mu.Unlock()
	if b == nil {
		return notFound("sandbox", id)
	}
	select {
	case <-b.dead:
		if r := b.limitHit(); r != "" {
			return pool.WithDetail(pool.Errorf(pool.ErrSandboxDied, aci.CodeSandboxDied, "process: sandbox %s killed at its %s limit (init exited: %v)", id, r, b.exitErr),
				map[string]any{"reason": r})
		}
		return pool.Errorf(pool.ErrSandboxDied, aci.CodeSandboxDied, "process: sandbox %s died (init exited: %v)", id, b.exitErr)
	default:
		return nil
	}
}

// InitPID returns the host pid of a sandbox's PID 1 (guestd), or 0.
func (p *Provider) InitPID(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b := p.boxes[id]; b != nil && b.cmd != nil {
		return b.cmd.Process.Pid
	}
	return 0
}

// SandboxDir returns the host directory holding a sandbox's writable dirs
// (home, workspace, tmp), or "" for an unknown id.
func (p *Provider) SandboxDir(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b := p.boxes[id]; b != nil {
		return b.dir
	}
	return ""
}

// PIDNamespace returns the sandbox's pid namespace as /proc/<pid>/ns/pid
// reads ("pid:[…]"), or "" when unknown or unconfined. Tests use it to
// prove that nothing of a destroyed sandbox is left running.
func (p *Provider) PIDNamespace(id string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if b := p.boxes[id]; b != nil {
		return b.pidNS
	}
	return ""
}

// Close implements pool.Provider: every sandbox is destroyed, every
// snapshot removed, and the run directory released.
func (p *Provider) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	boxes := p.boxes
	p.boxes = map[string]*box{}
	p.snaps = map[string]string{}
	p.mu.Unlock()
	var errs []error
	for _, b := range boxes {
		if err := p.teardownCtx(ctx, b); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		p.releaseRun()
	}
	return errors.Join(errs...)
}

// logTail returns the end of a sandbox's log, for boot errors.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 800 {
		b = b[len(b)-800:]
	}
	return "; log: " + strings.TrimSpace(string(b))
}
