package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/procstat"
)

// AppsFile is the name, inside Config.StateDir, of the record of launched apps.
const AppsFile = "apps.json"

// App is one launched app as recorded in AppsFile.
type App struct {
	App  string   `json:"app"`
	Args []string `json:"args,omitempty"`
}

// launched apps, for activate_window by app and for the state record.
type appState struct {
	mu   sync.Mutex
	pids map[int]string // pid → app
	list []App
}

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

func (s *Server) appPIDs(app string) map[int]bool {
	s.apps.mu.Lock()
	defer s.apps.mu.Unlock()
	out := map[int]bool{}
	for pid, a := range s.apps.pids {
		if a == app || filepath.Base(a) == app {
			out[pid] = true
		}
	}
	return out
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

// ReadApps reads the apps recorded in dir (none if the record is missing).
func ReadApps(dir string) ([]App, error) {
	b, err := os.ReadFile(filepath.Join(dir, AppsFile))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var apps []App
	if err := json.Unmarshal(b, &apps); err != nil {
		return nil, fmt.Errorf("guest: %s: %w", AppsFile, err)
	}
	return apps, nil
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
