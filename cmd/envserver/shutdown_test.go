package main_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

// waitExit waits up to d for the server process to exit and returns its
// exit code.
func waitExit(t *testing.T, p *proc, d time.Duration) int {
	t.Helper()
	if _, ok := p.wait(d); !ok {
		t.Fatalf("envserver still running %v after the signal", d)
	}
	return p.cmd.ProcessState.ExitCode()
}

// TestSIGTERMGraceful: SIGTERM while a step is in flight lets the step
// finish and answer, refuses new connections, saves every episode whole
// (no journal left) and ends every sandbox process; the exit code is 0.
func TestSIGTERMGraceful(t *testing.T) {
	bin, guestd := binaries(t)
	state := t.TempDir()
	s := startServer(t, bin, guestd, state)
	var r api.BatchReply
	call(t, s.url, "/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}, {Task: "xterm-hello-file"}}}, &r)
	var envs []string
	for _, res := range r.Results {
		if res.Error != nil {
			t.Fatalf("reset: %v", res.Error)
		}
		envs = append(envs, res.EnvID)
	}
	var first api.BatchReply
	call(t, s.url, "/v1/step", api.StepRequest{Steps: []api.StepEnv{{EnvID: envs[0], Action: &aci.Action{Verb: aci.Move, Target: aci.Px(4, 4)}}}}, &first)
	procs := descendants(s.cmd.Process.Pid)

	// In flight: a 3 s wait on both envs.
	req := api.StepRequest{}
	for _, e := range envs {
		req.Steps = append(req.Steps, api.StepEnv{EnvID: e, Action: &aci.Action{Verb: aci.Wait, MS: 3000}})
	}
	body, _ := msgpack.Marshal(req)
	type answer struct {
		status int
		reply  api.BatchReply
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.Post(s.url+"/v1/step", "application/msgpack", bytes.NewReader(body))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var a answer
		a.status = resp.StatusCode
		a.err = msgpack.NewDecoder(resp.Body).Decode(&a.reply)
		got <- a
	}()
	waitInFlight(t, s.url)
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil || a.status != 200 || len(a.reply.Results) != 2 {
		t.Fatalf("in-flight step across SIGTERM: status %d, %v, %d results; want it finished and answered", a.status, a.err, len(a.reply.Results))
	}
	for _, res := range a.reply.Results {
		if res.Error != nil {
			t.Errorf("in-flight step of %s: %v; want it finished", res.EnvID, res.Error)
		}
	}
	if code := waitExit(t, s, 2*time.Minute); code != 0 {
		t.Errorf("exit code after SIGTERM: %d; want 0\n%s", code, s.log.String())
	}
	if _, err := http.Get(s.url + "/healthz"); err == nil {
		t.Errorf("a stopped server still accepts connections")
	}
	if j, _ := filepath.Glob(filepath.Join(state, "episodes", "episodes", "*.journal")); len(j) != 0 {
		t.Errorf("journals left after a graceful stop: %v; want every episode saved whole", j)
	}
	eps, _ := filepath.Glob(filepath.Join(state, "episodes", "episodes", "*.json"))
	if len(eps) != 2 {
		t.Errorf("episodes saved: %v; want 2", eps)
	}
	for _, e := range eps {
		b, _ := os.ReadFile(e)
		if !strings.Contains(string(b), `"steps":[{`) {
			t.Errorf("episode %s saved without its steps", filepath.Base(e))
		}
		// Cut by the server's stop, not by the agent or the trainer: typed
		// as infrastructure, so a trainer drops it.
		var tr trajectory.Trajectory
		if err := json.Unmarshal(b, &tr); err != nil || tr.ExitReason != trajectory.SandboxDied || tr.ExitDetail != trajectory.ExitDetailServerShutdown {
			t.Errorf("episode %s: exit %q detail %q (%v); want sandbox_died, server_shutdown", filepath.Base(e), tr.ExitReason, tr.ExitDetail, err)
		}
	}
	for pid, st := range procs {
		if alive(pid, st) {
			t.Errorf("sandbox process %d outlived a graceful stop", pid)
		}
	}
}

// waitInFlight waits (bounded) until the server reports a request in
// flight.
func waitInFlight(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/metrics")
		if err == nil {
			var b bytes.Buffer
			b.ReadFrom(resp.Body)
			resp.Body.Close()
			if strings.Contains(b.String(), `shinken_inflight_requests 1`) {
				return
			}
		}
		time.Sleep(10 * time.Millisecond) // polls the in-flight gauge
	}
	t.Fatalf("the step never showed as in flight")
}

// TestSecondSIGTERMExitsAtOnce: a second signal ends the server at once,
// and what it leaves is recovered whole by the next start.
func TestSecondSIGTERMExitsAtOnce(t *testing.T) {
	bin, guestd := binaries(t)
	state := t.TempDir()
	s := startServer(t, bin, guestd, state)
	var r api.BatchReply
	call(t, s.url, "/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}}, &r)
	env, ep := r.Results[0].EnvID, r.Results[0].EpisodeID
	var sr api.BatchReply
	call(t, s.url, "/v1/step", api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Move, Target: aci.Px(4, 4)}}}}, &sr)
	// A long step keeps the graceful stop waiting; the second signal cuts it.
	go http.Post(s.url+"/v1/step", "application/msgpack", bytes.NewReader(mustMsgpack(api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Wait, MS: 20000}}}})))
	waitInFlight(t, s.url)
	s.cmd.Process.Signal(syscall.SIGTERM)
	waitLog(t, s, "signal again to exit now")
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, s, 10*time.Second); code != 2 {
		t.Errorf("exit code after a second SIGTERM: %d; want 2", code)
	}
	s2 := startServer(t, bin, guestd, state)
	resp, err := http.Get(s2.url + "/v1/episodes/" + ep)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr trajectory.Trajectory
	if resp.StatusCode != 200 || msgpack.NewDecoder(resp.Body).Decode(&tr) != nil || len(tr.Steps) < 1 {
		t.Errorf("episode after an abrupt stop: status %d, %d steps; want it readable with its step", resp.StatusCode, len(tr.Steps))
	}
	if q, _ := filepath.Glob(filepath.Join(state, "episodes", "quarantine", "*")); len(q) != 0 {
		t.Errorf("files quarantined after an abrupt stop: %v", q)
	}
}

func mustMsgpack(v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// waitLog waits (bounded) until the server logged s.
func waitLog(t *testing.T, p *proc, s string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(p.log.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("server never logged %q:\n%s", s, p.log.String())
		}
		time.Sleep(10 * time.Millisecond) // polls the log it writes
	}
}
