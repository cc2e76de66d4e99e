package envserver_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/trajectory"
)

// execCall posts an exec request; err is the typed error of a refused one.
func execCall(s *servertest.Server, req api.ExecRequest) (*api.ExecReply, error) {
	var r api.ExecReply
	if _, _, err := s.Call("/v1/exec", req, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// TestExecOffByDefault: a server whose config does not allow trainer exec
// refuses it as unsupported and does not list it in /v1/spec.
func TestExecOffByDefault(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1})
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	defer closeEnvs(s, r.Results[0].EnvID)
	if _, err := execCall(s, api.ExecRequest{EnvID: r.Results[0].EnvID, Shell: "true"}); !codeIs(err, aci.CodeUnsupported) {
		t.Errorf("exec on a server that does not allow it: %v; want unsupported", err)
	}
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil || sp.Trainer.Exec || sp.Trainer.MaxExecMS != 0 || !sp.Trainer.Observe {
		t.Errorf("spec trainer %+v (%v); want observe only", sp.Trainer, err)
	}
}

// TestTrainerExec drives POST /v1/exec over real HTTP on a real sandbox:
// the command runs as the agent's user with its stdin, env and cwd, its
// output is bounded and its time too, bad requests are typed, it never
// runs while a step of the env runs or once the episode is over, and the
// trajectory records it as an event, not as a step.
func TestTrainerExec(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) { c.TrainerExec = true }})
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil || !sp.Trainer.Exec ||
		sp.Trainer.MaxExecMS <= 0 || sp.Trainer.MaxExecOutputBytes != wire.ExecOutputCap {
		t.Fatalf("spec trainer %+v (%v); want exec with its limits", sp.Trainer, err)
	}
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env, epID := r.Results[0].EnvID, r.Results[0].EpisodeID
	defer closeEnvs(s, env)
	run := func(req api.ExecRequest) *api.ExecReply {
		t.Helper()
		req.EnvID = env
		out, err := execCall(s, req)
		if err != nil {
			t.Fatalf("exec %+v: %v", req, err)
		}
		return out
	}

	// As the agent: the home's owner, not root where the sandbox is confined.
	who := run(api.ExecRequest{Shell: `id -u; stat -c %u "$HOME"`})
	if f := strings.Fields(string(who.Stdout)); who.Exit == nil || *who.Exit != 0 || len(f) != 2 || f[0] != f[1] {
		t.Errorf("exec identity %q exit %v; want the agent's uid, the home's owner", who.Stdout, who.Exit)
	} else if sp.Pool.Confined && f[0] == "0" {
		t.Errorf("exec ran as root in a confined sandbox")
	}
	if got := run(api.ExecRequest{Argv: []string{"cat"}, Stdin: []byte("from stdin")}); string(got.Stdout) != "from stdin" {
		t.Errorf("stdin: got %q", got.Stdout)
	}
	if got := run(api.ExecRequest{Shell: `echo "$FOO"; pwd; exit 3`, Env: []string{"FOO=bar"}, Cwd: "/tmp"}); string(got.Stdout) != "bar\n/tmp\n" || got.Exit == nil || *got.Exit != 3 {
		t.Errorf("env, cwd, exit: %q exit %v", got.Stdout, got.Exit)
	}
	flood := run(api.ExecRequest{Shell: "head -c 3000000 /dev/zero; echo err >&2"})
	if !flood.Truncated || len(flood.Stdout) != wire.ExecOutputCap || string(flood.Stderr) != "err\n" {
		t.Errorf("flood: %d bytes truncated %v stderr %q; want the cap, truncated", len(flood.Stdout), flood.Truncated, flood.Stderr)
	}
	t0 := time.Now()
	slow := run(api.ExecRequest{Shell: "sleep 30", TimeoutMS: 300})
	if !slow.TimedOut || slow.Exit != nil || time.Since(t0) > 20*time.Second {
		t.Errorf("past its time: timed_out %v exit %v after %v; want killed at its timeout", slow.TimedOut, slow.Exit, time.Since(t0))
	}

	for _, bad := range []api.ExecRequest{
		{EnvID: env},
		{EnvID: env, Argv: []string{"true"}, Shell: "true"},
		{EnvID: env, Argv: []string{""}},
		{EnvID: env, Shell: "true", TimeoutMS: 3_600_000},
		{EnvID: env, Shell: "true", TimeoutMS: -1},
		{EnvID: env, Shell: "true", Env: []string{"NOEQUALS"}},
	} {
		if _, err := execCall(s, bad); !codeIs(err, aci.CodeBadRequest) {
			t.Errorf("exec %+v: %v; want bad_request", bad, err)
		}
	}
	if _, err := execCall(s, api.ExecRequest{EnvID: "env-nope", Shell: "true"}); !codeIs(err, aci.CodeNotFound) {
		t.Errorf("unknown env: %v; want not_found", err)
	}

	// Never while a step runs: a step that waits 2 s holds the env, and
	// every exec sent meanwhile is busy; once the step is back, exec runs.
	var wg sync.WaitGroup
	started := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		close(started)
		step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Wait, MS: 2000}}}})
	}()
	<-started
	busy, stepDone := 0, make(chan struct{})
	go func() { wg.Wait(); close(stepDone) }()
	for waiting := true; waiting; {
		select {
		case <-stepDone:
			waiting = false
		default:
			if _, err := execCall(s, api.ExecRequest{EnvID: env, Shell: "true"}); codeIs(err, aci.CodeBusy) {
				busy++
			} else if err != nil {
				t.Fatalf("exec during a step: %v; want busy or a run", err)
			}
		}
	}
	if busy == 0 {
		t.Errorf("no exec was refused while a 2 s step ran")
	}
	run(api.ExecRequest{Shell: "echo trainer > ~/trainer.txt"})

	// The trajectory: one agent step; the trainer's commands are events.
	var tr trajectory.Trajectory
	if err := msgpackGet(t, s, "/v1/episodes/"+epID, &tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.Steps) != 1 {
		t.Errorf("trajectory has %d steps; want the agent's one (exec is not an action)", len(tr.Steps))
	}
	var last trajectory.Event
	n := 0
	for _, ev := range tr.Events {
		if ev.Kind != trajectory.EventExec {
			t.Errorf("event kind %q", ev.Kind)
		}
		n++
		last = ev
	}
	if n < 6 || last.AfterStep != 1 || last.Shell != "echo trainer > ~/trainer.txt" || last.Exit == nil || *last.Exit != 0 {
		t.Errorf("%d events, last %+v; want every exec, the last after step 1", n, last)
	}
	if !bytes.Contains([]byte(strings.Join(tr.Events[0].Argv, " ")+tr.Events[0].Shell), []byte("id -u")) {
		t.Errorf("first event %+v; want the first command", tr.Events[0])
	}

	// Over: the sandbox is frozen for scoring; exec is refused.
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Done}}}})
	if _, err := execCall(s, api.ExecRequest{EnvID: env, Shell: "true"}); !codeIs(err, aci.CodeEpisodeOver) {
		t.Errorf("exec after the episode ended: %v; want episode_over", err)
	}
}

// TestObserveWithoutStep: POST /v1/observe over real HTTP gives the frame,
// the a11y tree and the window list between steps without spending a
// step; a frame the client lists in have is not sent again; the
// trajectory holds it as a trainer event; an unknown env fails only its
// slot, an ended episode is episode_over.
func TestObserveWithoutStep(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1})
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil || !sp.Trainer.Observe {
		t.Fatalf("spec trainer %+v (%v); want observe", sp.Trainer, err)
	}
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "mousepad-write-note", Seed: ptr(int64(1))}}})
	env, epID := r.Results[0].EnvID, r.Results[0].EpisodeID
	defer closeEnvs(s, env)
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.TypeText, Text: "observed"}}}})

	observe := func(req api.ObserveRequest) *api.BatchReply {
		t.Helper()
		var out api.BatchReply
		if _, _, err := s.Call("/v1/observe", req, &out); err != nil {
			t.Fatalf("observe: %v", err)
		}
		return &out
	}
	a11y := len(sp.Observation.A11y) > 0
	o := &api.Observe{Format: aci.FormatPNG}
	if a11y {
		o.A11y = aci.A11yFull
	}
	out := observe(api.ObserveRequest{EnvIDs: []string{env, "env-nope"}, Observe: o, Windows: true})
	res := out.Results[0]
	if res.Error != nil || res.Obs == nil || res.Info == nil || res.Info.Step != 1 || res.Reward != nil || res.Terminated {
		t.Fatalf("observe result %+v; want the frame at step 1, no reward", res)
	}
	if _, ok := out.Frames[res.Obs.Frame]; !ok {
		t.Errorf("frame %s not in the reply", res.Obs.Frame)
	}
	if len(res.Info.Windows) == 0 || !strings.Contains(strings.ToLower(res.Info.Windows[0].Class+res.Info.Windows[0].Title), "mousepad") {
		t.Errorf("windows %+v; want mousepad's", res.Info.Windows)
	}
	if a11y && (len(res.Obs.Elements) == 0 || !strings.Contains(res.Obs.TreeText, "observed")) {
		t.Errorf("a11y: %d elements, tree %q; want the editor holding the typed text", len(res.Obs.Elements), res.Obs.TreeText)
	}
	if e := out.Results[1].Error; e == nil || e.Code != aci.CodeNotFound {
		t.Errorf("unknown env in the batch: %+v; want not_found for that slot only", out.Results[1])
	}
	again := observe(api.ObserveRequest{EnvIDs: []string{env}, Have: []string{res.Obs.Frame}})
	if f := again.Results[0].Obs; f == nil || f.Frame != res.Obs.Frame || len(again.Frames) != 0 {
		t.Errorf("observe listing the frame it holds: %+v, %d frames sent; want the same frame, not resent", f, len(again.Frames))
	}

	var tr trajectory.Trajectory
	if err := msgpackGet(t, s, "/v1/episodes/"+epID, &tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.Steps) != 1 || len(tr.Events) != 2 || tr.Events[0].Kind != trajectory.EventObserve || tr.Events[0].Frame != res.Obs.Frame || tr.Events[0].AfterStep != 1 {
		t.Errorf("trajectory: %d steps, events %+v; want 1 step and two observe events", len(tr.Steps), tr.Events)
	}
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Done}}}})
	var over api.BatchReply
	if _, _, err := s.Call("/v1/observe", api.ObserveRequest{EnvIDs: []string{env}}, &over); err != nil || over.Results[0].Error == nil || over.Results[0].Error.Code != aci.CodeEpisodeOver {
		t.Errorf("observe after the end: %v %+v; want episode_over", err, over.Results)
	}
}
