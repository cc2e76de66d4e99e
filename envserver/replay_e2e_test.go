package envserver_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

// TestStepRetryReplays: a step whose client gave up waiting is resent with
// its request_id; the step runs once (the trajectory holds one step) and
// every resend gets the same reply, its frame included whether or not the
// resend lists it in have (docs/api.md, "Retrying a step").
func TestStepRetryReplays(t *testing.T) {
	s := server(t)
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env, epID := r.Results[0].EnvID, r.Results[0].EpisodeID
	defer closeEnvs(s, env)

	slow := api.StepRequest{Steps: []api.StepEnv{{EnvID: env, RequestID: "req-1",
		Action: &aci.Action{Verb: aci.Wait, MS: 1500}}}}
	body, err := msgpack.Marshal(slow)
	if err != nil {
		t.Fatal(err)
	}
	// The client's deadline passes while the server is still waiting.
	impatient := &http.Client{Timeout: 300 * time.Millisecond}
	resp, err := impatient.Post(s.URL+"/v1/step", "application/msgpack", bytes.NewReader(body))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a 1.5 s step answered within the 300 ms client deadline (status %d)", resp.StatusCode)
	}
	var ne interface{ Timeout() bool }
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("first send: %v; want a client timeout", err)
	}

	first := step(t, s, slow) // waits for the step in flight, then gets its reply
	res := first.Results[0]
	if res.Error != nil || res.Info == nil || res.Info.Step != 1 || res.Obs == nil {
		t.Fatalf("resent step: %+v; want step 1 with an observation", res)
	}
	if len(first.Frames[res.Obs.Frame]) == 0 {
		t.Fatalf("resent step: frame %s not in the reply", res.Obs.Frame)
	}
	withHave := slow
	withHave.Have = []string{res.Obs.Frame}
	for i, req := range []api.StepRequest{slow, withHave} {
		again := step(t, s, req)
		a := again.Results[0]
		if a.Error != nil || a.EpisodeID != res.EpisodeID || a.Info.Step != 1 || a.Obs.Frame != res.Obs.Frame ||
			a.Info.Timings["act_us"] != res.Info.Timings["act_us"] {
			t.Fatalf("resend %d: %+v; want the stored reply %+v", i, a, res)
		}
		if _, sent := again.Frames[res.Obs.Frame]; sent == (i == 1) {
			t.Errorf("resend %d: frame sent %v; want it sent only when not in have", i, sent)
		}
	}
	var tr trajectory.Trajectory
	if err := msgpack.Unmarshal([]byte(getBody(t, s, "/v1/episodes/"+epID)), &tr); err != nil {
		t.Fatalf("episode: %v", err)
	}
	if len(tr.Steps) != 1 {
		t.Fatalf("trajectory holds %d steps after one step sent three times; want 1", len(tr.Steps))
	}

	// A new id is a new step; a step without an id always runs.
	next := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, RequestID: "req-2", Action: &aci.Action{Verb: aci.Wait, MS: 1}}}})
	plain := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Wait, MS: 1}}}})
	if got := []int{next.Results[0].Info.Step, plain.Results[0].Info.Step}; got[0] != 2 || got[1] != 3 {
		t.Fatalf("steps after the replay: %v; want [2 3]", got)
	}

	long := api.StepRequest{Steps: []api.StepEnv{{EnvID: env, RequestID: strings.Repeat("x", 129), Action: &aci.Action{Verb: aci.Wait, MS: 1}}}}
	if e := step(t, s, long).Results[0].Error; e == nil || e.Code != aci.CodeBadRequest {
		t.Fatalf("129-byte request_id: %v; want bad_request", e)
	}
}
