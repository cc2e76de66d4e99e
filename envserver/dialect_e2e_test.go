package envserver_test

import (
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/trajectory"
)

// TestModelAnswerRecorded: a model family's final answer (UI-TARS
// finished(content=...)) ends the episode as done, and both the step's info
// and the stored trajectory keep what the text became: the dialect auto
// picked, the parsed actions, the answer and the raw text.
func TestModelAnswerRecorded(t *testing.T) {
	s := server(t)
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env, epID := r.Results[0].EnvID, r.Results[0].EpisodeID
	defer closeEnvs(s, env)
	text := "Thought: nothing left to do.\nAction: finished(content='the file says 42')"
	res := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Text: &text, Dialect: "auto"}}}).Results[0]
	if res.Error != nil || !res.Terminated {
		t.Fatalf("finished: got %+v; want a terminated step", res)
	}
	in := res.Info
	if in.Dialect != "uitars" || in.Answer != "the file says 42" || len(in.Actions) != 1 || in.Actions[0].Verb != aci.Done {
		t.Errorf("info: dialect %q answer %q actions %+v; want uitars, the answer, one done", in.Dialect, in.Answer, in.Actions)
	}
	var tr trajectory.Trajectory
	if err := msgpackGet(t, s, "/v1/episodes/"+epID, &tr); err != nil {
		t.Fatal(err)
	}
	if len(tr.Steps) != 1 {
		t.Fatalf("trajectory has %d steps; want 1", len(tr.Steps))
	}
	st := tr.Steps[0]
	if st.Dialect != "uitars" || st.Answer != "the file says 42" || st.Text != text || tr.ExitReason != trajectory.TaskComplete || tr.Reward != 0 {
		t.Errorf("stored step: dialect %q answer %q text %q; episode %s reward %v; want uitars, the answer, the raw text, task_complete with reward 0",
			st.Dialect, st.Answer, st.Text, tr.ExitReason, tr.Reward)
	}
}
