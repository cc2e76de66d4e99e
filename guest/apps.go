package guest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
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
	pid, err := s.startApp(a.App, a.Args)
	if err != nil {
		return err
	}
	res.PID = pid
	if err := s.record(App{App: a.App, Args: a.Args}); err != nil {
		s.cfg.Logf("guest: record launched app: %v", err)
	}
	return s.pointerInto(ctx, res)
}

// startApp starts app (looked up on PATH, no shell) detached in its own
// process group with the session environment.
func (s *Server) startApp(app string, args []string) (int, error) {
	path, err := exec.LookPath(app)
	if err != nil {
		return 0, aci.Errorf(aci.CodeInvalidAction, "launch_app: %v", err)
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	cmd := &exec.Cmd{Path: path, Args: append([]string{app}, args...), Env: s.cfg.Env, Dir: envHome(s.cfg.Env),
		Stdin: null, Stdout: null, Stderr: null}
	pid, wait, err := s.startAgent(cmd)
	if err != nil {
		return 0, startError("launch_app", app, err)
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
	}()
	return pid, nil
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
	apps, err := ReadApps(s.cfg.StateDir)
	if err != nil {
		return err
	}
	s.apps.mu.Lock()
	s.apps.list = apps
	s.apps.mu.Unlock()
	for _, a := range apps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, err := s.startApp(a.App, a.Args); err != nil {
			return fmt.Errorf("guest: relaunch %s: %w", a.App, err)
		}
	}
	return nil
}
