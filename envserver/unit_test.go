package envserver_test

// The unit tier: envserver's step path, exit reasons, reward rule, forks,
// checkpoints and limits against the fake provider and guest
// (fake_test.go). It runs under -short, without a desktop.

import (
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/trajectory"
)

var unitTasks = map[string]string{
	"u-typed":   `{"id": "u-typed", "instruction": "type yes", "verifier": {"shell": "typed yes"}, "max_steps": 3, "solution": []}`,
	"u-max":     `{"id": "u-max", "instruction": "anything", "verifier": {"shell": "echo 0.5"}, "max_steps": 1, "solution": []}`,
	"u-scorer":  `{"id": "u-scorer", "instruction": "anything", "verifier": {"shell": "fail 3"}, "max_steps": 5, "solution": []}`,
	"u-brittle": `{"id": "u-brittle", "instruction": "do not type x", "verifier": {"shell": "broken-if x"}, "max_steps": 5, "solution": []}`,
	"u-strict":  `{"id": "u-strict", "instruction": "no mistakes", "verifier": {"shell": "echo 1"}, "max_steps": 5, "end_on_agent_error": true, "solution": []}`,
}

func unitServer(t *testing.T, edit func(*configs.Server)) *servertest.Server {
	s, _ := fakeServer(t, unitTasks, edit)
	return s
}

func resetOne(t *testing.T, s *servertest.Server, task string) (env, episode string) {
	t.Helper()
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task}}})
	res := r.Results[0]
	if res.Error != nil {
		t.Fatalf("reset %s: %v", task, res.Error)
	}
	t.Cleanup(func() { closeEnvs(s, res.EnvID) })
	return res.EnvID, res.EpisodeID
}

func stepOne(t *testing.T, s *servertest.Server, st api.StepEnv) api.Result {
	t.Helper()
	return step(t, s, api.StepRequest{Steps: []api.StepEnv{st}}).Results[0]
}

func act(env string, acts ...aci.Action) api.StepEnv { return api.StepEnv{EnvID: env, Actions: acts} }

func storedEpisode(t *testing.T, s *servertest.Server, id string) trajectory.Trajectory {
	t.Helper()
	var tr trajectory.Trajectory
	if err := msgpackGet(t, s, "/v1/episodes/"+id, &tr); err != nil {
		t.Fatalf("episode %s: %v", id, err)
	}
	return tr
}

// The stages in order: parse (a request error fails the step whole,
// nothing recorded), map (a point outside the space is the agent's
// invalid_action on that action), act (results per action), observe (the
// frame the actions left), end and record.
func TestUnitStepStages(t *testing.T) {
	s := unitServer(t, nil)
	env, ep := resetOne(t, s, "u-typed")

	// parse: two of action/actions/text is the request's mistake.
	res := stepOne(t, s, api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.Wait, MS: 1}, Actions: []aci.Action{{Verb: aci.Wait, MS: 1}}})
	if res.Error == nil || res.Error.Code != aci.CodeBadRequest || res.Info != nil {
		t.Fatalf("two of action/actions: %+v; want bad_request and no info", res)
	}
	// map: a normalized point past 1 is the agent's, at action 1; action 0
	// and 2 are skipped, nothing ran, and the step counts.
	res = stepOne(t, s, api.StepEnv{EnvID: env, Coords: "norm", Actions: []aci.Action{
		{Verb: aci.TypeText, Text: "a"}, {Verb: aci.Click, Target: aci.Px(2, 2)}, {Verb: aci.TypeText, Text: "b"}}})
	if res.Error != nil || res.Info == nil || res.Info.Error == nil || res.Info.Error.Code != aci.CodeInvalidAction {
		t.Fatalf("unmappable point: %+v; want info.error invalid_action", res)
	}
	want := []string{aci.StatusSkipped, string(aci.CodeInvalidAction), aci.StatusSkipped}
	for i, r := range res.Info.Results {
		if r.Status != want[i] {
			t.Errorf("results[%d] %q; want %q", i, r.Status, want[i])
		}
	}
	if res.Info.Step != 1 || res.Reward == nil || *res.Reward != 0 {
		t.Errorf("step %d reward %v; want step 1 counted, reward 0", res.Info.Step, res.Reward)
	}
	first := res.Obs.Frame
	// act + observe: typing changes the frame; clipboard_get returns text.
	res = stepOne(t, s, act(env, aci.Action{Verb: aci.ClipboardSet, Text: "clip"}, aci.Action{Verb: aci.ClipboardGet}, aci.Action{Verb: aci.TypeText, Text: "ye"}))
	if res.Info.Error != nil {
		t.Fatalf("step: %v", res.Info.Error)
	}
	if r := res.Info.Results[1]; r.Status != aci.StatusOK || r.Text == nil || *r.Text != "clip" {
		t.Errorf("clipboard_get result %+v; want ok with text clip", r)
	}
	if res.Obs.Frame == first {
		t.Errorf("frame %s unchanged after typing", res.Obs.Frame)
	}
	if _, ok := res.Info.Timings["act_us"]; !ok {
		t.Errorf("timings %v: no act_us", res.Info.Timings)
	}
	// end + record: the budget of 3 truncates the third step, scored.
	res = stepOne(t, s, act(env, aci.Action{Verb: aci.TypeText, Text: "s"}))
	if !res.Truncated || res.Info.ExitReason != string(trajectory.MaxSteps) || res.Reward == nil || *res.Reward != 1 {
		t.Fatalf("last step: truncated %v exit %q reward %v; want max_steps, reward 1 (typed yes)", res.Truncated, res.Info.ExitReason, res.Reward)
	}
	tr := storedEpisode(t, s, ep)
	if len(tr.Steps) != 3 || tr.ExitReason != trajectory.MaxSteps || tr.Reward != 1 {
		t.Errorf("stored: %d steps exit %q reward %v; want 3, max_steps, 1", len(tr.Steps), tr.ExitReason, tr.Reward)
	}
	if r := tr.Steps[0].Ran; r == nil || *r != 0 {
		t.Errorf("step 0 ran %v; want 0 (the agent's error stopped it before acting)", r)
	}
	// After the end: episode_over, nothing recorded.
	res = stepOne(t, s, act(env, aci.Action{Verb: aci.Wait, MS: 1}))
	if res.Error == nil || res.Error.Code != aci.CodeEpisodeOver {
		t.Errorf("step after the end: %v; want episode_over", res.Error)
	}
}

// Every exit reason, the reply and the stored trajectory agreeing, and the
// reward-null rule: null wherever there is no score (the verifier gave
// none, the sandbox died), a number wherever there is one.
func TestUnitExitReasonsAndRewardNull(t *testing.T) {
	s, prov := fakeServer(t, unitTasks, nil)
	click := aci.Action{Verb: aci.Click} // no target: the guest refuses it, the agent's
	cases := []struct {
		name, task  string
		acts        []aci.Action
		want        trajectory.ExitReason
		terminated  bool
		reward      *float64 // nil: null
		code        aci.Code // the reply's error (whole-step) code, if any
		infoCode    aci.Code // info.error's code, if any
		verdictFail bool     // info.verdict.error: the agent's state broke the verifier
	}{
		{"task_complete", "u-typed", []aci.Action{{Verb: aci.TypeText, Text: "yes"}, {Verb: aci.Done}}, trajectory.TaskComplete, true, api.Score(1), "", "", false},
		{"task_complete_zero", "u-typed", []aci.Action{{Verb: aci.Fail}}, trajectory.TaskComplete, true, api.Score(0), "", "", false},
		{"max_steps", "u-max", []aci.Action{{Verb: aci.Wait, MS: 1}}, trajectory.MaxSteps, false, api.Score(0.5), "", "", false},
		{"scorer_error", "u-scorer", []aci.Action{{Verb: aci.Done}}, trajectory.ScorerError, true, nil, "", aci.CodeScorerError, false},
		{"agent_broke_verifier", "u-brittle", []aci.Action{{Verb: aci.TypeText, Text: "x"}, {Verb: aci.Done}}, trajectory.TaskComplete, true, api.Score(0), "", "", true},
		{"agent_error_last_step", "u-max", []aci.Action{click}, trajectory.AgentError, false, api.Score(0.5), "", aci.CodeInvalidAction, false},
		{"end_on_agent_error", "u-strict", []aci.Action{click}, trajectory.AgentError, true, api.Score(0), "", aci.CodeInvalidAction, false},
		{"sandbox_died_midway", "u-typed", []aci.Action{{Verb: aci.TypeText, Text: "die"}}, trajectory.SandboxDied, false, nil, aci.CodeSandboxDied, "", false},
		{"oom_is_the_agents", "u-typed", []aci.Action{{Verb: aci.TypeText, Text: "oom"}}, trajectory.AgentError, false, nil, aci.CodeAgentError, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, ep := resetOne(t, s, tc.task)
			res := stepOne(t, s, act(env, tc.acts...))
			if res.Info == nil || res.Info.ExitReason != string(tc.want) {
				t.Fatalf("reply: info %+v error %v; want exit_reason %s", res.Info, res.Error, tc.want)
			}
			if res.Terminated != tc.terminated || res.Truncated == tc.terminated {
				t.Errorf("terminated %v truncated %v; want terminated %v", res.Terminated, res.Truncated, tc.terminated)
			}
			if (res.Reward == nil) != (tc.reward == nil) || (res.Reward != nil && *res.Reward != *tc.reward) {
				t.Errorf("reward %v; want %v", rv(res), tc.reward)
			}
			if got := codeOfErr(res.Error); got != tc.code {
				t.Errorf("error %v; want code %q", res.Error, tc.code)
			}
			if tc.infoCode != "" && (res.Info.Error == nil || res.Info.Error.Code != tc.infoCode) {
				t.Errorf("info.error %v; want %s", res.Info.Error, tc.infoCode)
			}
			if tc.verdictFail && (res.Info.Verdict == nil || res.Info.Verdict.Error == nil) {
				t.Errorf("verdict %+v; want the verifier's failure on the agent's state", res.Info.Verdict)
			}
			tr := storedEpisode(t, s, ep)
			if tr.ExitReason != tc.want || tr.EndedAt == nil {
				t.Errorf("stored: exit %q ended %v; want %s", tr.ExitReason, tr.EndedAt, tc.want)
			}
			if tc.code != "" {
				// The infrastructure failed midway: the step is kept, with
				// what ran and the error.
				if len(tr.Steps) != 1 || tr.Steps[0].Ran == nil || tr.Steps[0].Error == nil {
					t.Errorf("stored steps %+v; want the broken step with ran and error", tr.Steps)
				}
			}
		})
	}
	t.Run("sandbox_died_before", func(t *testing.T) {
		env, ep := resetOne(t, s, "u-typed")
		sb, _ := s.Server.EnvSandbox(env)
		prov.Destroy(t.Context(), sb)
		res := stepOne(t, s, act(env, aci.Action{Verb: aci.Wait, MS: 1}))
		if codeOfErr(res.Error) != aci.CodeSandboxDied {
			t.Fatalf("step on a destroyed sandbox: %v; want sandbox_died", res.Error)
		}
		// The pool may see the death before the step (nothing recorded)
		// or the step may meet it (the broken step kept): either way the
		// episode ends sandbox_died.
		if tr := storedEpisode(t, s, ep); tr.ExitReason != trajectory.SandboxDied || len(tr.Steps) > 1 {
			t.Errorf("stored: exit %q, %d steps; want sandbox_died, at most the broken step", tr.ExitReason, len(tr.Steps))
		}
	})
}

func codeOfErr(e *aci.Error) aci.Code {
	if e == nil {
		return ""
	}
	return e.Code
}

// Forks and checkpoints keep their books: a fork's episodes start at the
// source's step with its screen and record fork_of; a checkpoint counts
// against max_checkpoints until deleted, and a reset from it resumes there.
func TestUnitForkAndCheckpoint(t *testing.T) {
	s := unitServer(t, func(c *configs.Server) { c.MaxCheckpoints = 1 })
	env, ep := resetOne(t, s, "u-typed")
	src := stepOne(t, s, act(env, aci.Action{Verb: aci.TypeText, Text: "ye"}))
	var fr api.BatchReply
	if _, _, err := s.Call("/v1/fork", api.ForkRequest{EnvID: env, N: 2}, &fr); err != nil {
		t.Fatal(err)
	}
	for _, r := range fr.Results {
		if r.Error != nil {
			t.Fatalf("fork: %v", r.Error)
		}
		t.Cleanup(func() { closeEnvs(s, r.EnvID) })
		if r.Obs == nil || r.Obs.Frame != src.Obs.Frame || r.Info == nil || r.Info.Step != 1 {
			t.Errorf("fork child: frame %v step %+v; want the source's frame at step 1", r.Obs, r.Info)
		}
		// The child's desktop is the source's: typing the rest scores 1.
		res := stepOne(t, s, act(r.EnvID, aci.Action{Verb: aci.TypeText, Text: "s"}, aci.Action{Verb: aci.Done}))
		if res.Reward == nil || *res.Reward != 1 {
			t.Errorf("fork child's reward %v; want 1", rv(res))
		}
		if tr := storedEpisode(t, s, r.EpisodeID); tr.ForkOf != ep {
			t.Errorf("fork child's fork_of %q; want %s", tr.ForkOf, ep)
		}
	}
	var ck api.Checkpoint
	if _, _, err := s.Call("/v1/checkpoint", api.CheckpointRequest{EnvID: env}, &ck); err != nil {
		t.Fatal(err)
	}
	if ck.Step != 1 || ck.Frame != src.Obs.Frame || ck.EpisodeID != ep {
		t.Errorf("checkpoint %+v; want step 1, the source's frame and episode", ck)
	}
	if _, _, err := s.Call("/v1/checkpoint", api.CheckpointRequest{EnvID: env}, &api.Checkpoint{}); codeOfErr(aci.AsError(err)) != aci.CodeCheckpointLimit {
		t.Errorf("a second checkpoint over max_checkpoints 1: %v; want checkpoint_limit", err)
	}
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Checkpoint: ck.CheckpointID}}}).Results[0]
	if r.Error != nil {
		t.Fatalf("reset from checkpoint: %v", r.Error)
	}
	t.Cleanup(func() { closeEnvs(s, r.EnvID) })
	if res := stepOne(t, s, act(r.EnvID, aci.Action{Verb: aci.TypeText, Text: "s"}, aci.Action{Verb: aci.Done})); res.Reward == nil || *res.Reward != 1 {
		t.Errorf("resumed from the checkpoint, reward %v; want 1", rv(res))
	}
}

// The server's limits: a batch over max_batch is refused whole, a step
// budget above the server's max_steps is capped, a reset may lower it.
func TestUnitLimits(t *testing.T) {
	s := unitServer(t, func(c *configs.Server) { c.MaxBatch, c.MaxSteps = 2, 2 })
	var r api.BatchReply
	_, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: "u-typed"}, {Task: "u-typed"}, {Task: "u-typed"}}}, &r)
	if codeOfErr(aci.AsError(err)) != aci.CodeBatchTooLarge {
		t.Fatalf("reset of 3 over max_batch 2: %v; want batch_too_large", err)
	}
	env, _ := resetOne(t, s, "u-typed") // the task's budget is 3; the server's 2
	stepOne(t, s, act(env, aci.Action{Verb: aci.Wait, MS: 1}))
	if res := stepOne(t, s, act(env, aci.Action{Verb: aci.Wait, MS: 1})); res.Info.ExitReason != string(trajectory.MaxSteps) {
		t.Errorf("step 2 of the server's 2: exit %q; want max_steps", res.Info.ExitReason)
	}
	lowered := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "u-typed", MaxSteps: 1}}}).Results[0]
	t.Cleanup(func() { closeEnvs(s, lowered.EnvID) })
	if res := stepOne(t, s, act(lowered.EnvID, aci.Action{Verb: aci.Wait, MS: 1})); res.Info.ExitReason != string(trajectory.MaxSteps) {
		t.Errorf("step 1 of a reset's max_steps 1: exit %q; want max_steps", res.Info.ExitReason)
	}
	// A duration past the step's budget is the agent's, and nothing runs.
	env2, _ := resetOne(t, s, "u-typed")
	res := stepOne(t, s, act(env2, aci.Action{Verb: aci.TypeText, Text: "y"}, aci.Action{Verb: aci.Wait, MS: 1 << 30}))
	if res.Info == nil || res.Info.Error == nil || res.Info.Error.Code != aci.CodeInvalidAction {
		t.Errorf("a wait past the step budget: %+v; want info.error invalid_action", res.Info)
	}
}
