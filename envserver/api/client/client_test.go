package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/vmihailenco/msgpack/v5"
)

func TestParseMetrics(t *testing.T) {
	m := ParseMetrics([]byte(`# HELP x y
# TYPE shinken_frames_total counter
shinken_frames_total{result="encoded"} 12
shinken_frames_total{result="not_modified"} 3
shinken_envs 2
garbage
`))
	if got := m[`shinken_frames_total{result="encoded"}`]; got != 12 {
		t.Errorf("encoded: got %v; want 12", got)
	}
	if got := m["shinken_envs"]; got != 2 {
		t.Errorf("envs: got %v; want 2", got)
	}
	if len(m) != 3 {
		t.Errorf("got %d series; want 3", len(m))
	}
}

// TestClientCountsWireBytes runs the client against a real HTTP server on
// loopback: replies decode, typed errors come back typed, and the byte
// counters cover at least the bodies both ways.
func TestClientCountsWireBytes(t *testing.T) {
	frame := make([]byte, 10000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req api.StepRequest
		if err := msgpack.Unmarshal(body, &req); err != nil || len(req.Steps) == 0 {
			w.WriteHeader(http.StatusBadRequest)
			b, _ := msgpack.Marshal(api.ErrorReply{Error: aci.Errorf(aci.CodeBadRequest, "empty batch")})
			w.Write(b)
			return
		}
		b, _ := msgpack.Marshal(api.BatchReply{
			Results: []api.Result{{EnvID: req.Steps[0].EnvID, Obs: &aci.Observation{Frame: "f1"}}},
			Frames:  map[string][]byte{"f1": frame},
		})
		w.Header().Set("Content-Type", "application/msgpack")
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	c := New(srv.URL, "", nil)
	t.Cleanup(c.CloseIdle)
	ctx := context.Background()
	rep, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: "e1", Action: &aci.Action{Verb: aci.Click}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(rep.Frames[rep.Results[0].Obs.Frame]); got != len(frame) {
		t.Errorf("frame bytes: got %d; want %d", got, len(frame))
	}
	sent, recv := c.WireBytes()
	if recv < int64(len(frame)) || sent <= 0 {
		t.Errorf("wire bytes: got sent %d recv %d; want sent > 0 and recv >= %d", sent, recv, len(frame))
	}
	_, err = c.Step(ctx, &api.StepRequest{})
	if code := aci.CodeOf(err); code != aci.CodeBadRequest {
		t.Errorf("empty step: got %v (code %q); want code bad_request", err, code)
	}
	var ae *aci.Error
	if !errors.As(err, &ae) {
		t.Errorf("empty step: got %T; want an *aci.Error in the chain", err)
	}
}
