package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/procstat"
)

func (s *Server) launchApp(ctx context.Context, a aci.Action, res *wire.ActResult) error {
	if a.App == "" {
		return invalid("launch_app needs app")
	}
	pid, exited, err := s.startApp(a.App, a.Args)
	if err != nil {
		return err
	}
	res.PID = pid
	if err := s.record(App{App: a.App, Args: a.Args}); err != nil {
		s.cfg.Logf("guest: record launched app: %v", err)
	}
	if err := s.x.awaitAppWindow(ctx, pid, exited, res); err != nil {
		return err
	}
	return s.x.pointerInto(ctx, res)
}

// launchWindowWait bounds how long launch_app waits for the app's window.
const launchWindowWait = 10 * time.Second

// awaitAppWindow waits until a top-level window of pid or of one of its
// descendants (by launchedPID: its _NET_WM_PID, else the process the X
// server says created it) is mapped and reports its id; it gives up quietly when
// the process exits or launchWindowWait passes (a program without a window
// is no error). It wakes on window-list changes, and re-checks every 100 ms
// for apps that set their pid after mapping.
func (d *display) awaitAppWindow(ctx context.Context, pid int, exited <-chan struct{}, res *wire.ActResult) error {
	limit := time.NewTimer(launchWindowWait)
	defer limit.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var wake <-chan struct{}
		err := d.run(ctx, 0, func(x *xconn) error {
			wake = x.windowsChan()
			list, err := x.windows()
			if err != nil {
				return err
			}
			// A window without _NET_WM_PID is the process's that created it.
			for i, w := range list.Windows {
				list.Windows[i].PID = x.launchedPID(w)
			}
			for _, w := range list.Windows {
				if w.PID == pid {
					res.WindowID = w.ID
					break
				}
			}
			// A launcher that starts the app as its child (LibreOffice's
			// script runs soffice.bin): a window of a descendant.
			var parent map[int]int
			for _, w := range list.Windows {
				if res.WindowID != 0 || w.PID <= 0 || w.PID == pid {
					continue
				}
				if parent == nil {
					parent = parents(procstat.All())
				}
				if descends(w.PID, pid, parent) {
					res.WindowID = w.ID
				}
			}
			return nil
		})
		if err != nil || res.WindowID != 0 {
			return err
		}
		select {
		case <-wake:
		case <-tick.C:
		case <-exited:
			return nil
		case <-limit.C:
			return nil
		case <-ctx.Done():
			return nil // the pid is enough; the caller's deadline is not the app's fault
		}
	}
}

// startApp starts app (looked up on PATH, no shell) detached in its own
// process group with the session environment. exited closes when it ends.
func (s *Server) startApp(app string, args []string) (pid int, exited <-chan struct{}, err error) {
	path, err := exec.LookPath(app)
	if err != nil {
		return 0, nil, aci.Errorf(aci.CodeInvalidAction, "launch_app: %v", err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, nil, err
	}
	defer null.Close()
	cmd := &exec.Cmd{Path: path, Args: append([]string{app}, args...), Env: s.cfg.Env, Dir: envHome(s.cfg.Env),
		Stdin: null, Stdout: null, Stderr: null}
	var attach func(int, <-chan struct{})
	if isOffice(app) {
		if err := s.prepareOffice(cmd); err != nil {
			return 0, nil, err
		}
	}
	if isBrowser(app) {
		var cleanup func()
		if attach, cleanup, err = s.prepareBrowser(cmd); err != nil {
			return 0, nil, err
		}
		defer func() {
			if err != nil {
				cleanup()
			}
		}()
	}
	pid, wait, err := s.startAgent(cmd)
	if err != nil {
		return 0, nil, startError("launch_app", app, err)
	}
	done := make(chan struct{})
	if attach != nil {
		attach(pid, done)
	}
	s.apps.mu.Lock()
	if s.apps.pids == nil {
		s.apps.pids = map[int]string{}
	}
	s.apps.pids[pid] = app
	s.apps.mu.Unlock()
	go func() {
		<-wait
		s.apps.mu.Lock()
		delete(s.apps.pids, pid)
		s.apps.mu.Unlock()
		close(done)
	}()
	return pid, done, nil
}

// record appends app to the state record, crash-safe.
func (s *Server) record(app App) error {
	if s.cfg.StateDir == "" {
		return nil
	}
	s.apps.mu.Lock()
	defer s.apps.mu.Unlock()
	if s.apps.list == nil {
		s.apps.list, _ = ReadApps(s.cfg.StateDir)
	}
	s.apps.list = append(s.apps.list, app)
	b, err := json.MarshalIndent(s.apps.list, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(s.cfg.StateDir, AppsFile), b, 0o644)
}

// Relaunch starts every app recorded in Config.StateDir again (a forked
// sandbox gets its apps back this way); the record is kept as is.
func (s *Server) Relaunch(ctx context.Context) error {
	_, err := s.relaunch(ctx, false)
	return err
}

// relaunch starts the apps recorded in the state directory (restored by the
// host from the checkpoint) and returns how many; with await it waits, as
// launch_app does, for each one's window.
func (s *Server) relaunch(ctx context.Context, await bool) (int, error) {
	apps, err := ReadApps(s.cfg.StateDir)
	if err != nil {
		return 0, err
	}
	s.apps.mu.Lock()
	s.apps.list = apps
	s.apps.mu.Unlock()
	for _, a := range apps {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		pid, exited, err := s.startApp(a.App, a.Args)
		if err != nil {
			return 0, fmt.Errorf("guest: relaunch %s: %w", a.App, err)
		}
		if await {
			var res wire.ActResult
			if err := s.x.awaitAppWindow(ctx, pid, exited, &res); err != nil {
				return 0, err
			}
		}
	}
	return len(apps), nil
}

// prepareBrowser adds the sandbox's flags and the DevTools pipe to cmd (a
// Chromium about to start). After the start, attach with the pid; on a
// failed start, call the returned cleanup.
func (s *Server) prepareBrowser(cmd *exec.Cmd) (attach func(pid int, exited <-chan struct{}), cleanup func(), err error) {
	w, h := 0, 0
	_ = s.x.run(context.Background(), 0, func(x *xconn) error { w, h = x.w, x.h; return nil })
	addr, err := s.web.ensure(s.cfg.Logf)
	if err != nil {
		return nil, nil, err
	}
	// Chromium reads commands from fd 3 and writes replies to fd 4.
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	respR, respW, err := os.Pipe()
	if err != nil {
		cmdR.Close()
		cmdW.Close()
		return nil, nil, err
	}
	// A profile restored from a checkpoint holds the lock of the Chromium
	// that ran when it was taken; should its pid be alive here, Chromium
	// would take the profile for one in use and quit. The lock goes first,
	// removed by a shell running as the agent (no path of the agent's is
	// touched with guestd's rights).
	cmd.Args = append(append([]string{"sh", "-c", dropSingleton, cmd.Path}, chromiumFlags(w, h, addr)...), cmd.Args[1:]...)
	cmd.Path = "/bin/sh"
	// Chromium joins the session's accessibility bus (the tree of
	// observe.a11y) only when told that assistive technology is on.
	cmd.Env = append(append([]string(nil), cmd.Env...), "ACCESSIBILITY_ENABLED=1")
	cmd.ExtraFiles = []*os.File{cmdR, respW}
	cleanup = func() { cmdR.Close(); cmdW.Close(); respR.Close(); respW.Close() }
	attach = func(pid int, exited <-chan struct{}) {
		cmdR.Close()
		respW.Close()
		conn := chromedp.NewPipeConn(&boundedMessages{r: respR, max: maxDevToolsMessage}, cmdW)
		actx, acancel := chromedp.NewAllocatorContext(context.Background(), pipeAllocator{conn})
		tctx, tcancel := chromedp.NewContext(actx)
		bc := &browserConn{pid: pid, exited: exited, root: tctx, cancel: func() { tcancel(); acancel(); conn.Close() }, ready: make(chan struct{})}
		// chromedp attaches on a context's first run and ties the
		// connection to that run's context: attach on the browser's own,
		// so a call's deadline never closes the pipe (Chromium exits
		// when its DevTools pipe closes).
		go func() {
			bc.ctx, bc.initErr = attachTab(tctx)
			if bc.ctx == nil {
				bc.ctx = tctx
			} else {
				bc.followLoads()
			}
			close(bc.ready)
		}()
		s.browser.mu.Lock()
		old := s.browser.conn
		s.browser.conn = bc
		s.browser.mu.Unlock()
		if old != nil {
			old.cancel()
		}
		go func() {
			<-exited
			s.browser.mu.Lock()
			if s.browser.conn == bc {
				s.browser.conn = nil
			}
			s.browser.mu.Unlock()
			bc.cancel()
		}()
	}
	return attach, cleanup, nil
}

// prepareOffice makes sure the agent's LibreOffice profile has the
// sandbox's settings (WriteOfficeProfile; a family's golden setup starts
// LibreOffice once, so its episodes find the profile already made) and
// starts it without the recovery dialog or the splash screen.
func (s *Server) prepareOffice(cmd *exec.Cmd) error {
	uid, gid := os.Geteuid(), os.Getegid()
	if id := s.cfg.Agent; id.distinct() {
		uid, gid = id.UID, id.GID
	}
	if err := WriteOfficeProfile(envHome(s.cfg.Env), uid, gid); err != nil {
		return aci.Errorf(aci.CodeInvalidAction, "launch_app: %v", err)
	}
	// The profile is named outright: LibreOffice locates it from the
	// user's passwd entry otherwise, and a sandbox uid has none (it then
	// stops at "user installation could not be completed").
	flags := []string{"--norestore", "--nologo"}
	if !slices.ContainsFunc(cmd.Args[1:], func(a string) bool { return strings.HasPrefix(a, "-env:UserInstallation=") }) {
		flags = append(flags, "-env:UserInstallation=file://"+filepath.Join(append([]string{envHome(s.cfg.Env)}, officeProfileDir[:3]...)...))
	}
	cmd.Args = append(append([]string{cmd.Args[0]}, flags...), cmd.Args[1:]...)
	return nil
}
