package envserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/guest/wire"
)

// ckServer is a server with small checkpoint limits, shared by the
// checkpoint tests.
func ckServer(t *testing.T) *servertest.Server {
	return servertest.Shared(t, "checkpoint", servertest.Options{Pool: 4, Edit: func(c *configs.Server) {
		c.MaxCheckpoints = 2
		c.MaxCheckpointBytes = 64 << 20
	}})
}

// envFiles lists an env's home and workspace files with their checksums
// (logs aside: the X server and window manager append to theirs).
func envFiles(t *testing.T, s *servertest.Server, envID string) string {
	t.Helper()
	c, ok := s.Server.EnvGuest(envID)
	if !ok {
		t.Fatalf("env %s: no live sandbox", envID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := c.Exec(ctx, wire.ExecArgs{Shell: `cd / && find "$HOME" /home/workspace -type f ! -name '*.log' ! -path '*/.cache/*' | sort | xargs -r md5sum`, TimeoutMS: 15000})
	if err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("env %s: listing files: %v %+v", envID, err, r)
	}
	return strings.TrimSpace(string(r.Stdout))
}

func checkpointOf(t *testing.T, s *servertest.Server, envID string) api.CheckpointReply {
	t.Helper()
	var ck api.CheckpointReply
	if _, _, err := s.Call("/v1/checkpoint", api.CheckpointRequest{EnvID: envID}, &ck); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	return ck
}

// TestCheckpointForkEight: a named checkpoint of a mid-task env, forked 8
// times after the env moved on, gives 8 envs whose files are the
// checkpoint's and whose screens are one and the same; reset {checkpoint}
// gives the same again; the limits on checkpoints are typed; deleted
// checkpoints are gone.
func TestCheckpointForkEight(t *testing.T) {
	s := ckServer(t)
	task := s.Tasks["xterm-hello-file"]
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task.ID}}})
	parent := r.Results[0].EnvID
	defer closeEnvs(s, parent)
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: parent, Actions: task.Solution[0]}}})
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: parent, Actions: task.Solution[1]}}})
	s.WaitEnv(t, parent, `[ "$(cat ~/hello.txt 2>/dev/null)" = "hello shinken" ]`)
	want := envFiles(t, s, parent)
	ck := checkpointOf(t, s, parent)
	if ck.Checkpoint == "" || ck.SnapshotKind != "disk" || ck.Task != task.ID || ck.Step != 2 || ck.Bytes <= 0 {
		t.Fatalf("checkpoint reply %+v; want an id, snapshot_kind disk, the task, step 2 and its bytes", ck)
	}
	// The env moves on: the checkpoint must not.
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: parent, Actions: []aci.Action{
		{Verb: aci.TypeText, Text: "rm ~/hello.txt; touch ~/later.txt"}, {Verb: aci.Key, Keys: "Return"}}}}})
	s.WaitEnv(t, parent, `[ -e ~/later.txt ]`)

	const n = 8
	var fr api.BatchReply
	if _, _, err := s.Call("/v1/fork", api.ForkRequest{Checkpoint: ck.Checkpoint, N: n}, &fr); err != nil {
		t.Fatalf("fork {checkpoint, n: %d}: %v", n, err)
	}
	var kids []string
	for _, res := range fr.Results {
		if res.Error != nil {
			t.Fatalf("fork child: %v", res.Error)
		}
		kids = append(kids, res.EnvID)
	}
	defer closeEnvs(s, kids...)
	if len(kids) != n {
		t.Fatalf("got %d children; want %d", len(kids), n)
	}
	rr := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Checkpoint: ck.Checkpoint}}})
	fromReset := rr.Results[0]
	defer closeEnvs(s, fromReset.EnvID)
	if fromReset.Info.Step != ck.Step || fromReset.Info.Task != task.ID {
		t.Errorf("reset {checkpoint}: step %d task %q; want %d %q", fromReset.Info.Step, fromReset.Info.Task, ck.Step, task.ID)
	}
	screen := fromReset.Obs.Frame
	for i, res := range fr.Results {
		if got := envFiles(t, s, res.EnvID); got != want {
			t.Errorf("child %d files:\n%s\nwant the checkpoint's:\n%s", i, got, want)
		}
		if res.Obs.Frame != screen {
			t.Errorf("child %d shows frame %s; want %s (the checkpoint's screen, as reset {checkpoint} shows it)", i, res.Obs.Frame, screen)
		}
	}
	if got := envFiles(t, s, fromReset.EnvID); got != want {
		t.Errorf("reset {checkpoint} files:\n%s\nwant the checkpoint's:\n%s", got, want)
	}

	// Limits: two live checkpoints at most (this server's max_checkpoints).
	ck2 := checkpointOf(t, s, kids[0])
	var er api.CheckpointReply
	status, _, err := s.Call("/v1/checkpoint", api.CheckpointRequest{EnvID: kids[1]}, &er)
	if aci.CodeOf(err) != aci.CodeCheckpointLimit || status != 429 {
		t.Errorf("third checkpoint = %d %v; want 429 checkpoint_limit", status, err)
	}
	var del api.CheckpointDeleteReply
	if _, _, err := s.Call("/v1/checkpoint/delete", api.CheckpointDeleteRequest{Checkpoints: []string{ck.Checkpoint, ck2.Checkpoint, "ck-none"}}, &del); err != nil {
		t.Fatalf("checkpoint/delete: %v", err)
	}
	if len(del.Deleted) != 2 {
		t.Errorf("deleted %v; want the two live checkpoints", del.Deleted)
	}
	var gone api.BatchReply
	if _, _, err := s.Call("/v1/fork", api.ForkRequest{Checkpoint: ck.Checkpoint, N: 1}, &gone); aci.CodeOf(err) != aci.CodeNotFound {
		t.Errorf("fork of a deleted checkpoint = %v; want not_found", err)
	}
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil {
		t.Fatalf("spec: %v", err)
	}
	if sp.Checkpoints == nil || sp.Checkpoints.MaxCount != 2 || sp.Checkpoints.SnapshotKind != "disk" {
		t.Errorf("spec checkpoints = %+v; want max_count 2, snapshot_kind disk", sp.Checkpoints)
	}
}

// TestCheckpointBytesLimit: a checkpoint over the byte limit is refused
// with checkpoint_limit and leaves nothing behind.
func TestCheckpointBytesLimit(t *testing.T) {
	s := ckServer(t)
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env := r.Results[0].EnvID
	defer closeEnvs(s, env)
	c, _ := s.Server.EnvGuest(env)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, wire.ExecArgs{Shell: `head -c 70000000 /dev/zero > "$HOME/big"`, TimeoutMS: 15000}); err != nil {
		t.Fatalf("write a big file: %v", err)
	}
	var ck api.CheckpointReply
	status, _, err := s.Call("/v1/checkpoint", api.CheckpointRequest{EnvID: env}, &ck)
	if aci.CodeOf(err) != aci.CodeCheckpointLimit || status != 429 {
		t.Fatalf("checkpoint of 70 MB with a 64 MiB limit = %d %v; want 429 checkpoint_limit", status, err)
	}
}

// TestCheckpointIdleTTL: a checkpoint nobody uses for checkpoint_ttl is
// deleted (its id then answers not_found); one in use is kept.
func TestCheckpointIdleTTL(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) {
		c.CheckpointTTL = configs.Duration(500 * time.Millisecond)
	}})
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env := r.Results[0].EnvID
	defer closeEnvs(s, env)
	ck := checkpointOf(t, s, env)
	deadline := time.Now().Add(20 * time.Second)
	for {
		var del api.CheckpointDeleteReply
		if metric(t, s, `shinken_checkpoints_total{event="expired"}`) >= 1 {
			if _, _, err := s.Call("/v1/checkpoint/delete", api.CheckpointDeleteRequest{Checkpoints: []string{ck.Checkpoint}}, &del); err != nil {
				t.Fatal(err)
			}
			if len(del.Deleted) != 0 {
				t.Errorf("checkpoint %s still listed after it expired", ck.Checkpoint)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("checkpoint %s not expired 20 s after a TTL of 500 ms", ck.Checkpoint)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
