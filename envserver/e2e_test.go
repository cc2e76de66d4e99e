package envserver_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/pool/process"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

func TestMain(m *testing.M) { servertest.Main(m) }

// server returns the server shared by the end-to-end tests of this package:
// booting sandboxes is the slow part, and the tests use separate envs.
func server(t *testing.T) *servertest.Server {
	return servertest.Shared(t, "e2e", servertest.Options{Pool: 3})
}

func reset(t *testing.T, s *servertest.Server, req api.ResetRequest) *api.BatchReply {
	t.Helper()
	var r api.BatchReply
	if _, _, err := s.Call("/v1/reset", req, &r); err != nil {
		t.Fatalf("reset: %v", err)
	}
	if len(r.Results) != len(req.Envs) {
		t.Fatalf("reset: got %d results; want %d", len(r.Results), len(req.Envs))
	}
	for _, res := range r.Results {
		if res.Error != nil {
			t.Fatalf("reset %s: %v", res.EnvID, res.Error)
		}
	}
	return &r
}

// rv is a result's reward, NaN when it is not a score (null on the wire),
// so that no comparison with a number passes on it.
func rv(r api.Result) float64 {
	if v, ok := r.Scored(); ok {
		return v
	}
	return math.NaN()
}

func step(t *testing.T, s *servertest.Server, req api.StepRequest) *api.BatchReply {
	t.Helper()
	var r api.BatchReply
	if _, _, err := s.Call("/v1/step", req, &r); err != nil {
		t.Fatalf("step: %v", err)
	}
	for _, res := range r.Results {
		if res.Info != nil && res.Info.ExitReason == string(trajectory.SandboxDied) {
			t.Logf("step %s: sandbox died: %v", res.EnvID, res.Error)
		}
	}
	return &r
}

func closeEnvs(s *servertest.Server, ids ...string) {
	live := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" { // a slot that failed leased nothing
			live = append(live, id)
		}
	}
	s.Call("/v1/close", api.CloseRequest{EnvIDs: live}, nil)
}

// play runs each env's script in lockstep batches and returns each env's
// final reward, terminated flag and exit reason.
func play(t *testing.T, s *servertest.Server, envs []string, scripts [][][]aci.Action) (rewards []float64, reasons []string) {
	t.Helper()
	return playObserving(t, s, envs, scripts, nil)
}

// playObserving is play with an observe setting on every step.
func playObserving(t *testing.T, s *servertest.Server, envs []string, scripts [][][]aci.Action, obs *api.Observe) (rewards []float64, reasons []string) {
	t.Helper()
	return playSteps(t, s, envs, scripts, obs, true)
}

// playSteps plays scripts on envs, a batch per step, and returns each
// env's reward and exit reason; strict fails the test on an agent error in
// a step and checks every observation.
func playSteps(t *testing.T, s *servertest.Server, envs []string, scripts [][][]aci.Action, obs *api.Observe, strict bool) (rewards []float64, reasons []string) {
	t.Helper()
	rewards = make([]float64, len(envs))
	reasons = make([]string, len(envs))
	for k := 0; ; k++ {
		req := api.StepRequest{Observe: obs}
		var idx []int
		for i, sc := range scripts {
			if k < len(sc) {
				req.Steps = append(req.Steps, api.StepEnv{EnvID: envs[i], Actions: sc[k]})
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return rewards, reasons
		}
		r := step(t, s, req)
		for j, res := range r.Results {
			i := idx[j]
			if res.Error != nil {
				t.Fatalf("env %s step %d: %v", envs[i], k, res.Error)
			}
			if strict {
				checkStep(t, envs[i], k, r, &res)
			}
			if res.Terminated || res.Truncated {
				rewards[i], reasons[i] = rv(res), res.Info.ExitReason
			}
		}
	}
}

// checkStep fails t on a step that recorded an agent error or whose
// observation is not in the reply.
func checkStep(t *testing.T, env string, k int, r *api.BatchReply, res *api.Result) {
	t.Helper()
	if res.Info != nil && res.Info.Error != nil {
		t.Errorf("env %s step %d: agent error %v", env, k, res.Info.Error)
	}
	if res.Obs == nil || len(res.Obs.Frame) != 32 {
		t.Errorf("env %s step %d: bad observation %+v", env, k, res.Obs)
	} else if _, ok := r.Frames[res.Obs.Frame]; !ok {
		t.Errorf("env %s step %d: frame %s not in reply", env, k, res.Obs.Frame)
	}
}

// TestTaskSuite runs the task checker (docs/tasks.md, "The task checker")
// over a sample of every shipped family: seed 0's doing nothing, oracle,
// wrong solutions, another seed's oracle, a second reset, and one hostile
// file per output, its kind rotated by family so the suite covers them all.
// `envserver tasks check --seeds 20` runs the whole of it.
//
// It also replays each family's seed-0 oracle on other seeds (6 per
// family, the same seeds every run, over 200 in all): a policy that
// memorized one answer per family must earn at most 10% of the maximum
// over them all.
func TestTaskSuite(t *testing.T) {
	// A server of its own, closed when the suite ends: every family's
	// golden keeps a warm replica, and the shared server would carry the
	// suite's sixty-odd desktops (idle browsers and office suites among
	// them) through every test after it.
	s := servertest.Start(t, servertest.Options{Pool: 3})
	shipped, err := configs.LoadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range shipped.IDs() {
		if s.Tasks[id] == nil {
			t.Errorf("shipped task %s is refused by the server (its log says why: a stale check record?)", id)
		}
	}
	ids, _ := a11yTasks(t, s) // tasks whose solutions act on element refs need the tree
	// Six at once: much of an episode is waiting (an app's window, a
	// settle), not CPU. The PDF viewer's families play two at a time after
	// the rest: their oracles focus windows by position, and a machine
	// loaded by six desktops draws mupdf late.
	parallel, slow := 6, 2
	if raceEnabled {
		parallel = 2
	}
	var fast, mupdf, heavy []string
	kinds := map[string]bool{}
	for _, id := range ids {
		switch apps := s.Tasks[id].Apps; {
		case slices.Contains(apps, "chromium") || slices.Contains(apps, "libreoffice"):
			// One family of each kind (its apps, web apps and documents):
			// every family of the kind shares that setup and its record
			// proves the rest.
			if k := heavyKind(s.Tasks[id]); !kinds[k] {
				kinds[k] = true
				heavy = append(heavy, id)
			}
		case slices.Contains(apps, "mupdf"):
			mupdf = append(mupdf, id)
		default:
			fast = append(fast, id)
		}
	}
	var checks []*envserver.TaskCheck
	// The memorized-oracle replays (6 per family, over 200 in all) run on
	// the fast families.
	// The browser's and the office suite's families (two desktops at
	// once: each app takes a core to start), one of each kind, play their
	// smoke pass, doing nothing and the oracle: the full check is their
	// record's.
	for _, part := range []struct {
		ids         []string
		n, transfer int
		smoke       bool
	}{{fast, parallel, 6, false}, {mupdf, slow, 0, false}, {heavy, 2, 0, true}} {
		if len(part.ids) == 0 {
			continue
		}
		cs, err := s.Server.CheckTasks(context.Background(), envserver.CheckOptions{Families: part.ids, Seeds: 1, Hostile: 1,
			Transfer: part.transfer, Parallel: part.n, Smoke: part.smoke, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		checks = append(checks, cs...)
	}
	var n int
	var scored float64
	for _, c := range checks {
		for _, f := range c.Failures {
			t.Errorf("%s: %s", c.Family, f)
		}
		if c.Transfer != nil {
			n += c.Transfer.Episodes
			scored += c.Transfer.Scored
			if c.Transfer.Scored > 0 {
				t.Logf("%s: a memorized oracle earned %.1f of %d", c.Family, c.Transfer.Scored, c.Transfer.Episodes)
			}
		}
	}
	if n < 200 {
		t.Errorf("memorized oracles replayed on %d instances; want at least 200", n)
	}
	if n > 0 && scored/float64(n) > 0.10 {
		t.Errorf("memorized oracles earned %.1f%% of the maximum over %d instances; want at most 10%%", 100*scored/float64(n), n)
	}
	t.Logf("memorized oracles: %.1f of %d episodes", scored, n)
}

// heavyKind names what a browser or office family runs: its apps, the web
// apps it serves and the kinds of document it opens.
func heavyKind(t *configs.Task) string {
	k := strings.Join(t.Apps, "+")
	in, err := t.Instantiate(configs.SplitTrain, 0)
	if err != nil {
		return k
	}
	for _, st := range in.InstanceSetup {
		switch {
		case st.Web != nil:
			k += "+" + st.Web.App
		case st.PutFile != nil:
			k += "+" + filepath.Ext(st.PutFile.Path)
		}
	}
	return k
}

// instanceOf is the task instance a reset or fork reply says its env runs.
func instanceOf(t testing.TB, s *servertest.Server, res api.Result) *configs.Instance {
	t.Helper()
	if res.Info == nil || res.Info.Seed == nil {
		t.Fatalf("reply names no instance: %+v", res.Info)
	}
	in, err := s.Tasks[res.Info.Task].Instantiate(res.Info.Split, *res.Info.Seed)
	if err != nil {
		t.Fatal(err)
	}
	if in.Instruction != res.Info.Instruction {
		t.Fatalf("instance instruction %q; the server says %q", in.Instruction, res.Info.Instruction)
	}
	return in
}

// TestEpisodeRecorded checks the trajectory behind a finished episode.
func TestEpisodeRecorded(t *testing.T) {
	s := server(t)
	task := s.Tasks["xterm-hello-file"]
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task.ID}}})
	env, epID := r.Results[0].EnvID, r.Results[0].EpisodeID
	defer closeEnvs(s, env)
	for i, acts := range task.Solution {
		tok := &api.Tokens{PromptIDs: []int{1, 2, i}, ResponseIDs: []int{7, 8}, ResponseLogprobs: []float64{-0.5, -0.25}}
		step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: acts, Tokens: tok}}})
	}
	var tr trajectory.Trajectory
	if err := msgpack.Unmarshal([]byte(getBody(t, s, "/v1/episodes/"+epID)), &tr); err != nil {
		t.Fatalf("episode: %v", err)
	}
	tp := &tr
	if tp.ExitReason != trajectory.TaskComplete || tp.Reward != 1 || len(tp.Steps) != len(task.Solution) {
		t.Fatalf("got exit %q reward %v steps %d; want task_complete 1 %d", tp.ExitReason, tp.Reward, len(tp.Steps), len(task.Solution))
	}
	if got := tp.Steps[1].ResponseLogprobs; len(got) != 2 || got[1] != -0.25 {
		t.Errorf("logprobs: got %v; want [-0.5 -0.25]", got)
	}
	if tp.Steps[2].PromptIDs[2] != 2 {
		t.Errorf("prompt ids: got %v; want [1 2 2]", tp.Steps[2].PromptIDs)
	}
	var again api.BatchReply
	_, _, err := s.Call("/v1/step", api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Wait, MS: 1}}}}, &again)
	if err != nil || again.Results[0].Error == nil || again.Results[0].Error.Code != aci.CodeEpisodeOver {
		t.Errorf("step after done: got %+v, %v; want episode_over in the slot", again.Results, err)
	}
}

// TestForkAndSharedCache forks an env after it wrote a file: every child sees
// the file, children are isolated from each other, and the N children cost
// one encode through the shared frame cache.
func TestForkAndSharedCache(t *testing.T) {
	s := server(t)
	task := s.Tasks["xterm-hello-file"]
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task.ID}}})
	parent := r.Results[0].EnvID
	defer closeEnvs(s, parent)
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: parent, Actions: task.Solution[0]}}})
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: parent, Actions: task.Solution[1]}}})
	s.WaitEnv(t, parent, `[ "$(cat ~/hello.txt 2>/dev/null)" = "hello shinken" ]`)

	before := metric(t, s, `shinken_frames_total{result="encoded"}`)
	const n = 4
	var fr api.BatchReply
	if _, _, err := s.Call("/v1/fork", api.ForkRequest{EnvID: parent, N: n}, &fr); err != nil {
		t.Fatalf("fork: %v", err)
	}
	var kids []string
	for _, res := range fr.Results {
		if res.Error != nil {
			t.Fatalf("fork child: %v", res.Error)
		}
		if res.Info.ForkOf != parent {
			t.Errorf("fork_of: got %q; want %q", res.Info.ForkOf, parent)
		}
		kids = append(kids, res.EnvID)
	}
	defer closeEnvs(s, kids...)
	if len(kids) != n {
		t.Fatalf("got %d children; want %d", len(kids), n)
	}
	if enc := metric(t, s, `shinken_frames_total{result="encoded"}`) - before; enc > 1 {
		t.Errorf("forking %d replicas encoded %v frames; want at most 1 (shared cache)", n, enc)
	}
	if len(fr.Frames) > 1 {
		t.Errorf("fork reply carries %d frames; want the one they share", len(fr.Frames))
	}
	// Child 1 deletes the file; child 0 must still see it.
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: kids[1], Actions: []aci.Action{
		{Verb: aci.Click, Target: aci.Px(200, 200)}, {Verb: aci.TypeText, Text: "rm ~/hello.txt"}, {Verb: aci.Key, Keys: "Return"}}}}})
	s.WaitEnv(t, kids[1], `[ ! -e ~/hello.txt ]`)
	done := step(t, s, api.StepRequest{Steps: []api.StepEnv{
		{EnvID: kids[0], Action: &aci.Action{Verb: aci.Done}}, {EnvID: kids[1], Action: &aci.Action{Verb: aci.Done}}}})
	if got := rv(done.Results[0]); got != 1 {
		t.Errorf("child 0 reward: got %v; want 1 (inherits the parent's file)", got)
	}
	if got := rv(done.Results[1]); got != 0 {
		t.Errorf("child 1 reward: got %v; want 0 (deleted its own copy)", got)
	}
}

// TestBatchWithDeadSandbox kills one env's sandbox; its slot says
// sandbox_died and the others step normally.
func TestBatchWithDeadSandbox(t *testing.T) {
	s := server(t)
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}, {Task: "xterm-hello-file"}, {Task: "xterm-hello-file"}}})
	var envs []string
	for _, res := range r.Results {
		envs = append(envs, res.EnvID)
	}
	defer closeEnvs(s, envs...)
	sb, ok := s.Server.EnvSandbox(envs[1])
	if !ok {
		t.Fatal("no sandbox for env 1")
	}
	pid := s.Provider.(*process.Provider).InitPID(sb)
	if pid <= 0 {
		t.Fatalf("no init pid for sandbox %s", sb)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	var req api.StepRequest
	for _, e := range envs {
		req.Steps = append(req.Steps, api.StepEnv{EnvID: e, Action: &aci.Action{Verb: aci.Move, Target: aci.Px(10, 10)}})
	}
	out := step(t, s, req)
	for i, res := range out.Results {
		if i == 1 {
			if res.Error == nil || res.Error.Code != aci.CodeSandboxDied {
				t.Errorf("killed env: got error %v; want sandbox_died", res.Error)
			}
			continue
		}
		if res.Error != nil || res.Obs == nil {
			t.Errorf("env %d: got error %v obs %v; want a normal step", i, res.Error, res.Obs)
		}
	}
	// The dead env can be reset onto a fresh sandbox.
	rr := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{EnvID: envs[1], Task: "xterm-hello-file"}}})
	if rr.Results[0].Error != nil {
		t.Errorf("reset after death: %v", rr.Results[0].Error)
	}
}

// TestHaveSkipsFrames: a frame the client lists in have is not sent again.
func TestHaveSkipsFrames(t *testing.T) {
	s := server(t)
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-count-lines"}}})
	env, frame := r.Results[0].EnvID, r.Results[0].Obs.Frame
	defer closeEnvs(s, env)
	if len(r.Frames[frame]) == 0 {
		t.Fatal("reset reply lacks its frame")
	}
	wait := &aci.Action{Verb: aci.Wait, MS: 1}
	var without, with api.BatchReply
	_, bytesWithout, err := s.Call("/v1/step", api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: wait}}}, &without)
	if err != nil {
		t.Fatal(err)
	}
	_, bytesWith, err := s.Call("/v1/step", api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: wait}}, Have: []string{frame}}, &with)
	if err != nil {
		t.Fatal(err)
	}
	if with.Results[0].Obs.Frame != frame || without.Results[0].Obs.Frame != frame {
		t.Fatalf("screen changed on wait: %s, %s, %s", frame, without.Results[0].Obs.Frame, with.Results[0].Obs.Frame)
	}
	if len(with.Frames) != 0 {
		t.Errorf("with have: got %d frames; want 0", len(with.Frames))
	}
	if len(without.Frames) != 1 || bytesWith >= bytesWithout/10 {
		t.Errorf("bytes: %d with have, %d without; want the frame sent only without", bytesWith, bytesWithout)
	}
	t.Logf("step reply: %d bytes without have, %d with", bytesWithout, bytesWith)
}

func metric(t *testing.T, s *servertest.Server, series string) float64 {
	t.Helper()
	body := getBody(t, s, "/metrics")
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, series+" ") {
			var v float64
			if _, err := fmt.Sscan(strings.TrimPrefix(line, series+" "), &v); err != nil {
				t.Fatalf("metric %s: %q: %v", series, line, err)
			}
			return v
		}
	}
	t.Fatalf("metric %s not exported", series)
	return 0
}

// getBody GETs path and returns the body, failing the test on a non-200.
func getBody(t *testing.T, s *servertest.Server, path string) string {
	t.Helper()
	resp, err := http.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: status %d, %v: %.200s", path, resp.StatusCode, err, b)
	}
	return string(b)
}

// msgpackGet GETs path and decodes its msgpack body into v.
func msgpackGet(t *testing.T, s *servertest.Server, path string, v any) error {
	return msgpack.Unmarshal([]byte(getBody(t, s, path)), v)
}
