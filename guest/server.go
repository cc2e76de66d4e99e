// Package guest is guestd: the runtime inside every sandbox that drives a real
// X11 desktop (XTEST input, MIT-SHM capture, EWMH windows, ICCCM clipboard)
// and runs commands, serving the host⇄guest protocol of package wire.
package guest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"github.com/shinken-rl/shinken/guest/a11y"
)

// Version is guestd's version string, sent in welcome.
const Version = "0.1.0"

// Config configures a Server.
type Config struct {
	// Display is the X display (":N"); empty means $DISPLAY.
	Display string
	// StateDir is where launch_app records launched apps (apps.json); empty
	// disables recording.
	StateDir string
	// Env is the session environment given to processes the server starts
	// (apps, exec). Nil means the server's own environment. DISPLAY and
	// LANG=C.UTF-8 are added when missing.
	Env []string
	// MaxExec bounds concurrent exec calls (default 16); past it exec
	// answers busy.
	MaxExec int
	// Agent is the identity of everything the agent can drive: launched
	// apps and the commands the host runs (setup). Nil: guestd's own.
	Agent *Identity
	// Scorer is the identity verifiers run as (score). Nil: guestd's own.
	Scorer *Identity
	// AgentCgroups are the cgroups the agent's processes are born in, and
	// whose freezer scoring freezes; nil: none.
	AgentCgroups *AgentCgroups
	// AgentIdle starts the agent's processes under SCHED_IDLE, for a
	// sandbox whose desktop and agent share one cgroup (a container): the
	// agent's forks inherit it and cannot undo it, so a fork bomb or a
	// spinner only ever gets the CPU the X server, the window manager and
	// guestd leave, and the desktop keeps answering. Where AgentCgroups
	// split the CPU between "guest" and "agent", it is not needed.
	AgentIdle bool
	// Exempt lists processes the scoring freeze leaves running besides
	// guestd itself (the X server, which the verifier may query).
	Exempt func() []int
	// Keep lists the session processes a reset in place keeps besides
	// guestd and the Exempt ones: the window manager where it runs as the
	// desktop's own identity; every other process ends
	// (docs/architecture.md, "Reset in place").
	Keep func() []int
	// Restart starts the session's helpers afresh at the start of a
	// reset's relaunch phase: the buses, and the window manager where it
	// was not kept or dirty says the episode changed its state. Nil:
	// nothing to restart.
	// It reports whether the window manager started afresh.
	Restart func(ctx context.Context, dirty bool) (bool, error)
	// A11yBus is the session's AT-SPI bus address; empty: no
	// accessibility tree (observe.a11y and element verbs are unsupported).
	A11yBus string
	// SettleIdle lets a settle end as soon as every process that can draw
	// on the display is idle (quiesce.go). Set it only where guestd sees all
	// of them: as its pid namespace's PID 1, or when it started the X server
	// and everything that connects to it.
	SettleIdle bool
	// Logf logs; nil is silent.
	Logf func(format string, args ...any)
}

// Server serves the guest protocol for one X display.
type Server struct {
	cfg Config
	x   *display
	// helpersDown: a reset ended the session's helpers and its relaunch
	// has not started them again yet.
	helpersDown atomic.Bool
	// wmDirty: the last quiesce found the root's properties changed (or
	// kept no window manager): the relaunch starts the window manager
	// afresh.
	wmDirty atomic.Bool
	hx      *display // health probes
	procs   *procTable
	execs   chan struct{} // exec semaphore
	score   sync.Mutex    // one verifier at a time
	apps    appState
	web     webHost       // the sandbox's web apps (web.go)
	browser browserState  // guestd's DevTools pipe to Chromium (browser.go)
	a11y    *a11y.Client  // nil without an accessibility bus
	idle    *idleLauncher // Config.AgentIdle; nil without

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer builds a server for cfg.Display. It does not need the X server
// to be up yet: X is connected on first use and reconnected after a failure.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Display == "" {
		cfg.Display = os.Getenv("DISPLAY")
	}
	if cfg.Display == "" {
		return nil, errors.New("guest: no display (set Config.Display or DISPLAY)")
	}
	if cfg.MaxExec <= 0 {
		cfg.MaxExec = 16
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Env == nil {
		cfg.Env = os.Environ()
	}
	cfg.Env = withDefault(cfg.Env, "DISPLAY", cfg.Display)
	cfg.Env = withDefault(cfg.Env, "LANG", "C.UTF-8")
	s := &Server{
		cfg:   cfg,
		x:     newDisplay(cfg.Display),
		hx:    &display{name: cfg.Display, sem: make(chan struct{}, 1), noDamage: true},
		procs: newProcTable(),
		execs: make(chan struct{}, cfg.MaxExec),
		lns:   make(map[net.Listener]struct{}),
		conns: make(map[net.Conn]struct{}),
	}
	if cfg.AgentIdle {
		l, err := newIdleLauncher()
		if err != nil {
			return nil, err
		}
		s.idle = l
	}
	if cfg.SettleIdle {
		s.x.quiet = newQuiescence()
	}
	if os.Getpid() == 1 {
		// Only where guestd sees every process of the agent's can it tell
		// whether they stalled the X server (xstall.go).
		s.x.stalled = s.xStalled
	}
	s.a11y = newA11y(cfg)
	return s, nil
}

// Listen opens a listener from a guestd address: "unix:/path" or "tcp:host:port".
// A stale unix socket file at path is removed first.
func Listen(addr string) (net.Listener, error) {
	network, a, err := SplitAddr(addr)
	if err != nil {
		return nil, err
	}
	if network == "unix" {
		if fi, err := os.Lstat(a); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(a)
		}
	}
	return net.Listen(network, a)
}

// SplitAddr splits "unix:/path" or "tcp:host:port" into a network and address.
func SplitAddr(addr string) (network, address string, err error) {
	for _, n := range []string{"unix", "tcp"} {
		if len(addr) > len(n)+1 && addr[:len(n)+1] == n+":" {
			return n, addr[len(n)+1:], nil
		}
	}
	return "", "", fmt.Errorf("guest: address %q: want unix:/path or tcp:host:port", addr)
}

// newA11y returns the accessibility client of a server whose session has an
// AT-SPI bus, nil otherwise.
func newA11y(cfg Config) *a11y.Client {
	if cfg.A11yBus == "" {
		return nil
	}
	return a11y.New(a11y.Config{Address: cfg.A11yBus, Logf: cfg.Logf})
}

func withDefault(env []string, key, val string) []string {
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			return env
		}
	}
	return append(env[:len(env):len(env)], key+"="+val)
}
