// Package guest is guestd: the runtime inside every sandbox that drives a real
// X11 desktop (XTEST input, MIT-SHM capture, EWMH windows, ICCCM clipboard)
// and runs commands, serving the host⇄guest protocol of package wire.
package guest

import (
	"errors"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"github.com/shinken-rl/shinken/guest/a11y"
)

// Version is guestd's version string, sent in welcome.
const Version = "0.1.0"

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
		s.x.stalled = stallCheck(&s.cfg, &s.apps)
	}
	s.a11y = newA11y(cfg)
	return s, nil
}

// newA11y returns the accessibility client of a server whose session has an
// AT-SPI bus, nil otherwise.
func newA11y(cfg Config) *a11y.Client {
	if cfg.A11yBus == "" {
		return nil
	}
	return a11y.New(a11y.Config{Address: cfg.A11yBus, Logf: cfg.Logf})
}
