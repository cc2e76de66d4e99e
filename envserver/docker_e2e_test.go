package envserver_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/pool/docker"
	"github.com/shinken-rl/shinken/pool/pooltest"
)

// TestDockerProviderEndToEnd runs tasks through `--provider docker`: real
// containers from the locally built image, reset from a committed golden,
// the reference solution, and a fork that inherits the parent's files.
func TestDockerProviderEndToEnd(t *testing.T) {
	s := dockerServer(t, servertest.Options{Pool: 2})
	ids := []string{"xterm-hello-file", "mousepad-write-note"}
	var req api.ResetRequest
	for _, id := range ids {
		req.Envs = append(req.Envs, api.ResetEnv{Task: id})
	}
	r := reset(t, s, req)
	envs := []string{r.Results[0].EnvID, r.Results[1].EnvID}
	defer closeEnvs(s, envs...)
	// The xterm env writes its file, then forks; the child must score 1.
	task := s.Tasks[ids[0]]
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: envs[0], Actions: task.Solution[0]}}})
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: envs[0], Actions: task.Solution[1]}}})
	s.WaitEnv(t, envs[0], `[ "$(cat ~/hello.txt 2>/dev/null)" = "hello shinken" ]`)
	var fr api.BatchReply
	if _, _, err := s.Call("/v1/fork", api.ForkRequest{EnvID: envs[0], N: 1}, &fr); err != nil || fr.Results[0].Error != nil {
		t.Fatalf("fork: %v %+v", err, fr.Results)
	}
	child := fr.Results[0].EnvID
	defer closeEnvs(s, child)
	done := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: child, Action: &aci.Action{Verb: aci.Done}}}})
	if got := rv(done.Results[0]); got != 1 {
		t.Errorf("forked container: got reward %v; want 1 (inherits the parent's file)", got)
	}
	// A named checkpoint of the same episode: a committed layer the server
	// owns; two containers from it inherit the file and start alike.
	var ck api.Checkpoint
	if _, _, err := s.Call("/v1/checkpoint", api.CheckpointRequest{EnvID: envs[0]}, &ck); err != nil || ck.Bytes <= 0 {
		t.Fatalf("checkpoint: %+v, %v; want one holding bytes", ck, err)
	}
	var cr api.BatchReply
	if _, _, err := s.Call("/v1/fork", api.ForkRequest{Checkpoint: ck.CheckpointID, N: 2}, &cr); err != nil {
		t.Fatalf("fork of checkpoint: %v", err)
	}
	var kids []string
	for _, res := range cr.Results {
		kids = append(kids, res.EnvID)
		if res.Error != nil || res.Info.Checkpoint != ck.CheckpointID {
			t.Fatalf("child of checkpoint: %+v", res)
		}
	}
	defer closeEnvs(s, kids...)
	if cr.Results[0].Obs.Frame != cr.Results[1].Obs.Frame {
		t.Errorf("containers from one checkpoint start on different frames")
	}
	kd := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: kids[0], Action: &aci.Action{Verb: aci.Done}}, {EnvID: kids[1], Action: &aci.Action{Verb: aci.Done}}}})
	if rv(kd.Results[0]) != 1 || rv(kd.Results[1]) != 1 {
		t.Errorf("containers from the checkpoint: rewards %v, %v; want 1 (the checkpoint's file)", rv(kd.Results[0]), rv(kd.Results[1]))
	}
	var del api.CheckpointDeleteReply
	if err := ckRequest(t, s, "DELETE", "/v1/checkpoint/"+ck.CheckpointID, &del); err != nil || !del.Deleted {
		t.Errorf("delete checkpoint: %+v, %v", del, err)
	}
	rewards, _ := play(t, s, envs[1:], [][][]aci.Action{instanceOf(t, s, r.Results[1]).Solution})
	if rewards[0] != 1 {
		t.Errorf("%s in a container: got reward %v; want 1", ids[1], rewards[0])
	}
	var spec api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &spec); err != nil || spec.Pool.Provider != "docker" || spec.Pool.SnapshotKind != "disk" {
		t.Errorf("spec pool: got %+v (%v); want docker, disk", spec.Pool, err)
	}
}

// dockerServer starts a server on the docker provider. Without an engine or
// the image it skips, unless the host is expected to have them (make test
// sets SHINKEN_REQUIRE_DOCKER where the engine answers): then it fails.
func dockerServer(t *testing.T, opts servertest.Options) *servertest.Server {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: skipping container boots")
	}
	edit := opts.Edit
	opts.Edit = func(c *configs.Server) {
		if edit != nil {
			edit(c)
		}
		c.Provider = "docker"
	}
	s, err := servertest.TryStart(t, opts)
	if errors.Is(err, docker.ErrNoEngine) || errors.Is(err, docker.ErrNoImage) {
		pooltest.SkipUnless(t, pooltest.RequireDocker, fmt.Sprintf("docker provider unavailable: %v (make image builds the image)", err))
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}
