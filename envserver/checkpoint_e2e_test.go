package envserver_test

import (
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/pool/pooltest"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

// ckRequest sends a bodiless GET or DELETE to path and decodes the msgpack
// reply into v, or returns the typed error.
func ckRequest(t *testing.T, s *servertest.Server, method, path string, v any) error {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/msgpack")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		var e api.ErrorReply
		if err := msgpack.Unmarshal(b, &e); err != nil || e.Error == nil {
			t.Fatalf("%s %s: status %d: %q", method, path, resp.StatusCode, b)
		}
		if e.Error.Code.HTTPStatus() != resp.StatusCode {
			t.Errorf("%s %s: status %d for code %s; want %d", method, path, resp.StatusCode, e.Error.Code, e.Error.Code.HTTPStatus())
		}
		return e.Error
	}
	return msgpack.Unmarshal(b, v)
}

func codeIs(err error, c aci.Code) bool {
	var e *aci.Error
	return errors.As(err, &e) && e.Code == c
}

// TestCheckpoints takes a named checkpoint of a live episode over HTTP,
// forks 8 envs from it and resets one from it: each child holds the
// checkpoint's files (not the parent's later ones), shows the checkpoint's
// screen and carries on its step count, and its trajectory says where it
// came from. Then the limits: count and bytes give checkpoint_limit, an
// unknown checkpoint is not_found, and an unused one expires after its TTL.
func TestCheckpoints(t *testing.T) {
	const ttl = 20 * time.Second
	s := servertest.Start(t, servertest.Options{Pool: 2, Edit: func(c *configs.Server) {
		c.MaxCheckpoints, c.MaxCheckpointBytes, c.CheckpointTTL = 2, 4<<20, configs.Duration(ttl)
	}})
	var spec api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &spec); err != nil {
		t.Fatal(err)
	}
	if !spec.Pool.Checkpoint || spec.Limits.MaxCheckpoints != 2 || spec.Limits.MaxCheckpointBytes != 4<<20 || spec.Limits.CheckpointTTLS != 20 {
		t.Fatalf("spec: pool.checkpoint %v, limits %+v; want checkpoints served with the configured limits", spec.Pool.Checkpoint, spec.Limits)
	}

	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	parent := r.Results[0].EnvID
	defer closeEnvs(s, parent)
	// The episode's files change behind the screen (as a script the agent
	// ran would change them); a step moves the episode on.
	pg, ok := s.Server.EnvGuest(parent)
	if !ok {
		t.Fatal("parent has no sandbox")
	}
	pooltest.MustSh(t, pg, `echo 'hello shinken' > ~/hello.txt && mkdir -p ~/tree/a && seq 1 5000 > ~/tree/a/numbers`)
	st := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: parent, Action: &aci.Action{Verb: aci.Screenshot}}}})
	if st.Results[0].Error != nil {
		t.Fatalf("parent step: %v", st.Results[0].Error)
	}
	frame := st.Results[0].Obs.Frame
	snapshots := func() int { // the provider's snapshot directories (the task's golden is one)
		m, _ := filepath.Glob(filepath.Join(s.State, "sandboxes", "runs", "*", "snapshots", "*"))
		return len(m)
	}
	before := snapshots()

	var ck api.Checkpoint
	if _, _, err := s.Call("/v1/checkpoint", api.CheckpointRequest{EnvID: parent}, &ck); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if ck.CheckpointID == "" || ck.EnvID != parent || ck.EpisodeID != r.Results[0].EpisodeID || ck.Step != 1 || ck.Frame != frame || ck.Task != "xterm-hello-file" {
		t.Fatalf("checkpoint = %+v; want the parent's env, episode, step 1 and frame %s", ck, frame)
	}
	if ck.Bytes < 20000 || ck.ExpiresInMS <= 0 {
		t.Errorf("checkpoint bytes %d, expires in %d ms; want at least the files written (~24 KB) and a TTL", ck.Bytes, ck.ExpiresInMS)
	}
	// The parent goes on; its checkpoint does not.
	pooltest.MustSh(t, pg, `echo changed > ~/hello.txt`)

	const n = 8
	var fr api.BatchReply
	if _, _, err := s.Call("/v1/fork", api.ForkRequest{Checkpoint: ck.CheckpointID, N: n}, &fr); err != nil {
		t.Fatalf("fork of checkpoint: %v", err)
	}
	var kids []string
	for _, res := range fr.Results {
		kids = append(kids, res.EnvID)
	}
	defer closeEnvs(s, kids...)
	var rr api.BatchReply
	if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Checkpoint: ck.CheckpointID}}}, &rr); err != nil {
		t.Fatalf("reset from checkpoint: %v", err)
	}
	defer closeEnvs(s, rr.Results[0].EnvID)
	if len(fr.Results) != n {
		t.Fatalf("fork: %d results; want %d", len(fr.Results), n)
	}
	for _, res := range append(fr.Results, rr.Results...) {
		if res.Error != nil {
			t.Fatalf("child %s: %v", res.EnvID, res.Error)
		}
		if res.Obs.Frame != ck.Frame {
			t.Errorf("child %s shows frame %s; want the checkpoint's %s", res.EnvID, res.Obs.Frame, ck.Frame)
		}
		if res.Info.Checkpoint != ck.CheckpointID || res.Info.ForkOf != parent || res.Info.Step != 1 || res.Info.Task != "xterm-hello-file" {
			t.Errorf("child %s info = checkpoint %q fork_of %q step %d task %q; want %s, %s, 1, xterm-hello-file",
				res.EnvID, res.Info.Checkpoint, res.Info.ForkOf, res.Info.Step, res.Info.Task, ck.CheckpointID, parent)
		}
		g, ok := s.Server.EnvGuest(res.EnvID)
		if !ok {
			t.Fatalf("child %s has no sandbox", res.EnvID)
		}
		if got := pooltest.MustSh(t, g, `cat ~/hello.txt; md5sum < ~/tree/a/numbers`); got != "hello shinken\n"+pooltest.MustSh(t, pg, `md5sum < ~/tree/a/numbers`) {
			t.Errorf("child %s files: %q; want the checkpoint's", res.EnvID, got)
		}
		var traj trajectory.Trajectory
		if err := msgpackGet(t, s, "/v1/episodes/"+res.EpisodeID, &traj); err != nil {
			t.Fatal(err)
		}
		if traj.Checkpoint != ck.CheckpointID || traj.ForkOf != ck.EpisodeID {
			t.Errorf("child episode %s: checkpoint %q fork_of %q; want %s and the parent's episode %s", res.EpisodeID, traj.Checkpoint, traj.ForkOf, ck.CheckpointID, ck.EpisodeID)
		}
	}
	// A child steps on from the checkpoint's step count.
	cs := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: kids[0], Action: &aci.Action{Verb: aci.Wait, MS: 1}}}})
	if cs.Results[0].Error != nil || cs.Results[0].Info.Step != 2 {
		t.Errorf("child step: %+v; want step 2", cs.Results[0])
	}

	// Count: the second checkpoint fits, the third does not.
	var ck2 api.Checkpoint
	if _, _, err := s.Call("/v1/checkpoint", api.CheckpointRequest{EnvID: parent}, &ck2); err != nil {
		t.Fatalf("second checkpoint: %v", err)
	}
	if status, _, err := s.Call("/v1/checkpoint", api.CheckpointRequest{EnvID: parent}, nil); !codeIs(err, aci.CodeCheckpointLimit) || status != 429 {
		t.Errorf("third checkpoint over max_checkpoints 2: status %d, %v; want 429 checkpoint_limit", status, err)
	}
	var del api.CheckpointDeleteReply
	if err := ckRequest(t, s, http.MethodDelete, "/v1/checkpoint/"+ck2.CheckpointID, &del); err != nil || !del.Deleted {
		t.Errorf("delete: %+v, %v; want deleted", del, err)
	}
	if err := ckRequest(t, s, http.MethodDelete, "/v1/checkpoint/"+ck2.CheckpointID, &del); err != nil || del.Deleted {
		t.Errorf("delete again: %+v, %v; want deleted false (idempotent)", del, err)
	}
	// Bytes: a checkpoint over max_checkpoint_bytes is refused and not kept.
	pooltest.MustSh(t, pg, `head -c 6000000 /dev/urandom > ~/big`)
	if _, _, err := s.Call("/v1/checkpoint", api.CheckpointRequest{EnvID: parent}, nil); !codeIs(err, aci.CodeCheckpointLimit) {
		t.Errorf("checkpoint of 6 MB over max_checkpoint_bytes 4 MiB: %v; want checkpoint_limit", err)
	}
	if got := metric(t, s, "shinken_checkpoints"); got != 1 {
		t.Errorf("shinken_checkpoints = %v; want 1 (the refused ones are not kept)", got)
	}

	// Unknown: reset's slot and fork's request are not_found.
	var bad api.BatchReply
	if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Checkpoint: "ckpt-nope"}}}, &bad); err != nil || bad.Results[0].Error == nil || bad.Results[0].Error.Code != aci.CodeNotFound {
		t.Errorf("reset from an unknown checkpoint: %+v, %v; want not_found in the slot", bad.Results, err)
	}
	if status, _, err := s.Call("/v1/fork", api.ForkRequest{Checkpoint: "ckpt-nope", N: 2}, nil); !codeIs(err, aci.CodeNotFound) || status != 404 {
		t.Errorf("fork of an unknown checkpoint: %d, %v; want 404 not_found", status, err)
	}
	if _, _, err := s.Call("/v1/fork", api.ForkRequest{Checkpoint: ck.CheckpointID, EnvID: parent, N: 1}, nil); !codeIs(err, aci.CodeBadRequest) {
		t.Errorf("fork naming both an env and a checkpoint: %v; want bad_request", err)
	}

	// Expiry: unused for its TTL, the checkpoint is deleted.
	var info api.Checkpoint
	if err := ckRequest(t, s, http.MethodGet, "/v1/checkpoint/"+ck.CheckpointID, &info); err != nil || info.CheckpointID != ck.CheckpointID {
		t.Fatalf("get checkpoint: %+v, %v", info, err)
	}
	pooltest.Eventually(t, ttl+30*time.Second, "checkpoint expired", func() bool {
		return codeIs(ckRequest(t, s, http.MethodGet, "/v1/checkpoint/"+ck.CheckpointID, &info), aci.CodeNotFound)
	})
	if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Checkpoint: ck.CheckpointID}}}, &bad); err != nil || bad.Results[0].Error == nil || bad.Results[0].Error.Code != aci.CodeNotFound {
		t.Errorf("reset from an expired checkpoint: %+v, %v; want not_found in the slot", bad.Results, err)
	}
	if got := metric(t, s, "shinken_checkpoint_bytes"); got != 0 {
		t.Errorf("shinken_checkpoint_bytes = %v after expiry; want 0", got)
	}
	// The snapshot goes right after the table entry.
	pooltest.Eventually(t, 10*time.Second, "the checkpoints' snapshot directories removed (the golden's stays)", func() bool {
		return snapshots() == before && before >= 1
	})
}
