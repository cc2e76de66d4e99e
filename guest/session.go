package guest

import (
	"bufio"
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

	"golang.org/x/sys/unix"
)

// SessionConfig configures a desktop session: an Xvfb and a window manager
// that guestd starts and supervises.
type SessionConfig struct {
	// Display is the display to start (":N"); empty lets Xvfb pick a free one.
	Display string
	// Screen is WxHxDepth (default 1280x800x24).
	Screen string
	// WM is the window manager command (default "openbox"); "none" for none.
	WM string
	// Env is the environment for Xvfb and the WM (nil: this process's).
	Env []string
	// LogDir, when set, receives xvfb.log, wm.log and bus.log; otherwise
	// output is discarded. Like RunDir it must be guestd's own: a log in a
	// directory the agent writes would outlive the episode.
	LogDir string
	// RunDir is a directory of guestd's own that the agent can read but not
	// write (the guest socket's): the bus's configuration lives in it.
	// Empty: a temporary directory.
	RunDir string
	// WMAs is the identity the window manager and the buses run as (the
	// agent's); nil: this process's.
	WMAs *Identity
	// Helper, when set and distinct from WMAs, is an identity of the
	// desktop's own: the buses run as it, and an openbox window manager
	// too, with a configuration that starts nothing (wmconfig.go), outside
	// the agent's cgroups; they live through resets in place. Otherwise
	// they run as WMAs and a reset starts them afresh.
	Helper *Identity
	// WMCgroups are the cgroups the window manager is born in (the agent's).
	WMCgroups *AgentCgroups
	// A11y starts the session's D-Bus session bus and AT-SPI bus (bus.go)
	// before the WM; where they cannot start the session runs without.
	A11y bool
	// GLX offers OpenGL (Mesa's software renderer) to the session's
	// clients. Off, Xvfb runs with -extension GLX: loading Mesa costs
	// about 35 ms of CPU at every boot and some 50 MiB of memory, and no
	// shipped app draws with OpenGL (docs/architecture.md, "Bursts").
	GLX bool
	// Logf logs; nil is silent.
	Logf func(format string, args ...any)
}

// Session is a running desktop: Xvfb plus an optional window manager, each
// leading its own process group.
type Session struct {
	display string
	xpid    int
	wmpid   int
	xAlive  atomic.Bool
	wmAlive atomic.Bool
	xDone   chan struct{}
	wmDone  chan struct{}
	once    sync.Once
	cfg     SessionConfig // as started, defaults filled in
	mu      sync.Mutex    // wmpid, wmDone and bus, which Restart replaces
	bus     *Bus
}

// StartSession starts Xvfb and the window manager and returns once the X
// server answers a connection and the WM serves it (wmServing): readiness
// is probed, never slept for. ctx
// bounds the start-up; on failure everything started is ended.
func StartSession(ctx context.Context, cfg SessionConfig) (*Session, error) {
	if cfg.Screen == "" {
		cfg.Screen = "1280x800x24"
	}
	if cfg.WM == "" {
		cfg.WM = "openbox"
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
	}
	xvfb, err := exec.LookPath("Xvfb")
	if err != nil {
		return nil, fmt.Errorf("guest: session: %w", err)
	}
	s := &Session{xDone: make(chan struct{})}
	args := []string{"Xvfb"}
	var dfdR *os.File
	if cfg.Display != "" {
		args = append(args, cfg.Display)
	}
	// -noreset: the readiness probe is the first client, and the reset its
	// disconnect would cause refuses the window manager connecting then.
	// -shmem: the framebuffer in a shared segment that captures read
	// directly (framebuffer.go), made private below before any app runs.
	args = append(args, "-screen", "0", cfg.Screen, "-nolisten", "tcp", "-noreset", "-shmem")
	if !cfg.GLX {
		args = append(args, "-extension", "GLX")
	}
	cmd := &exec.Cmd{Path: xvfb, Env: cfg.Env}
	if cfg.Display == "" {
		// Xvfb picks a free display and writes its number once it listens.
		// (Its abstract socket is what makes that pick exclusive, so it
		// stays enabled: no -nolisten local.)
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		dfdR = r
		defer r.Close()
		defer w.Close()
		cmd.ExtraFiles = []*os.File{w}
		args = append(args, "-displayfd", "3")
	}
	cmd.Args = args
	logf, err := logFile(cfg.LogDir, "xvfb.log")
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	xpid, xwait, err := startChild(cmd)
	logf.Close()
	if err != nil {
		return nil, fmt.Errorf("guest: start Xvfb: %w", err)
	}
	s.xpid = xpid
	s.xAlive.Store(true)
	started := make(chan struct{}) // s.display is set
	go func() {
		ws := <-xwait
		s.xAlive.Store(false)
		cfg.Logf("guest: Xvfb (pid %d) exited: %v", s.xpid, ws)
		select {
		case <-started:
			removeStaleX(s.display, s.xpid)
		default:
		}
		close(s.xDone)
	}()
	if dfdR != nil {
		cmd.ExtraFiles[0].Close()
		num, err := readDisplayFD(ctx, dfdR, s.xDone)
		if err != nil {
			s.Close()
			return nil, err
		}
		cfg.Display = ":" + num
	}
	s.display = cfg.Display
	close(started)
	if err := waitX(ctx, cfg.Display, s.xDone); err != nil {
		s.Close()
		return nil, err
	}
	restrictFramebuffer(s.xpid)
	s.cfg = cfg
	if err := s.startHelpers(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// startHelpers starts the session's buses (where asked for) and its window
// manager, and returns once the window manager serves the display.
func (s *Session) startHelpers(ctx context.Context) error {
	if s.cfg.A11y {
		s.startBus(ctx, s.cfg)
	}
	return s.startWM(ctx)
}

// startWM starts the window manager and returns once it serves the display.
func (s *Session) startWM(ctx context.Context) error {
	cfg := s.cfg
	if cfg.WM == "none" {
		return nil
	}
	wmArgs := strings.Fields(cfg.WM)
	wmPath, err := exec.LookPath(wmArgs[0])
	if err != nil {
		return fmt.Errorf("guest: window manager: %w", err)
	}
	wlog, err := logFile(cfg.LogDir, "wm.log")
	if err != nil {
		return err
	}
	wcmd := &exec.Cmd{Path: wmPath, Args: wmArgs, Env: withDefault(cfg.Env, "DISPLAY", cfg.Display), Stdout: wlog, Stderr: wlog}
	if i := envIndex(wcmd.Env, "DISPLAY"); i >= 0 {
		wcmd.Env[i] = "DISPLAY=" + cfg.Display
	}
	wcmd.Env = append(wcmd.Env, s.BusEnv()...)
	start := func(c *exec.Cmd) (int, <-chan unix.WaitStatus, error) { return cfg.WMCgroups.Start(c, startChild) }
	if s.wmOwn() {
		if err := s.ownWM(wcmd); err != nil {
			return err
		}
		start = startChild
	} else {
		cfg.WMAs.credential(wcmd)
	}
	wmpid, wwait, err := start(wcmd)
	wlog.Close()
	if err != nil {
		return fmt.Errorf("guest: start %s: %w", wmArgs[0], err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.wmpid, s.wmDone = wmpid, done
	s.mu.Unlock()
	s.wmAlive.Store(true)
	go func() {
		ws := <-wwait
		s.wmAlive.Store(false)
		cfg.Logf("guest: window manager (pid %d) exited: %v", wmpid, ws)
		close(done)
	}()
	return waitWM(ctx, cfg.Display, done, s.xDone)
}

// ownHelpers reports whether the desktop's helpers run as an identity of
// its own (SessionConfig.Helper), not the agent's.
func (s *Session) ownHelpers() bool {
	h := s.cfg.Helper
	return h.distinct() && (s.cfg.WMAs == nil || h.UID != s.cfg.WMAs.UID)
}

// wmOwn reports whether the window manager runs as the desktop's own
// identity: an openbox, whose configuration can be made to start nothing.
func (s *Session) wmOwn() bool {
	return s.ownHelpers() && filepath.Base(strings.Fields(s.cfg.WM)[0]) == "openbox"
}

// ownWM makes cmd (openbox) run as the helper identity with a home of its
// own and the configuration that starts nothing, both in RunDir.
func (s *Session) ownWM(cmd *exec.Cmd) error {
	dir := s.cfg.RunDir
	if dir == "" {
		return errors.New("guest: window manager: a helper identity needs RunDir")
	}
	wdir := filepath.Join(dir, "wm")
	if err := freshDir(wdir); err != nil {
		return err
	}
	rc, err := writeWMConfig(wdir)
	if err != nil {
		return err
	}
	home := filepath.Join(wdir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	if err := os.Chown(home, s.cfg.Helper.UID, s.cfg.Helper.GID); err != nil {
		return err
	}
	cmd.Args = append(cmd.Args, "--config-file", rc)
	cmd.Env = withoutKeys(cmd.Env, "HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR", "TMPDIR")
	cmd.Env = append(cmd.Env, "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home, "XDG_DATA_HOME="+home, "TMPDIR="+home)
	cmd.Dir = home
	s.cfg.Helper.credential(cmd)
	return nil
}

// KeepPids lists the session processes a reset in place keeps besides the
// X server: those that run as the desktop's own identity (the buses, the
// window manager) and have not ended (Restart then starts them again).
func (s *Session) KeepPids() []int {
	var out []int
	if s.wmOwn() && s.wmAlive.Load() {
		out = append(out, s.WMPid())
	}
	if b := s.Bus(); s.ownHelpers() && b != nil && b.Alive() {
		out = append(out, b.Pids()...)
	}
	return out
}

// Restart starts afresh the session's helpers a reset in place ended or
// may not keep: the buses and the window manager where they run as the
// agent (a process of the episode could have traced, signalled or filled
// them, and nothing of an episode may reach the next; docs/architecture.md,
// "Reward integrity"), any that ended, and the window manager where dirty
// says the episode changed its state. Call it after the agent's files are
// restored.
//
// It reports whether the window manager started afresh.
func (s *Session) Restart(ctx context.Context, dirty bool) (bool, error) {
	s.mu.Lock()
	wmpid, wmDone, bus := s.wmpid, s.wmDone, s.bus
	keepBus := s.ownHelpers() && bus != nil && bus.Alive()
	if !keepBus {
		s.bus = nil
	}
	s.mu.Unlock()
	if !keepBus {
		bus.Close()
		if s.cfg.A11y {
			s.startBus(ctx, s.cfg)
		}
	}
	if s.wmOwn() {
		if s.wmAlive.Load() && !dirty {
			return false, nil
		}
		s.cfg.Logf("guest: reset: the window manager starts afresh (running %v, root properties changed %v)", s.wmAlive.Load(), dirty)
	}
	if wmpid != 0 {
		signalGroup(wmpid, syscall.SIGKILL)
		select {
		case <-wmDone:
		case <-ctx.Done():
			return false, fmt.Errorf("guest: restart: the old window manager did not end: %w", ctx.Err())
		}
	}
	if !s.xAlive.Load() {
		return false, errors.New("guest: restart: the X server is gone")
	}
	return s.cfg.WM != "none", s.startWM(ctx)
}

// Display returns the session's display name (":N").
func (s *Session) Display() string { return s.display }

// XPid returns the Xvfb process id.
func (s *Session) XPid() int { return s.xpid }

// WMPid returns the window manager's process id (0 without one).
func (s *Session) WMPid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wmpid
}

// Alive reports whether Xvfb and the window manager are still running.
func (s *Session) Alive() (x, wm bool) { return s.xAlive.Load(), s.wmAlive.Load() }

// Close ends the WM and Xvfb (SIGTERM to each process group, SIGKILL after a
// grace period) and waits for them.
func (s *Session) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		bus, wmpid, wmDone := s.bus, s.wmpid, s.wmDone
		s.mu.Unlock()
		bus.Close()
		for _, p := range []struct {
			pid  int
			done chan struct{}
		}{{wmpid, wmDone}, {s.xpid, s.xDone}} {
			if p.pid == 0 {
				continue
			}
			signalGroup(p.pid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(2 * time.Second):
				signalGroup(p.pid, syscall.SIGKILL)
				<-p.done
			}
			signalGroup(p.pid, syscall.SIGKILL) // stragglers in the group
		}
	})
	return nil
}

// removeStaleX removes the lock file and socket that an Xvfb killed by a
// signal leaves behind, if the lock still names that Xvfb: two servers
// starting at once on a stale lock can otherwise both claim the display.
func removeStaleX(display string, pid int) {
	num, ok := strings.CutPrefix(display, ":")
	if !ok {
		return
	}
	num, _, _ = strings.Cut(num, ".")
	lock := "/tmp/.X" + num + "-lock"
	b, err := os.ReadFile(lock)
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(pid) {
		return
	}
	os.Remove("/tmp/.X11-unix/X" + num)
	os.Remove(lock)
}

func logFile(dir, name string) (*os.File, error) {
	if dir == "" {
		return os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// guestd's alone (0600): the agent's clients can make the X server and
	// the buses log text of their choosing (an XKB layout name they ask
	// for), and a log outlives a reset in place, so one the agent could
	// read would carry one episode's message into the next.
	f, err := os.OpenFile(dir+"/"+name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func envIndex(env []string, key string) int {
	for i, kv := range env {
		if strings.HasPrefix(kv, key+"=") {
			return i
		}
	}
	return -1
}

// readDisplayFD reads the display number Xvfb writes to -displayfd.
func readDisplayFD(ctx context.Context, r *os.File, xDone <-chan struct{}) (string, error) {
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case n := <-got:
		if _, err := strconv.Atoi(n); err != nil {
			return "", fmt.Errorf("guest: Xvfb did not report a display (got %q)", n)
		}
		return n, nil
	case <-xDone:
		return "", errors.New("guest: Xvfb exited during start-up")
	case <-ctx.Done():
		r.SetReadDeadline(time.Now())
		return "", fmt.Errorf("guest: waiting for Xvfb: %w", ctx.Err())
	}
}

// probe waits until check succeeds, with a short backoff, failing early when
// a process it depends on exits.
func probe(ctx context.Context, what string, check func() bool, died ...<-chan struct{}) error {
	delay := 2 * time.Millisecond
	for {
		if check() {
			return nil
		}
		for _, d := range died {
			select {
			case <-d:
				return fmt.Errorf("guest: %s: process exited during start-up", what)
			default:
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("guest: %s: %w", what, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}

func waitX(ctx context.Context, display string, xDone <-chan struct{}) error {
	return probe(ctx, "waiting for X on "+display, func() bool { return xAnswers(display, time.Second) }, xDone)
}

// AwaitWM waits until a window manager serves display (wmServing), for a
// desktop started elsewhere (bench's baseline); ctx bounds the wait.
func AwaitWM(ctx context.Context, display string) error { return waitWM(ctx, display, nil, nil) }

func waitWM(ctx context.Context, display string, wmDone, xDone <-chan struct{}) error {
	d := newDisplay(display)
	defer d.close() // the probe window goes with the connection
	var pr wmProbe
	return probe(ctx, "waiting for the window manager on "+display, func() bool {
		var ok bool
		err := d.runWithin(ctx, xTimeout, func(x *xconn) error {
			var err error
			ok, err = x.wmServing(&pr)
			return err
		})
		return err == nil && ok
	}, wmDone, xDone)
}
