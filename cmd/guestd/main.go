// Command guestd is the runtime inside every Shinken sandbox: it drives the
// sandbox's X11 desktop and runs commands for the host over the guest
// protocol (package guest/wire).
//
// Usage:
//
//	guestd [--listen unix:/path | tcp:host:port] [--display :N] [--state DIR]
//	guestd --session --display :N --screen 1280x800x24 --wm openbox --listen unix:/dir/guest.sock --state DIR [--relaunch]
//	guestd check read|list|type|mode|file|dir|absent PATH
//
// The default --listen is unix:$XDG_RUNTIME_DIR/guestd.sock, or
// unix:/tmp/guestd-$UID.sock without XDG_RUNTIME_DIR.
//
// With --session guestd starts Xvfb and the window manager itself, probes
// until X answers and the WM has claimed the root, and only then listens: a
// successful hello means the desktop is ready. If Xvfb or the WM die later
// guestd stays up, answers display_error and reports them in health. On
// SIGTERM or SIGINT it ends everything it started and exits. As PID 1 it
// reaps every orphan.
//
// guestd check is the verifiers' library: it reads one of the agent's files
// or directories safely and exits with a status that says why it could not
// (package guest, CheckMain).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/shinken-rl/shinken/guest"
	"github.com/shinken-rl/shinken/internal/pprofserve"
	"golang.org/x/sys/unix"
)

// init wires the main goroutine to the main thread for good: no other
// goroutine ever runs there. The sandbox init set the parent-death signal
// (SIGKILL when the server's process ends) on this thread before it
// executed guestd, and the kernel clears a thread's parent-death signal
// when its filesystem uid changes — which a goroutine taking the agent's
// filesystem identity for a file write does to the thread it runs on
// (guest.Server.asAgentFS). On the main thread that would let the sandbox
// outlive a killed server (docs/architecture.md, "Process provider
// hardening").
func init() { runtime.LockOSThread() }

func main() {
	// The verifier library runs guestd as `guestd check OP PATH` for each
	// read of the agent's files (docs/architecture.md, "Verifiers read the
	// agent's files safely"): it answers before any flag or daemon setup.
	if len(os.Args) > 1 && os.Args[1] == "check" {
		os.Exit(guest.CheckMain(os.Args[2:]))
	}
	if err := run(); err != nil {
		log.Printf("guestd: %v", err)
		os.Exit(1)
	}
}

func defaultListen() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return "unix:" + filepath.Join(d, "guestd.sock")
	}
	return fmt.Sprintf("unix:/tmp/guestd-%d.sock", os.Getuid())
}

func run() error {
	listen := flag.String("listen", defaultListen(), "address to serve: unix:/path or tcp:host:port")
	display := flag.String("display", os.Getenv("DISPLAY"), "X display (:N); with --session, empty lets Xvfb pick")
	session := flag.Bool("session", false, "start Xvfb and the window manager, then serve")
	screen := flag.String("screen", "1280x800x24", "session screen as WxHxDEPTH")
	wm := flag.String("wm", "openbox", `session window manager command, or "none"`)
	home, _ := os.UserHomeDir()
	state := flag.String("state", filepath.Join(home, ".shinken"), "directory recording launched apps")
	runDir := flag.String("run", "", "with --session, a directory of guestd's own that the agent can read but not write, for the session's logs and the bus's configuration; default: session/ beside the --listen socket")
	agentIdle := flag.Bool("agent-idle", false, "start the agent's processes under SCHED_IDLE (a sandbox whose desktop and agent share one cgroup, e.g. a container)")
	relaunch := flag.Bool("relaunch", false, "relaunch the apps recorded in --state once the desktop is ready")
	glx := flag.Bool("glx", false, "with --session, offer OpenGL (GLX, Mesa's software renderer) to the desktop's apps; off saves ~35 ms of CPU per boot")
	a11yBus := flag.Bool("a11y", true, "with --session, start the session's D-Bus and AT-SPI buses (the accessibility tree)")
	maxExec := flag.Int("max-exec", 16, "concurrent exec calls before busy")
	agentUID := flag.Int("agent-uid", -1, "uid of the agent's processes (apps, exec, the window manager); -1: guestd's own")
	agentGID := flag.Int("agent-gid", -1, "gid of the agent's processes; -1: the agent uid")
	scorerUID := flag.Int("scorer-uid", -1, "uid verifiers run as; -1: guestd's own")
	helperUID := flag.Int("helper-uid", -1, "with --session, uid the desktop's own window manager (openbox) runs as, neither the agent's nor the scorer's: it then starts nothing and lives through resets in place; -1: it runs as the agent and restarts with every reset")
	helperGID := flag.Int("helper-gid", -1, "gid of the window manager; -1: the helper uid")
	scorerGID := flag.Int("scorer-gid", -1, "gid verifiers run as; -1: the scorer uid")
	cgroupRoot := flag.String("cgroups", "", "directory of the sandbox's cgroups: <controller>/{guest,agent}; the agent's processes are born in agent, whose freezer scoring freezes")
	pprofAddr := flag.String("pprof", "", "serve Go's profiler (/debug/pprof/) on this loopback address; off by default")
	settleIdle := flag.Bool("settle-idle", true, "end a settle once every process that can draw is idle; only as its namespace's PID 1 or with --session, where guestd sees them all")
	procs := flag.Int("procs", 1, "OS threads running Go code at once (GOMAXPROCS); 0: one per CPU")
	flag.Parse()
	// One by default: a guest serves one env, one call at a time, and on a
	// virtual machine a second P costs more in thread hand-offs than it
	// gives (docs/architecture.md, "Cost of a step"). With --agent-idle, at
	// least two: the idle launcher's thread competes with the agent's own
	// processes for CPU, and while it runs Go code it holds a P; one P held
	// by a starved thread would stall every call.
	if *procs > 0 {
		n := *procs
		if *agentIdle {
			n = max(n, 2)
		}
		runtime.GOMAXPROCS(n)
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	// Not dumpable: no process of the same uid (the agent's, where guestd
	// shares it) may ptrace guestd or read its memory, environment or fds
	// through /proc, so the host's channel cannot be taken over
	// (docs/architecture.md, "guestd cannot be taken over"). Its children
	// become dumpable again at exec.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	if *pprofAddr != "" {
		a, err := pprofserve.Serve(*pprofAddr)
		if err != nil {
			return err
		}
		log.Printf("guestd: profiler on http://%s/debug/pprof/", a)
	}

	if os.Getpid() == 1 {
		guest.EnableReaper()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	agent, scorer := identity(*agentUID, *agentGID), identity(*scorerUID, *scorerGID)
	cgroups, err := guest.OpenAgentCgroups(*cgroupRoot)
	if err != nil {
		return err
	}
	env := os.Environ()
	for _, kv := range [][2]string{{"HOME", home}, {"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"LANG", "C.UTF-8"}} {
		if os.Getenv(kv[0]) == "" && kv[1] != "" {
			env = append(env, kv[0]+"="+kv[1])
		}
	}
	var sess *guest.Session
	if *session {
		if *runDir == "" {
			*runDir = sessionDir(*listen, *state)
		}
		// Nothing of the agent's may hold the session's logs or the bus's
		// configuration: a reset in place keeps this directory, and only
		// what the agent cannot write may outlive an episode.
		if err := os.MkdirAll(*runDir, 0o755); err != nil {
			return err
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := guest.StartSession(sctx, guest.SessionConfig{Display: *display, Screen: *screen, WM: *wm, Env: env, LogDir: *runDir, RunDir: *runDir, WMAs: agent, Helper: identity(*helperUID, *helperGID), WMCgroups: cgroups, A11y: *a11yBus, GLX: *glx, Logf: log.Printf})
		cancel()
		if err != nil {
			// The sandbox's log is all its owner keeps: say why X or the
			// WM did not come up.
			for _, f := range []string{"xvfb.log", "wm.log"} {
				if b, rerr := os.ReadFile(filepath.Join(*runDir, f)); rerr == nil && len(b) > 0 {
					log.Printf("guestd: %s (tail): %s", f, tail(b, 600))
				}
			}
			return err
		}
		defer s.Close()
		sess = s
		*display = s.Display()
		log.Printf("guestd: session on %s ready (Xvfb pid %d, wm pid %d)", s.Display(), s.XPid(), s.WMPid())
	}
	env = setEnv(env, "DISPLAY", *display)
	var busAddr string
	if sess != nil && sess.Bus() != nil {
		env = sess.AppEnv(env)
		busAddr = sess.Bus().A11yAddress()
	}
	srv, err := guest.NewServer(guest.Config{Display: *display, StateDir: *state, Env: env, MaxExec: *maxExec, A11yBus: busAddr,
		Agent: agent, Scorer: scorer, AgentCgroups: cgroups, AgentIdle: *agentIdle,
		SettleIdle: *settleIdle && (os.Getpid() == 1 || *session), Exempt: func() []int {
			if sess == nil {
				return nil
			}
			return []int{sess.XPid()}
		}, Keep: func() []int {
			if sess == nil {
				return nil
			}
			return sess.KeepPids()
		}, Restart: func(ctx context.Context, dirty bool) (bool, error) {
			if sess == nil {
				return false, nil
			}
			return sess.Restart(ctx, dirty)
		}, Logf: log.Printf})
	if err != nil {
		return err
	}
	defer srv.Close()
	if *relaunch {
		if err := srv.Relaunch(ctx); err != nil {
			log.Printf("guestd: %v", err)
		}
	}
	ln, err := guest.Listen(*listen)
	if err != nil {
		return err
	}
	if agent != nil && os.Geteuid() == 0 {
		// The channel is the host's alone: the agent's uid cannot connect.
		if network, path, _ := guest.SplitAddr(*listen); network == "unix" {
			if err := os.Chmod(path, 0o600); err != nil {
				return err
			}
		}
	}
	log.Printf("guestd: serving %s on %s", *display, *listen)
	return srv.Serve(ctx, ln)
}

// sessionDir is the default --run: session/ beside a unix --listen socket
// (the providers put it in a directory of guestd's own), else beside the
// state directory.
func sessionDir(listen, state string) string {
	if network, path, _ := guest.SplitAddr(listen); network == "unix" {
		return filepath.Join(filepath.Dir(path), "session")
	}
	return filepath.Join(state, "session")
}

// identity returns the identity of a --*-uid/--*-gid pair, nil for none.
func identity(uid, gid int) *guest.Identity {
	if uid < 0 {
		return nil
	}
	if gid < 0 {
		gid = uid
	}
	return &guest.Identity{UID: uid, GID: gid}
}

func setEnv(env []string, key, val string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, key+"="+val)
}

// tail returns the last n bytes of b, trimmed.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
