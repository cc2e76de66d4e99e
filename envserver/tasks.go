package envserver

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
)

// runSetup brings a fresh sandbox into the task's starting state. It runs
// once per task on the sandbox that becomes the task's golden checkpoint.
func runSetup(ctx context.Context, l *pool.Lease, t *configs.Task) error {
	g := l.Guest()
	for i, st := range t.Setup {
		var err error
		switch {
		case st.LaunchApp != nil:
			_, err = g.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.LaunchApp, App: st.LaunchApp.App, Args: st.LaunchApp.Args}})
		case st.Exec != nil:
			err = execOK(ctx, g, wire.ExecArgs{Argv: st.Exec.Argv, Shell: st.Exec.Shell, TimeoutMS: st.Exec.TimeoutMS})
		case st.PutFile != nil:
			err = putFile(ctx, g, st.PutFile)
		case st.WaitWindow != nil:
			err = waitWindow(ctx, g, st.WaitWindow)
		}
		if err != nil {
			err = fmt.Errorf("setup step %d of %s: %w", i, t.ID, err)
			if isDeath(err, l) {
				return err
			}
			return &setupError{err}
		}
	}
	return nil
}

// setupError is a task's setup step failing in a live sandbox (a window
// that never shows, a command that fails): the episode ends setup_error,
// not sandbox_died, whatever the step's own error code.
type setupError struct{ err error }

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// awaitWindows re-runs the task's wait_window steps: a sandbox restored from
// a checkpoint relaunches its apps, and the episode starts only once their
// windows are back.
func awaitWindows(ctx context.Context, l *pool.Lease, t *configs.Task) error {
	for _, st := range t.Setup {
		if st.WaitWindow != nil {
			if err := waitWindow(ctx, l.Guest(), st.WaitWindow); err != nil {
				return err
			}
		}
	}
	return nil
}

// guestAPI is the part of the guest client that setup needs.
type guestAPI interface {
	Exec(ctx context.Context, args wire.ExecArgs) (*wire.ExecResult, error)
	ListWindows(ctx context.Context) (*wire.Windows, error)
}

func execOK(ctx context.Context, g guestAPI, args wire.ExecArgs) error {
	res, err := g.Exec(ctx, args)
	if err != nil {
		return err
	}
	if res.TimedOut {
		return fmt.Errorf("exec timed out")
	}
	if res.ExitCode == nil || *res.ExitCode != 0 {
		return fmt.Errorf("exec exited %s: %s", exitStr(res.ExitCode), tail(res.Stderr))
	}
	return nil
}

// putFile writes a file through exec so that "~/" resolves to the sandbox
// user's home, whatever the provider mounts it as.
func putFile(ctx context.Context, g guestAPI, p *configs.PutFile) error {
	mode := p.Mode
	if mode == 0 {
		mode = 0o644
	}
	script := `p="$SHINKEN_PATH"; case "$p" in "~/"*) p="$HOME/${p#\~/}";; esac; ` +
		`mkdir -p "$(dirname "$p")" && cat > "$p" && chmod "$SHINKEN_MODE" "$p"`
	return execOK(ctx, g, wire.ExecArgs{
		Shell: script, Stdin: []byte(p.Text), TimeoutMS: 10000,
		Env: []string{"SHINKEN_PATH=" + p.Path, fmt.Sprintf("SHINKEN_MODE=%o", mode)},
	})
}

// waitWindow polls the window list until a window's name or class contains
// the match, within the step's timeout (default 10 s).
func waitWindow(ctx context.Context, g guestAPI, w *configs.WaitWindow) error {
	timeout := time.Duration(w.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	match := strings.ToLower(w.Match)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		ws, err := g.ListWindows(ctx)
		if err == nil {
			for _, win := range ws.Windows {
				if strings.Contains(strings.ToLower(win.Title), match) || strings.Contains(strings.ToLower(win.Class), match) {
					return nil
				}
			}
		} else if c := aci.CodeOf(err); c != aci.CodeTimeout {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no window matching %q within %s: %w", w.Match, timeout, ctx.Err())
		case <-tick.C:
		}
	}
}
