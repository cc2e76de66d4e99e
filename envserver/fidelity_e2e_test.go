package envserver_test

import (
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

// TestStepShowsItsEffect is the new user's walk: reset, click the terminal,
// type: the typing step's own frame shows the typing (a new frame, settled
// on damage), and info carries each action's result. A reset may lower the
// step budget, and its seed is recorded.
func TestStepShowsItsEffect(t *testing.T) {
	s := server(t)
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file", Seed: ptr(int64(42)), MaxSteps: 3}}})
	res := r.Results[0]
	env, epID := res.EnvID, res.EpisodeID
	defer closeEnvs(s, env)
	if res.Info.MaxSteps != 3 || res.Info.Settle == nil {
		t.Fatalf("reset info got max_steps %d settle %+v; want 3 and a settle report", res.Info.MaxSteps, res.Info.Settle)
	}
	click := oneStep(t, s, nil, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.Click, Target: aci.Px(200, 200)}})
	typed := oneStep(t, s, nil, api.StepEnv{EnvID: env, Actions: []aci.Action{
		{Verb: aci.ClipboardSet, Text: "héllo"},
		{Verb: aci.ClipboardGet},
		{Verb: aci.ListWindows},
		{Verb: aci.TypeText, Text: "echo hi"},
	}})
	if typed.Obs.Frame == click.Obs.Frame {
		t.Errorf("the typing step returned the frame before the typing (%s); want the typed text on screen", typed.Obs.Frame)
	}
	if st := typed.Info.Settle; st == nil || !st.Damaged || st.TimedOut {
		t.Errorf("typing step settle got %+v; want damaged, settled before the ceiling", st)
	}
	rs := typed.Info.Results
	if len(rs) != 4 {
		t.Fatalf("results got %+v; want 4", rs)
	}
	for i, r := range rs {
		if r.Status != aci.StatusOK {
			t.Errorf("results[%d] status %q; want ok", i, r.Status)
		}
	}
	if rs[1].Text == nil || *rs[1].Text != "héllo" {
		t.Errorf("clipboard_get result got %v; want héllo", rs[1].Text)
	}
	var term *aci.Window
	for i, w := range rs[2].Windows {
		if strings.EqualFold(w.Class, "xterm") {
			term = &rs[2].Windows[i]
		}
	}
	if term == nil || !term.Focused || term.Geometry.W == 0 || term.Title == "" {
		t.Errorf("list_windows got %+v; want the focused xterm with a title and geometry", rs[2].Windows)
	}
	// A refused action: its status is the error, later ones are skipped;
	// the third step ends the lowered budget.
	last := oneStep(t, s, nil, api.StepEnv{EnvID: env, Actions: []aci.Action{
		{Verb: aci.Wait, MS: 1}, {Verb: aci.Click, Target: aci.Px(5000, 10)}, {Verb: aci.Wait, MS: 1},
	}})
	want := []string{aci.StatusOK, string(aci.CodeInvalidAction), aci.StatusSkipped}
	for i, r := range last.Info.Results {
		if i >= len(want) || r.Status != want[i] {
			t.Errorf("results got %+v; want statuses %v", last.Info.Results, want)
			break
		}
	}
	if !last.Truncated || last.Info.ExitReason != string(trajectory.AgentError) {
		t.Errorf("third step got truncated=%v exit %q; want truncated by the lowered max_steps (agent_error wins)", last.Truncated, last.Info.ExitReason)
	}
	var tr trajectory.Trajectory
	if err := msgpack.Unmarshal([]byte(getBody(t, s, "/v1/episodes/"+epID)), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Seed == nil || *tr.Seed != 42 || len(tr.Steps) != 3 {
		t.Errorf("trajectory got seed %v, %d steps; want 42, 3", tr.Seed, len(tr.Steps))
	}
}

// TestIdleSettleWaitsForWhatIsDue: a step ends as soon as the desktop is
// idle, but a timer due within the settle's windows is waited for. The
// shell's `sleep 0.2` before its output must not hand back the frame before
// the output; a `sleep 30` left in the background must not hold every later
// step to the damage windows; a spinner the agent leaves running keeps the
// desktop busy, and the step settles on damage alone.
func TestIdleSettleWaitsForWhatIsDue(t *testing.T) {
	s := server(t)
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env := r.Results[0].EnvID
	defer closeEnvs(s, env)
	oneStep(t, s, nil, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.Click, Target: aci.Px(200, 200)}})
	later := func() string {
		t.Helper()
		return oneStep(t, s, nil, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.Wait, MS: 700}}).Obs.Frame
	}

	delayed := oneStep(t, s, nil, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.TypeText, Text: "sleep 0.2; echo delayed-out\n"}})
	if final := later(); delayed.Obs.Frame != final {
		t.Errorf("the step with a 200 ms timer pending returned %s (settle %+v); the screen then settled on %s: the timer was not waited for",
			delayed.Obs.Frame, delayed.Info.Settle, final)
	}
	if st := delayed.Info.Settle; st == nil || !st.Idle || st.TimedOut {
		t.Errorf("delayed step settle got %+v; want idle once the timer fired and the output was drawn", st)
	}

	oneStep(t, s, nil, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.TypeText, Text: "sleep 30 &\n"}})
	typed := oneStep(t, s, nil, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.TypeText, Text: "echo x"}})
	if st := typed.Info.Settle; st == nil || !st.Idle || !st.Damaged {
		t.Errorf("with a 30 s sleep in the background, typing settled %+v; want idle and damaged", st)
	}
	if final := later(); typed.Obs.Frame != final {
		t.Errorf("typing returned %s, the screen settled on %s", typed.Obs.Frame, final)
	}

	oneStep(t, s, nil, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.TypeText, Text: "\nwhile :; do :; done &\n"}})
	busy := oneStep(t, s, nil, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.TypeText, Text: "echo y"}})
	if st := busy.Info.Settle; st == nil || st.Idle || !st.Damaged {
		t.Errorf("with a spinner running, typing settled %+v; want damaged and not idle (the damage windows decide)", st)
	}
}
