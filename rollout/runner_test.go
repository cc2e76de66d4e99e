package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/pool/process"
	"github.com/shinken-rl/shinken/trajectory"
)

func TestMain(m *testing.M) { servertest.Main(m) }

// countStarts wraps a policy and counts the episodes it starts.
type countStarts struct {
	Policy
	n atomic.Int32
}

// NeedsTree forwards to the wrapped policy (tasks that replay element refs
// observe the tree).
func (c *countStarts) NeedsTree(task string) bool {
	n, ok := c.Policy.(treeNeeder)
	return ok && n.NeedsTree(task)
}

// playsScripts forwards to the wrapped policy (a scripted one's steps
// settle as a script's).
func (c *countStarts) playsScripts() bool {
	p, ok := c.Policy.(scriptPlayer)
	return ok && p.playsScripts()
}

func (c *countStarts) Start(ctx context.Context, task api.TaskInfo, seed int64) (Agent, error) {
	c.n.Add(1)
	return c.Policy.Start(ctx, task, seed)
}

func runCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestRunnerE2E runs the batch runner against a real env server (process
// sandboxes, Xvfb, guestd, HTTP on loopback), sharing one server across
// subtests to keep the package fast. The subtests on one task run first,
// while the pool holds only that task's golden checkpoint.
func TestRunnerE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("boots real sandboxes")
	}
	s := servertest.Start(t, servertest.Options{Pool: 2})
	client := NewClient(s.URL, s.Token, nil)
	tasks, err := configs.LoadTasks("")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("ForkedReplicas", func(t *testing.T) {
		id := "xterm-hello-file"
		sum, err := Run(runCtx(t), Config{Client: client, Policy: &Scripted{Tasks: tasks}, Tasks: []string{id},
			Replicas: 2, Fork: true, Concurrency: 2, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		if sum.Jobs != 2 || sum.Passed != 2 {
			t.Errorf("forked replicas: jobs %d passed %d (%v); want 2 passed", sum.Jobs, sum.Passed, sum.ExitReasons)
		}
		// The wrong solution fails the task and is never retried.
		sum, err = Run(runCtx(t), Config{Client: client, Policy: &Scripted{Tasks: tasks, Wrong: true}, Tasks: []string{id}, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		if r := sum.Results[0]; r.Passed || r.Attempts != 1 || r.ExitReason != string(trajectory.TaskComplete) {
			t.Errorf("wrong solution: %+v; want one unretried attempt, task_complete, not passed", r)
		}
	})

	t.Run("OracleInstances", func(t *testing.T) {
		// Each seed is another instance of the family; the oracle policy
		// draws the same instance as the server and solves it, in either
		// split, and the agent is prompted with the instance's instruction.
		id := "xterm-count-lines"
		for _, split := range []string{"", configs.SplitTest} {
			var prompts []string
			var mu sync.Mutex
			pol := PolicyFunc(func(ctx context.Context, task api.TaskInfo, seed int64) (Agent, error) {
				mu.Lock()
				prompts = append(prompts, task.Instruction)
				mu.Unlock()
				return (&Scripted{Tasks: tasks, Split: split}).Start(ctx, task, seed)
			})
			sum, err := Run(runCtx(t), Config{Client: client, Policy: pol, Tasks: []string{id}, Seeds: 3, Split: split,
				Concurrency: 2, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			if sum.Jobs != 3 || sum.Passed != 3 {
				t.Errorf("split %q: oracle passed %d of %d (%v); want all", split, sum.Passed, sum.Jobs, sum.ExitReasons)
			}
			for _, p := range prompts {
				if strings.Contains(p, "{{") || !strings.HasPrefix(p, "Count the lines of ~/") {
					t.Errorf("split %q: prompt %q is not an instance's instruction", split, p)
				}
			}
		}
	})

	t.Run("RandomPolicy", func(t *testing.T) {
		sum, err := Run(runCtx(t), Config{Client: client, Policy: &Random{DoneProb: 0.3}, Tasks: []string{"xterm-hello-file"},
			Seeds: 2, Concurrency: 2, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sum.Results {
			if r.Error != "" || r.Attempts != 1 || r.Steps == 0 || r.Passed ||
				r.ExitReason != string(trajectory.TaskComplete) && r.ExitReason != string(trajectory.MaxSteps) {
				t.Errorf("random episode %+v; want one failed attempt ending task_complete or max_steps", r)
			}
		}
		if sum.Jobs != 2 || sum.Steps == 0 || sum.WallS <= 0 {
			t.Errorf("summary %+v; want 2 jobs with steps and wall time", sum)
		}
	})

	t.Run("SandboxDeathIsRetried", func(t *testing.T) {
		prov, ok := s.Provider.(*process.Provider)
		if !ok {
			t.Skipf("provider %T cannot be killed from a test", s.Provider)
		}
		var killed atomic.Bool
		scripted := &Scripted{Tasks: tasks}
		killer := PolicyFunc(func(ctx context.Context, task api.TaskInfo, seed int64) (Agent, error) {
			inner, err := scripted.Start(ctx, task, seed)
			if err != nil {
				return nil, err
			}
			return AgentFunc(func(ctx context.Context, turn Turn) (Decision, error) {
				if turn.Step == 1 && killed.CompareAndSwap(false, true) {
					sb, ok := s.Server.EnvSandbox(turn.EnvID)
					pid := prov.InitPID(sb)
					if !ok || pid <= 0 {
						t.Errorf("no sandbox pid for env %s", turn.EnvID)
					} else if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
						t.Errorf("kill sandbox: %v", err)
					}
				}
				return inner.Act(ctx, turn)
			}), nil
		})
		out := t.TempDir()
		sum, err := Run(runCtx(t), Config{Client: client, Policy: killer, Tasks: []string{"xterm-hello-file"}, Out: out, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		r := sum.Results[0]
		if !killed.Load() {
			t.Fatal("the sandbox was never killed")
		}
		if r.Attempts != 2 || len(r.InfraFailures) != 1 || r.InfraFailures[0] != "sandbox_died" || !r.Passed {
			t.Errorf("result %+v; want 2 attempts, one sandbox_died infra failure, then a pass", r)
		}
		if sum.InfraRetries != 1 || sum.InfraFailed != 0 || sum.Passed != 1 {
			t.Errorf("summary infra_retries %d infra_failed %d passed %d; want 1, 0, 1", sum.InfraRetries, sum.InfraFailed, sum.Passed)
		}
		checkOutputs(t, out, 1)
	})

	for _, tc := range []struct {
		dialect string
		replies []string
	}{
		{"pyautogui", []string{
			"The terminal is open; I will focus it.\n```python\npyautogui.click(200, 200)\n```",
			"```python\npyautogui.write(\"echo 'hello shinken' > ~/hello.txt\")\npyautogui.press('enter')\n```",
			"```python\ntime.sleep(0.3)\n```\nDone now.\n```DONE```",
		}},
		{"xml", []string{
			`<think>click into the terminal</think><tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [200, 200]}}</tool_call>`,
			`<tool_call>{"name": "computer_use", "arguments": {"action": "type", "text": "echo 'hello shinken' > ~/hello.txt"}}</tool_call>` + "\n" +
				`<tool_call>{"name": "computer_use", "arguments": {"action": "key", "keys": ["enter"]}}</tool_call>`,
			`<tool_call>{"name": "computer_use", "arguments": {"action": "wait", "time": 0.3}}</tool_call>` +
				`<tool_call>{"name": "computer_use", "arguments": {"action": "terminate", "status": "success"}}</tool_call>`,
		}},
	} {
		t.Run("OpenAI_"+tc.dialect, func(t *testing.T) {
			llm := newFakeLLM(t, tc.replies)
			out := t.TempDir()
			pol := &OpenAI{URL: llm.URL + "/v1", Model: "fake", Dialect: tc.dialect, TokenIDs: true}
			sum, err := Run(runCtx(t), Config{Client: client, Policy: pol, Tasks: []string{"xterm-hello-file"}, Out: out,
				Observe: &api.Observe{Format: "png"}, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			r := sum.Results[0]
			if !r.Passed || r.Steps != 3 {
				t.Fatalf("result %+v; want a pass in 3 steps", r)
			}
			llm.mu.Lock()
			images := llm.images
			llm.mu.Unlock()
			if images == 0 {
				t.Errorf("the model never received a PNG screenshot")
			}
			st, err := trajectory.NewStore(filepath.Join(out, "trajectories"), trajectory.StoreOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tr, err := st.Load(r.EpisodeID)
			if err != nil {
				t.Fatal(err)
			}
			for i, step := range tr.Steps {
				if step.Text != tc.replies[i] || step.Dialect != tc.dialect || len(step.ResponseIDs) == 0 ||
					len(step.ResponseLogprobs) != len(step.ResponseIDs) {
					t.Errorf("step %d recorded text %q dialect %q ids %d logprobs %d; want the model's reply with tokens",
						i, step.Text, step.Dialect, len(step.ResponseIDs), len(step.ResponseLogprobs))
				}
			}
			// The verl row: model tokens are exactly the three responses.
			b, err := os.ReadFile(filepath.Join(out, "verl.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var row trajectory.Row
			if err := json.Unmarshal(bytes.TrimSpace(b), &row); err != nil {
				t.Fatalf("verl.jsonl: %v", err)
			}
			model := 0
			for _, m := range row.ResponseMask {
				model += m
			}
			want := 0
			for _, step := range tr.Steps {
				want += len(step.ResponseIDs)
			}
			if model != want || row.ExtraFields[trajectory.FieldTokenDrift] != false || row.RewardScore == nil ||
				*row.RewardScore != 1 || row.NumTurns != 3 || row.ExtraFields[trajectory.FieldDrop] != false {
				t.Errorf("verl row: %d model tokens (want %d), drift %v, reward %v, turns %d, drop %v", model, want,
					row.ExtraFields[trajectory.FieldTokenDrift], row.RewardScore, row.NumTurns,
					row.ExtraFields[trajectory.FieldDrop])
			}
			// Its screenshots: the reset frame, then the observations the later prompts carry.
			wantImgs := []trajectory.FrameRef{{Frame: tr.InitFrame}, {Frame: tr.Steps[0].ObsFrame}, {Frame: tr.Steps[1].ObsFrame}}
			if !reflect.DeepEqual(row.MultiModalData.Images, wantImgs) || row.Metrics.EnvSteps != 3 ||
				row.Metrics.ModelTokens != want || len(row.ResponseLogprobs) != len(row.ResponseIDs) {
				t.Errorf("verl row images %v (want %v), metrics %+v, %d logprobs for %d ids", row.MultiModalData.Images,
					wantImgs, row.Metrics, len(row.ResponseLogprobs), len(row.ResponseIDs))
			}
			if !bytes.Equal(mustJSON(row.PromptIDs), mustJSON(tr.Steps[0].PromptIDs)) {
				t.Errorf("verl prompt_ids are not turn 0's prompt")
			}
		})
	}

	t.Run("ScriptedPassesEveryTaskAndResumes", func(t *testing.T) {
		// The families of the light apps: the runner's concurrency, resume
		// and outputs are what is tested here. Every family's oracle, the
		// browser's and the office suite's included, is played by envserver's
		// task suite and by each family's check record; playing Chromium's
		// and LibreOffice's again here doubled the desktops of make test.
		tasks := lightTasks(tasks)
		out := t.TempDir()
		pol := &countStarts{Policy: &Scripted{Tasks: tasks}}
		cfg := Config{Client: client, Policy: pol, Tasks: tasks.IDs(), Concurrency: 2, Out: out, Logf: t.Logf}
		sum, err := Run(runCtx(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sum.Results {
			if !r.Passed || r.ExitReason != string(trajectory.TaskComplete) {
				t.Errorf("%s: exit %s reward %g error %q; want task_complete with reward 1", r.Job.Key(), r.ExitReason, r.Reward, r.Error)
			}
		}
		if sum.Jobs != len(tasks) || sum.Passed != len(tasks) || sum.PassRate != 1 || sum.ExitReasons["task_complete"] != len(tasks) {
			t.Errorf("summary jobs %d passed %d rate %g reasons %v; want all %d passed", sum.Jobs, sum.Passed, sum.PassRate, sum.ExitReasons, len(tasks))
		}
		checkOutputs(t, out, len(tasks))
		// Scripted episodes carry no tokens: the export skips them all.
		if sum.Verl == nil || sum.Verl.Rows != 0 || sum.Verl.Skipped != len(tasks) {
			t.Errorf("verl stats %+v; want 0 rows, %d skipped", sum.Verl, len(tasks))
		}

		// A second run over the same dir needs Resume ...
		if _, err := Run(runCtx(t), cfg); err == nil || !strings.Contains(err.Error(), "--resume") {
			t.Errorf("rerun without Resume: %v; want a refusal naming Resume", err)
		}
		// ... and with it, and one more seed, runs only the new seed's jobs.
		before := pol.n.Load()
		cfg.Resume, cfg.Seeds, cfg.Tasks = true, 2, tasks.IDs()[:1]
		sum2, err := Run(runCtx(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := pol.n.Load() - before; got != 1 {
			t.Errorf("resumed run started %d episodes; want 1 (seed 1 only)", got)
		}
		if sum2.Jobs != 2 || sum2.Resumed != 1 || sum2.Passed != 2 {
			t.Errorf("resumed summary jobs %d resumed %d passed %d; want 2, 1, 2", sum2.Jobs, sum2.Resumed, sum2.Passed)
		}
	})
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// checkOutputs checks a run directory: a summary, one results line and one
// labelled trajectory per job.
func checkOutputs(t *testing.T, out string, jobs int) {
	t.Helper()
	var sum Summary
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil || json.Unmarshal(b, &sum) != nil || sum.Jobs != jobs {
		t.Errorf("summary.json: %v, jobs %d; want %d", err, sum.Jobs, jobs)
	}
	b, err = os.ReadFile(filepath.Join(out, "results.jsonl"))
	if n := bytes.Count(b, []byte("\n")); err != nil || n != jobs {
		t.Errorf("results.jsonl: %v, %d lines; want %d", err, n, jobs)
	}
	st, err := trajectory.NewStore(filepath.Join(out, "trajectories"), trajectory.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ids, _ := st.List()
	if len(ids) != jobs {
		t.Errorf("%d trajectories; want %d", len(ids), jobs)
	}
	for _, id := range ids {
		tr, err := st.Load(id)
		if err != nil {
			t.Errorf("trajectory %s: %v", id, err)
		} else if tr.Labels[LabelJob] == "" || tr.EndedAt == nil {
			t.Errorf("trajectory %s: labels %v; want a finished, labelled episode", id, tr.Labels)
		}
	}
}

// lightTasks are the tasks none of whose apps is Chromium or LibreOffice.
func lightTasks(all configs.Tasks) configs.Tasks {
	out := configs.Tasks{}
	for id, task := range all {
		if !slices.ContainsFunc(task.Apps, func(a string) bool { return a == "chromium" || a == "libreoffice" }) {
			out[id] = task
		}
	}
	return out
}
