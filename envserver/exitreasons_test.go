package envserver_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/trajectory"
)

// exitTasks are small tasks made to end one way each.
var exitTasks = map[string]string{
	"t-max":    `{"id": "t-max", "instruction": "do nothing", "verifier": {"shell": "echo 0"}, "max_steps": 1, "solution": []}`,
	"t-scorer": `{"id": "t-scorer", "instruction": "anything", "verifier": {"shell": "echo broken >&2; exit 3"}, "max_steps": 5, "solution": []}`,
	"t-setup":  `{"id": "t-setup", "instruction": "never starts", "setup": [{"wait_window": {"match": "no-such-window-anywhere", "timeout_ms": 300}}], "verifier": {"shell": "echo 1"}, "max_steps": 5, "solution": []}`,
	"t-done":   `{"id": "t-done", "instruction": "say done", "verifier": {"shell": "echo 1"}, "max_steps": 5, "solution": []}`,
}

// TestExitReasons produces, over the real API, every exit reason an
// episode can end with, and checks the reply and the stored trajectory
// agree: task_complete, max_steps, scorer_error, setup_error, a final-step
// agent_error, and sandbox_died.
func TestExitReasons(t *testing.T) {
	dir := t.TempDir()
	for id, js := range exitTasks {
		if err := os.WriteFile(filepath.Join(dir, id+".json"), []byte(js), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := servertest.Start(t, servertest.Options{Pool: 2, Tasks: dir})
	episode := func(id string) trajectory.Trajectory {
		t.Helper()
		var tr trajectory.Trajectory
		if err := msgpackGet(t, s, "/v1/episodes/"+id, &tr); err != nil {
			t.Fatalf("episode %s: %v", id, err)
		}
		return tr
	}
	one := func(task string, a aci.Action) api.Result {
		t.Helper()
		r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task}}})
		env := r.Results[0].EnvID
		t.Cleanup(func() { closeEnvs(s, env) })
		out := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &a}}})
		return out.Results[0]
	}
	cases := []struct {
		name, task string
		action     aci.Action
		want       trajectory.ExitReason
		terminated bool
	}{
		{"task_complete", "t-done", aci.Action{Verb: aci.Done}, trajectory.TaskComplete, true},
		{"max_steps", "t-max", aci.Action{Verb: aci.Move, Target: aci.Px(3, 3)}, trajectory.MaxSteps, false},
		{"scorer_error", "t-scorer", aci.Action{Verb: aci.Done}, trajectory.ScorerError, true},
		// The last allowed step carries an action the sandbox refuses.
		{"agent_error", "t-max", aci.Action{Verb: aci.Click}, trajectory.AgentError, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := one(tc.task, tc.action)
			if res.Info == nil || res.Info.ExitReason != string(tc.want) {
				t.Fatalf("reply: info %+v error %v; want exit_reason %s", res.Info, res.Error, tc.want)
			}
			if res.Terminated != tc.terminated || res.Truncated == tc.terminated {
				t.Errorf("terminated %v truncated %v; want terminated %v", res.Terminated, res.Truncated, tc.terminated)
			}
			if tr := episode(res.EpisodeID); tr.ExitReason != tc.want || tr.EndedAt == nil {
				t.Errorf("stored episode: exit %q ended %v; want %s", tr.ExitReason, tr.EndedAt, tc.want)
			}
			if tc.want == trajectory.ScorerError && (res.Info.Error == nil || res.Reward != nil) {
				t.Errorf("scorer_error: info error %v reward %v; want the verifier's failure and reward null", res.Info.Error, rv(res))
			}
		})
	}
	t.Run("setup_error", func(t *testing.T) {
		var r api.BatchReply
		if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: "t-setup"}}}, &r); err != nil {
			t.Fatal(err)
		}
		res := r.Results[0]
		defer closeEnvs(s, res.EnvID)
		if res.Error == nil || res.Info == nil || res.Info.ExitReason != string(trajectory.SetupError) {
			t.Fatalf("reset of a task whose window never shows: error %v info %+v; want an error and exit_reason setup_error (not sandbox_died)", res.Error, res.Info)
		}
		if tr := episode(res.EpisodeID); tr.ExitReason != trajectory.SetupError {
			t.Errorf("stored episode: exit %q; want setup_error", tr.ExitReason)
		}
	})
	t.Run("sandbox_died", func(t *testing.T) {
		r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "t-done"}}})
		env := r.Results[0].EnvID
		defer closeEnvs(s, env)
		sb, _ := s.Server.EnvSandbox(env)
		if err := s.Provider.Destroy(t.Context(), sb); err != nil {
			t.Fatal(err)
		}
		out := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Move, Target: aci.Px(3, 3)}}}})
		res := out.Results[0]
		if res.Error == nil || res.Error.Code != aci.CodeSandboxDied {
			t.Fatalf("step on a destroyed sandbox: %v; want sandbox_died", res.Error)
		}
		if tr := episode(r.Results[0].EpisodeID); tr.ExitReason != trajectory.SandboxDied {
			t.Errorf("stored episode: exit %q; want sandbox_died", tr.ExitReason)
		}
	})
}

// TestPoolExhausted: a reset that finds no room in the pool within the
// lease timeout gets pool_exhausted in its slot; the other env of the batch
// is served.
func TestPoolExhausted(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) {
		c.MaxSandboxes = 1
		c.ReplicasPerGolden = -1
		c.LeaseTimeout = configs.Duration(time.Second)
	}})
	// The one sandbox is booted before the clock of the short lease
	// timeout starts.
	if err := s.Pool.WaitWarm(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	var r api.BatchReply
	if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}, {Task: "xterm-hello-file"}}}, &r); err != nil {
		t.Fatal(err)
	}
	var ok, exhausted int
	for _, res := range r.Results {
		defer closeEnvs(s, res.EnvID)
		switch {
		case res.Error == nil:
			ok++
		case res.Error.Code == aci.CodePoolExhausted:
			exhausted++
		default:
			t.Errorf("env %s: %v; want success or pool_exhausted", res.EnvID, res.Error)
		}
	}
	if ok != 1 || exhausted != 1 {
		t.Errorf("two resets on a pool of one: %d served, %d pool_exhausted; want 1 and 1", ok, exhausted)
	}
}
