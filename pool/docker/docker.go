// Package docker is the container provider: every sandbox is a container of
// the locally built sandbox image (images/build.sh; no registry), run with no
// network and pids/memory/shm limits; guestd is its PID 1 (root with a few
// capabilities) and the desktop runs as the unprivileged agent user.
// guestd is bind-mounted read-only from the host and reached through a unix
// socket in a per-container host directory bind-mounted at /run/shinken.
//
// Every container and snapshot image carries labels naming the server
// instance and this run; New removes what an earlier run of the same instance
// left behind, and Close removes everything this run created.
//
// The container's root filesystem is read-only; the agent's home and /tmp
// are size-bounded tmpfs mounts, its only writable state. Snapshots (disk
// tier) copy those two trees, with the container paused, through the
// descriptor walk of pool/internal/safecopy (never a link followed, holes
// kept, bytes capped) into a directory of the provider's state dir; Restore
// and Fork start containers of the base image that copy the snapshot into
// their fresh tmpfs before guestd starts and relaunches the apps it had
// recorded. A snapshot's directory is removed once DeleteSnapshot was called
// and no container started from it remains.
package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	dockerclient "github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/images"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/internal/safecopy"
)

// Labels put on every container and snapshot image this package creates.
const (
	LabelManaged  = "org.shinken.managed"  // "true"
	LabelInstance = "org.shinken.instance" // Options.Instance
	LabelRun      = "org.shinken.run"      // random per New
	// LabelOwner names the server process that made it: its pid
	// namespace, pid and start time (ownerLabel). Any server's start
	// removes what a dead owner of its own pid namespace left.
	LabelOwner = "org.shinken.owner"
)

// Paths inside the container.
const (
	guestdPath = "/opt/shinken/guestd"
	sockDir    = "/run/shinken"
	sockName   = "guest.sock"
	agentHome  = "/home/agent"
)

// Defaults for a zero Spec field or Option.
const (
	DefaultMemory       = 2 << 30
	DefaultPids         = 1024
	DefaultShm          = 256 << 20
	DefaultReadyTimeout = 60 * time.Second
	DefaultUID          = 1000 // base of the agents' uids (see agentUID: they start at UID+100000)
	DefaultCPUs         = 1    // CPUs one sandbox may use: one agent's busy loop cannot starve the others
	DefaultHomeBytes    = 1 << 30
	DefaultTmpBytes     = 512 << 20
	DefaultLogBytes     = 1 << 20 // per log file; two files are kept
)

// seedDir is where a restored container finds its snapshot (read-only).
const seedDir = "/opt/shinken/seed"

// validInstance is what a container name allows, bounded.
var validInstance = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$`)

// ErrNoEngine is returned by New when no Docker engine answers.
var ErrNoEngine = errors.New("no docker engine")

// ErrNoImage is returned by New when the sandbox image is not built.
var ErrNoImage = errors.New("docker image not built: run make image")

// Options configure a Provider.
type Options struct {
	// GuestdPath is the host path of a static (CGO_ENABLED=0) guestd binary,
	// mounted read-only into every container; "" means "guestd" next to the
	// executable, else on PATH.
	GuestdPath string
	// Image is the sandbox image; "" means images.Ref(), the current recipe.
	Image string
	// Instance names this server instance on the engine. New removes the
	// containers and images of earlier runs of the same instance, so two live
	// servers on one engine need different names. "" means "default".
	Instance string
	// StateDir holds the per-container socket dirs. It belongs to this
	// instance: New empties it of earlier runs' dirs. "" means a fresh
	// directory under os.TempDir(), removed by Close. Keep it short: a unix
	// socket path is limited to 107 bytes.
	StateDir string
	// UID is the base of the agents' uids: container n's agent runs as
	// UID + uidStride*n, its verifiers as that + 1; 0 means DefaultUID.
	UID int
	// ReadyTimeout bounds a container's boot up to guestd's hello when the
	// caller's ctx has no earlier deadline; 0 means DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// CPUs bounds the CPU time of one container (NanoCPUs); 0 means
	// DefaultCPUs.
	CPUs float64
	// HomeBytes and TmpBytes size the tmpfs mounts of the agent's home and
	// /tmp, its only writable state (the root filesystem is read-only);
	// 0 means DefaultHomeBytes and DefaultTmpBytes. tmpfs pages count
	// against the container's memory limit too.
	HomeBytes, TmpBytes int64
	// SnapshotBytes caps what one snapshot copies (file data, holes not
	// counted, plus 512 bytes per entry); a container holding more fails
	// Snapshot with code too_large. 0 means 4 GiB; negative means no cap.
	SnapshotBytes int64
	// Client talks to the engine; nil means one from the environment
	// (DOCKER_HOST etc.) with API version negotiation. The engine must run
	// on this host: snapshots read a paused container's tmpfs through
	// /proc.
	Client *dockerclient.Client
}

// Provider implements pool.Provider, pool.Snapshotter and pool.Forker over a
// Docker engine. Safe for concurrent use.
type Provider struct {
	cli      *dockerclient.Client
	ownCli   bool
	opts     Options
	seccomp  string // the engine's default seccomp profile, as JSON
	run      string
	owner    string // LabelOwner of what it makes
	stateDir string

	watchCtx    context.Context // ends the watchers on Close
	watchCancel context.CancelFunc
	watchers    sync.WaitGroup

	gcMu sync.Mutex // serializes snapshot collection so an image is removed once

	mu     sync.Mutex
	closed bool
	seq    int
	boxes  map[string]*box
	snaps  map[string]*snapshot
}

// box is one container this provider created.
type box struct {
	sb   *pool.Sandbox
	dir  string // host socket dir
	from string // snapshot id it was started from, "" for the base image
	dead chan struct{}
	once sync.Once
}

func (b *box) markDead() { b.once.Do(func() { close(b.dead) }) }

// New connects to the engine, checks the image, and removes what earlier runs
// of the same instance left behind.
func New(ctx context.Context, opts Options) (*Provider, error) {
	guestd, err := findGuestd(opts.GuestdPath)
	if err != nil {
		return nil, err
	}
	opts.GuestdPath = guestd
	if opts.Image == "" {
		opts.Image = images.Ref()
	}
	if opts.Instance == "" {
		opts.Instance = "default"
	}
	if !validInstance.MatchString(opts.Instance) {
		return nil, fmt.Errorf("docker provider: instance %q: want [a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}", opts.Instance)
	}
	if opts.UID == 0 {
		opts.UID = DefaultUID
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.CPUs == 0 {
		opts.CPUs = DefaultCPUs
	}
	if opts.CPUs < 0.01 {
		return nil, fmt.Errorf("docker provider: cpus %v: want at least 0.01", opts.CPUs)
	}
	if opts.HomeBytes == 0 {
		opts.HomeBytes = DefaultHomeBytes
	}
	if opts.TmpBytes == 0 {
		opts.TmpBytes = DefaultTmpBytes
	}
	if opts.SnapshotBytes == 0 {
		opts.SnapshotBytes = safecopy.DefaultMax
	}
	seccomp, err := defaultSeccomp()
	if err != nil {
		return nil, err
	}
	p := &Provider{
		cli:     opts.Client,
		opts:    opts,
		seccomp: seccomp,
		run:     randomID(),
		owner:   ownerLabel(),
		boxes:   make(map[string]*box),
		snaps:   make(map[string]*snapshot),
	}
	if p.cli == nil {
		cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("docker provider: %w: %w", ErrNoEngine, err)
		}
		p.cli, p.ownCli = cli, true
	}
	fail := func(err error) (*Provider, error) {
		if p.ownCli {
			p.cli.Close()
		}
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err = p.cli.Ping(pctx)
	cancel()
	if err != nil {
		return fail(fmt.Errorf("docker provider: %w: %w", ErrNoEngine, err))
	}
	if _, err := p.cli.ImageInspect(ctx, opts.Image); err != nil {
		if cerrdefs.IsNotFound(err) {
			return fail(fmt.Errorf("docker provider: %s: %w", opts.Image, ErrNoImage))
		}
		return fail(fmt.Errorf("docker provider: inspect image %s: %w", opts.Image, err))
	}
	if err := p.sweep(ctx, false); err != nil {
		return fail(fmt.Errorf("docker provider: sweep orphans: %w", err))
	}
	p.stateDir = opts.StateDir
	if p.stateDir != "" {
		// The engine bind-mounts from here: it needs an absolute path.
		abs, err := filepath.Abs(p.stateDir)
		if err != nil {
			return fail(fmt.Errorf("docker provider: state dir: %w", err))
		}
		p.stateDir = abs
	}
	if p.stateDir == "" {
		d, err := os.MkdirTemp("", "shinken-docker-")
		if err != nil {
			return fail(fmt.Errorf("docker provider: state dir: %w", err))
		}
		p.stateDir = d
	} else if err := resetDir(p.stateDir); err != nil {
		return fail(fmt.Errorf("docker provider: state dir: %w", err))
	}
	if err := os.Mkdir(filepath.Join(p.stateDir, "snapshots"), 0o700); err != nil {
		return fail(fmt.Errorf("docker provider: state dir: %w", err))
	}
	if n := len(filepath.Join(p.stateDir, p.run+"-000000", sockName)); n > 107 {
		return fail(fmt.Errorf("docker provider: state dir %q too long for a unix socket path (%d > 107 bytes)", p.stateDir, n))
	}
	p.watchCtx, p.watchCancel = context.WithCancel(context.Background())
	return p, nil
}

// findGuestd resolves the guestd binary to an absolute path (a bind mount
// source must be one).
func findGuestd(path string) (string, error) {
	if path == "" {
		if exe, err := os.Executable(); err == nil {
			if cand := filepath.Join(filepath.Dir(exe), "guestd"); isFile(cand) {
				path = cand
			}
		}
	}
	if path == "" {
		p, err := exec.LookPath("guestd")
		if err != nil {
			return "", fmt.Errorf("docker provider: guestd not found next to the executable or on PATH; set Options.GuestdPath: %w", err)
		}
		path = p
	}
	if !isFile(path) {
		return "", fmt.Errorf("docker provider: guestd %q is not a file", path)
	}
	return filepath.Abs(path)
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// resetDir creates dir, or empties it of what earlier runs left.
func resetDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// InstanceFor names the instance of a server whose state lives in stateDir:
// a restart with the same state dir sweeps its crashed predecessor's
// containers, and servers with different state dirs leave each other alone.
func InstanceFor(stateDir string) string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	sum := sha256.Sum256([]byte(abs))
	return "srv-" + hex.EncodeToString(sum[:6])
}

func randomID() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run returns this run's label value, which marks everything it created.
func (p *Provider) Run() string { return p.run }

// Instance returns the instance name the provider labels with.
func (p *Provider) Instance() string { return p.opts.Instance }

// Capabilities reports what this provider does: disk snapshots by docker
// commit, restore and fork from them, no resume of process memory.
func (p *Provider) Capabilities() pool.Capabilities {
	return pool.Capabilities{
		Provider:     "docker",
		SnapshotKind: pool.SnapshotDisk,
		Snapshot:     true,
		Restore:      true,
		Fork:         true,
		Resume:       false,
		Confined:     true,
		A11y:         images.HasPackage("at-spi2-core") && images.HasPackage("dbus"),
		Isolation: "read-only container rootfs of the sandbox image only (no host files); home and /tmp are size-bounded tmpfs; " +
			"the engine's default seccomp profile, no-new-privileges; guestd is PID 1, root with 8 capabilities; " +
			"the agent runs as a uid of its own per container (above 100000); on done every other process is stopped (SIGSTOP sweep) and the verifier " +
			"runs as the next uid with its own HOME; the guest socket is root's",
		Notes: "snapshot = a copy of home and /tmp taken with the container paused (links never followed, holes kept, bytes capped); " +
			"in-memory app state is not carried, recorded apps are relaunched; --network none, " +
			"pids/memory/shm/CPU limits, capped logs; guestd is PID 1 (root, 8 capabilities), the desktop runs as the agent's uid, " +
			"verifiers as their own uid after the agent's processes are stopped; the guest socket is root's",
		Confinement: &pool.Confinement{
			Namespaces:   []string{"pid", "mount", "ipc", "net", "uts"},
			UIDs:         "per_sandbox",
			NoNewPrivs:   true,
			ReadOnlyRoot: true,
			Dev:          "private",
			Cgroup:       "engine",
			Seccomp:      "default",
			Limits: map[string]int64{
				"memory_bytes":   DefaultMemory,
				"pids":           DefaultPids,
				"cpu_millis":     int64(p.opts.CPUs * 1000),
				"state_bytes":    p.opts.HomeBytes + p.opts.TmpBytes,
				"snapshot_bytes": max(p.opts.SnapshotBytes, 0),
				"log_bytes":      2 * DefaultLogBytes,
			},
		},
	}
}

// Create starts a container of the base image and returns once its guestd
// has answered hello.
func (p *Provider) Create(ctx context.Context, spec pool.Spec) (*pool.Sandbox, error) {
	return p.start(ctx, "", spec)
}

// start creates, starts and probes one container of the image, seeded from
// snapshot snap ("" for none).
func (p *Provider) start(ctx context.Context, snap string, spec pool.Spec) (*pool.Sandbox, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, pool.ErrClosed
	}
	p.seq++
	seq := p.seq
	name := fmt.Sprintf("shinken-%s-%s-%d", p.opts.Instance, p.run, seq)
	seed := ""
	if snap != "" {
		s, ok := p.snaps[snap]
		if !ok || s.deleted {
			p.mu.Unlock()
			return nil, fmt.Errorf("docker provider: snapshot %s: %w", snap, pool.ErrNotFound)
		}
		s.refs++ // held while starting; handed to the box or dropped below
		seed = s.dir
	}
	p.mu.Unlock()
	release := func() {
		if snap != "" {
			p.mu.Lock()
			p.snaps[snap].refs--
			p.mu.Unlock()
			p.collect(context.WithoutCancel(ctx))
		}
	}

	dir := filepath.Join(p.stateDir, fmt.Sprintf("%s-%d", p.run, seq))
	if err := os.Mkdir(dir, 0o711); err != nil {
		release()
		return nil, fmt.Errorf("docker provider: socket dir: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil { // past the umask
		release()
		return nil, fmt.Errorf("docker provider: socket dir: %w", err)
	}
	// The socket dir stays root's: guestd (root in the container) serves the
	// host there, and the agent's uid can neither connect (the socket is
	// 0600), list it nor swap the socket. It can pass through it (0711) to
	// the session's directory guestd keeps there (the bus's configuration,
	// the window manager's), which the desktop's processes read.

	cfg, hcfg := p.containerConfig(spec, dir, seed, p.agentUID(seq))
	created, err := p.cli.ContainerCreate(ctx, cfg, hcfg, nil, nil, name)
	if err != nil {
		os.RemoveAll(dir)
		release()
		return nil, fmt.Errorf("docker provider: create container: %w", err)
	}
	b := &box{
		sb: &pool.Sandbox{
			ID:           created.ID,
			GuestNetwork: "unix",
			GuestAddr:    filepath.Join(dir, sockName),
			Display:      0,
		},
		dir:  dir,
		from: snap,
		dead: make(chan struct{}),
	}
	b.sb.Dead = b.dead
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.removeContainer(context.WithoutCancel(ctx), created.ID)
		os.RemoveAll(dir)
		release()
		return nil, pool.ErrClosed
	}
	p.boxes[created.ID] = b
	p.mu.Unlock()

	if err := p.boot(ctx, b); err != nil {
		p.Destroy(context.WithoutCancel(ctx), created.ID)
		return nil, err
	}
	return b.sb, nil
}

// containerConfig builds the container's config: guestd in session mode as
// the unprivileged user, no network, a read-only root with tmpfs home and
// /tmp, limits, seccomp, capped logs, and the bind mounts (the socket dir,
// guestd, and the snapshot seed when restoring from one).
func (p *Provider) containerConfig(spec pool.Spec, dir, seed string, agentUID int) (*container.Config, *container.HostConfig) {
	relaunch := seed != ""
	mem := spec.MemoryBytes
	if mem == 0 {
		mem = DefaultMemory
	}
	pids := int64(spec.Pids)
	if pids == 0 {
		pids = DefaultPids
	}
	argv := append([]string{guestdPath}, spec.SessionArgs(":0", "unix:"+sockDir+"/"+sockName, agentHome+"/.shinken", relaunch)...)
	uid := strconv.Itoa(agentUID)
	scorer := strconv.Itoa(agentUID + 1)
	helper := strconv.Itoa(agentUID + 2)
	argv = append(argv, "--agent-uid", uid, "--agent-gid", uid, "--scorer-uid", scorer, "--scorer-gid", scorer, "--helper-uid", helper, "--helper-gid", helper)
	// The desktop and the agent share the container's one cgroup: the
	// agent's processes run SCHED_IDLE, so a fork bomb or a spinner cannot
	// starve the X server into a sandbox_died (a free retry).
	argv = append(argv, "--agent-idle")
	// home and /tmp are fresh tmpfs: a restored container first copies its
	// snapshot in (cp -a: links stay links, holes stay holes; a snapshot
	// never holds X locks or sockets). The agent's files become this
	// container's agent uid's: containers share the host's uid space, and a
	// uid of its own keeps one sandbox's process count (RLIMIT_NPROC) and
	// files out of every other's.
	script := `set -e; mkdir -p -m 1777 /tmp/.X11-unix; chmod 1777 /tmp/.X11-unix; ` +
		`if [ -d ` + seedDir + `/home ]; then cp -a ` + seedDir + `/home/. ` + agentHome + `/; cp -a ` + seedDir + `/tmp/. /tmp/; fi; ` +
		`chown -R ` + uid + `:` + uid + ` ` + agentHome + `; exec "$@"`
	// guestd is the container's PID 1 (it reaps, and as PID 1 its scoring
	// freeze sees every process) and stays root with a few capabilities;
	// the desktop runs as the agent's uid, verifiers as the next uid.
	init := false
	nproc := pids / 2 // per uid: the agent's fork bomb leaves room for the scorer and guestd
	cfg := &container.Config{
		Image:           p.opts.Image,
		User:            "0:0",
		Entrypoint:      []string{"/bin/sh", "-c", script, "sh"},
		Cmd:             argv,
		Env:             []string{"HOME=" + agentHome, "USER=agent", "LANG=C.UTF-8"},
		WorkingDir:      agentHome,
		NetworkDisabled: true,
		Labels: map[string]string{
			LabelManaged:  "true",
			LabelInstance: p.opts.Instance,
			LabelRun:      p.run,
			LabelOwner:    p.owner,
		},
	}
	hcfg := &container.HostConfig{
		NetworkMode: "none",
		Init:        &init,
		ShmSize:     DefaultShm,
		CapDrop:     []string{"ALL"},
		// SYS_PTRACE: guestd reads what the desktop's threads are blocked in
		// to end a settle early (guest/quiesce.go); the container's pid
		// namespace holds only its own processes.
		CapAdd: []string{"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "KILL", "SETGID", "SETUID", "SYS_PTRACE"},
		// The engine's default seccomp profile, passed explicitly so no
		// daemon setting can replace it (never unconfined).
		SecurityOpt:    []string{"no-new-privileges", "seccomp=" + p.seccomp},
		ReadonlyRootfs: true,
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{
			"max-size": strconv.Itoa(DefaultLogBytes), "max-file": "2"}},
		Resources: container.Resources{
			Memory:     mem,
			MemorySwap: mem, // no swap beyond the limit
			PidsLimit:  &pids,
			NanoCPUs:   int64(p.opts.CPUs * 1e9),
			Ulimits: []*container.Ulimit{
				{Name: "nproc", Soft: nproc, Hard: nproc},
				// No single file beyond the writable state's size.
				{Name: "fsize", Soft: max(p.opts.HomeBytes, p.opts.TmpBytes), Hard: max(p.opts.HomeBytes, p.opts.TmpBytes)},
			},
		},
		Mounts: []mount.Mount{
			{Type: mount.TypeBind, Source: dir, Target: sockDir},
			{Type: mount.TypeBind, Source: p.opts.GuestdPath, Target: guestdPath, ReadOnly: true},
		},
		// The agent's writable state: bounded, nosuid, nodev; exec kept
		// (an agent may run the scripts it writes, as on the process
		// provider).
		Tmpfs: map[string]string{
			agentHome: fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,mode=0755", p.opts.HomeBytes),
			"/tmp":    fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,mode=1777", p.opts.TmpBytes),
		},
	}
	if seed != "" {
		hcfg.Mounts = append(hcfg.Mounts, mount.Mount{Type: mount.TypeBind, Source: seed, Target: seedDir, ReadOnly: true})
	}
	return cfg, hcfg
}

// boot starts the container, watches it, and waits for guestd's hello.
func (p *Provider) boot(ctx context.Context, b *box) error {
	id := b.sb.ID
	if err := p.cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return fmt.Errorf("docker provider: start container: %w", err)
	}
	p.watch(b)
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.opts.ReadyTimeout)
		defer cancel()
	}
	if err := p.waitReady(ctx, b); err != nil {
		return fmt.Errorf("docker provider: container %.12s not ready: %w", id, err)
	}
	return nil
}

// watch closes b.dead when the container stops or disappears. The watcher is
// owned by the provider and ends on Close.
func (p *Provider) watch(b *box) {
	p.watchers.Add(1)
	go func() {
		defer p.watchers.Done()
		okc, errc := p.cli.ContainerWait(p.watchCtx, b.sb.ID, container.WaitConditionNotRunning)
		select {
		case <-okc:
			b.markDead()
		case err := <-errc:
			if p.watchCtx.Err() == nil || cerrdefs.IsNotFound(err) {
				b.markDead()
			}
		}
	}()
}

// waitReady polls for guestd's socket (the dir is fresh per container, so the
// socket's presence means guestd listens) and then performs hello.
func (p *Provider) waitReady(ctx context.Context, b *box) error {
	backoff := 5 * time.Millisecond
	for {
		if _, err := os.Stat(b.sb.GuestAddr); err == nil {
			c, err := client.Dial(ctx, "unix", b.sb.GuestAddr)
			if err == nil {
				c.Close()
				return nil
			}
			if ctx.Err() != nil {
				return err
			}
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w%s", ctx.Err(), p.logTail(b.sb.ID))
		case <-b.dead:
			t.Stop()
			return fmt.Errorf("%w: container exited during boot%s", pool.ErrSandboxDied, p.logTail(b.sb.ID))
		case <-t.C:
		}
		if backoff < 100*time.Millisecond {
			backoff *= 2
		}
	}
}

// Destroy removes the container and its socket dir. It is idempotent and
// retries transient engine errors.
func (p *Provider) Destroy(ctx context.Context, id string) error {
	p.mu.Lock()
	b, ok := p.boxes[id]
	p.mu.Unlock()
	if !ok {
		return nil
	}
	if err := p.removeContainer(ctx, id); err != nil {
		return err
	}
	b.markDead()
	os.RemoveAll(b.dir)
	p.mu.Lock()
	_, still := p.boxes[id]
	delete(p.boxes, id)
	if still && b.from != "" {
		if s, ok := p.snaps[b.from]; ok {
			s.refs--
		}
	}
	p.mu.Unlock()
	if still && b.from != "" {
		p.collect(ctx)
	}
	return nil
}

// Alive reports whether the container still runs.
func (p *Provider) Alive(ctx context.Context, id string) error {
	p.mu.Lock()
	b, ok := p.boxes[id]
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("docker provider: %.12s: %w", id, pool.ErrNotFound)
	}
	select {
	case <-b.dead:
		return fmt.Errorf("docker provider: container %.12s stopped: %w", id, pool.ErrSandboxDied)
	default:
	}
	st, err := p.cli.ContainerInspect(ctx, id)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			b.markDead()
			return fmt.Errorf("docker provider: container %.12s gone: %w", id, pool.ErrSandboxDied)
		}
		return fmt.Errorf("docker provider: inspect %.12s: %w", id, err)
	}
	if st.State == nil || !st.State.Running {
		b.markDead()
		return fmt.Errorf("docker provider: container %.12s stopped: %w", id, pool.ErrSandboxDied)
	}
	return nil
}

// Close removes every container and snapshot image this run created, ends
// the watchers and removes the state dir.
func (p *Provider) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	ids := make([]string, 0, len(p.boxes))
	for id := range p.boxes {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	var errs []error
	for _, id := range ids {
		errs = append(errs, p.Destroy(ctx, id))
	}
	p.watchCancel()
	p.watchers.Wait()
	// Whatever is left with this run's label (snapshot images, a container
	// whose create raced Close) goes too.
	errs = append(errs, p.sweep(ctx, true))
	p.mu.Lock()
	clear(p.snaps)
	p.mu.Unlock()
	errs = append(errs, os.RemoveAll(filepath.Join(p.stateDir, "snapshots")))
	if p.opts.StateDir == "" {
		errs = append(errs, os.RemoveAll(p.stateDir))
	}
	if p.ownCli {
		errs = append(errs, p.cli.Close())
	}
	return errors.Join(errs...)
}

// logTail returns the last lines of a container's output, for boot errors.
func (p *Provider) logTail(id string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rc, err := p.cli.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "15"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var out bytes.Buffer
	stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 8<<10))
	s := strings.TrimSpace(out.String())
	if s == "" {
		return ""
	}
	return "; container output: " + s
}

// uidStride spaces the uids of successive containers (agent, scorer,
// window manager).
const uidStride = 3

// uidSpan is how many containers get distinct uids before they repeat:
// with the default base the triples fill [101000, 200000), below the range
// the process provider claims its pairs from (200000 up), so a container's
// agent never shares a uid (and its RLIMIT_NPROC count) with a process
// sandbox's agent or verifier on the same host.
const uidSpan = 33000

// agentUID is the agent's uid in the container of sequence number seq.
func (p *Provider) agentUID(seq int) int {
	return p.opts.UID + 100000 + uidStride*(seq%uidSpan)
}

// KillX SIGKILLs a sandbox's X server as the container's root (tests use
// it: the agent cannot).
func (p *Provider) KillX(ctx context.Context, id string) error {
	ex, err := p.cli.ContainerExecCreate(ctx, id, container.ExecOptions{User: "0", Cmd: []string{"sh", "-c", "kill -9 $(pidof Xvfb)"}})
	if err != nil {
		return fmt.Errorf("docker provider: kill X: %w", err)
	}
	if err := p.cli.ContainerExecStart(ctx, ex.ID, container.ExecStartOptions{Detach: true}); err != nil {
		return fmt.Errorf("docker provider: kill X: %w", err)
	}
	return nil
}

// untraceable are the syscalls the engine's default profile allows (on any
// recent kernel) and a sandbox does not: with them a process of the
// agent's could trace or rewrite the memory of processes of its uid it did
// not start (the desktop's buses and window manager, apps a task's setup
// launched). Nothing in a sandbox needs them (docs/architecture.md,
// "Reward integrity").
var untraceable = map[string]bool{"ptrace": true, "process_vm_readv": true, "process_vm_writev": true}

// defaultSeccomp is the engine's default seccomp profile, less the
// untraceable syscalls, as JSON, the form `--security-opt
// seccomp=<profile>` carries.
func defaultSeccomp() (string, error) {
	prof := seccomp.DefaultProfile()
	for i := range prof.Syscalls {
		sc := prof.Syscalls[i]
		if sc.Action != specs.ActAllow {
			continue
		}
		names := sc.Names[:0:0]
		for _, n := range sc.Names {
			if !untraceable[n] {
				names = append(names, n)
			}
		}
		sc.Names = names
	}
	b, err := json.Marshal(prof)
	if err != nil {
		return "", fmt.Errorf("docker provider: seccomp profile: %w", err)
	}
	return string(b), nil
}
