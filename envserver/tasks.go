package envserver

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
)

// runSetup brings a fresh sandbox into the task family's seed-independent
// starting state. It runs once per family on the sandbox that becomes its
// golden checkpoint.
func runSetup(ctx context.Context, l *pool.Lease, t *configs.Task) error {
	return runSteps(ctx, l, t.ID, "setup", t.Setup)
}

// runInstance applies an instance's own setup (its files, its documents
// opened) to a sandbox leased from the family's golden. The golden's
// windows come first: a sandbox booted from the golden's snapshot
// relaunches its apps without waiting for them, and an instance's app that
// mapped before them would find another window layout (openbox places and
// stacks windows by the order they map) than on the golden itself or on a
// sandbox reset in place to it.
func runInstance(ctx context.Context, l *pool.Lease, in *configs.Instance) error {
	for i, st := range in.Setup {
		if st.WaitWindow != nil {
			if err := waitWindow(ctx, l.Guest(), st.WaitWindow); err != nil {
				err = fmt.Errorf("setup %d of %s: %w", i, in.ID, err)
				if isDeath(err, l) {
					return err
				}
				return &setupError{err}
			}
		}
	}
	return runSteps(ctx, l, in.ID, "instance step", in.InstanceSetup)
}

func runSteps(ctx context.Context, l *pool.Lease, id, what string, steps []configs.SetupStep) error {
	g := l.Guest()
	for i, st := range steps {
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
		case st.Web != nil:
			_, err = g.Web(ctx, wire.WebArgs{App: st.Web.App, Data: []byte(st.Web.Data)})
		case st.Browser != nil:
			_, err = g.Browser(ctx, wire.BrowserArgs{Open: st.Browser.Open, Close: st.Browser.Close, TimeoutMS: st.Browser.TimeoutMS})
		}
		if err != nil {
			err = fmt.Errorf("%s %d of %s: %w", what, i, id, err)
			if isDeath(err, l) {
				return err
			}
			return &setupError{err}
		}
	}
	return nil
}

// pickInstance resolves a reset's (task, seed, split) to the instance the
// episode runs (docs/tasks.md, "Seeds and splits"): the split defaults to
// train, and an absent seed is drawn by the server (and reported).
func pickInstance(t *configs.Task, seed *int64, split string) (*configs.Instance, error) {
	if split == "" {
		split = configs.SplitTrain
	}
	if split != configs.SplitTrain && split != configs.SplitTest {
		return nil, aci.Errorf(aci.CodeBadRequest, "split %q: want train or test", split)
	}
	if split == configs.SplitTest && t.TestShare() == 0 {
		return nil, aci.Errorf(aci.CodeBadRequest, "task %s has no test split (it draws nothing from the seed)", t.ID)
	}
	var n int64
	if seed != nil {
		n = *seed
	} else {
		n = mrand.Int64N(1 << 31)
	}
	in, err := t.Instantiate(split, n)
	if err != nil {
		// Validated at load on a sample of seeds: a seed that fails is a
		// bug of the task, not of the request.
		return nil, &setupError{err}
	}
	return in, nil
}

// drawsOnScreen reports whether steps may change the screen (anything but
// put_file): the first observation then settles.
func drawsOnScreen(steps []configs.SetupStep) bool {
	for _, st := range steps {
		if st.PutFile == nil {
			return true
		}
	}
	return false
}

// instanceInfo names the instance in a reset's or fork's info.
func instanceInfo(info *api.Info, in *configs.Instance) {
	seed := in.Seed
	info.Version, info.Seed, info.Split, info.Instruction = in.Version, &seed, in.Split, in.Instruction
}

// setupError is a task's setup step failing in a live sandbox (a window
// that never shows, a command that fails): the episode ends setup_error,
// not sandbox_died, whatever the step's own error code.
type setupError struct{ err error }

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// awaitWindows re-runs the task's wait_window and web steps: a sandbox
// restored from a checkpoint relaunches its apps, and the episode starts
// only once their windows are back. Its web apps start again from the
// instance's data, served from the host (never from a file the agent
// could have written): like an app's unsaved memory, what the agent did
// in a web app is not carried by a checkpoint (docs/architecture.md,
// "Web apps").
func awaitWindows(ctx context.Context, l *pool.Lease, in *configs.Instance) error {
	for _, st := range append(append([]configs.SetupStep(nil), in.Setup...), in.InstanceSetup...) {
		if st.WaitWindow != nil {
			if err := waitWindow(ctx, l.Guest(), st.WaitWindow); err != nil {
				return err
			}
		}
		if st.Web != nil {
			if _, err := l.Guest().Web(ctx, wire.WebArgs{App: st.Web.App, Data: []byte(st.Web.Data)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// beforeScore runs the task's before_score steps (browser close) once the
// episode has ended and before the verifier freezes the agent. A step
// that fails is logged, never retried: the verifier scores what is there.
func beforeScore(ctx context.Context, l *pool.Lease, t *configs.Task, logf func(string, ...any)) {
	for i, st := range t.BeforeScore {
		if st.Browser == nil {
			continue
		}
		if _, err := l.Guest().Browser(ctx, wire.BrowserArgs{Close: st.Browser.Close, TimeoutMS: st.Browser.TimeoutMS}); err != nil && logf != nil {
			logf("envserver: task %s: before_score %d: %v", t.ID, i, err)
		}
	}
}

// guestAPI is the part of the guest client that setup needs.
type guestAPI interface {
	Exec(ctx context.Context, args wire.ExecArgs) (*wire.ExecResult, error)
	PutFile(ctx context.Context, args wire.PutFileArgs) error
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

// putFile writes a file as the agent ("~/" is its home): guestd takes the
// agent's filesystem identity on one thread and writes it, with no process
// started (wire.PutFileArgs.Agent).
func putFile(ctx context.Context, g guestAPI, p *configs.PutFile) error {
	data, err := p.Bytes()
	if err != nil {
		return fmt.Errorf("put_file %s: %w", p.Path, err)
	}
	return g.PutFile(ctx, wire.PutFileArgs{Path: p.Path, Data: data, Mode: p.Mode, Agent: true})
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
func exitStr(c *int) string {
	if c == nil {
		return "none"
	}
	return strconv.Itoa(*c)
}

func tail(b []byte) string {
	const n = 512
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
