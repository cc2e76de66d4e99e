package envserver_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/trajectory"
)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestTrainerFiles puts and gets files over real HTTP on a real sandbox,
// with the agent's rights: the bytes and their sha256 round-trip and the
// file is the agent's; a wrong checksum, a relative path and a path the
// agent cannot write are refused; the agent's planted link, FIFO and
// directory neither lead a put or a get elsewhere nor hang them; an
// oversized file is too_large; the trajectory records each transfer by
// hash.
func TestTrainerFiles(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) { c.TrainerExec = true }})
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil || !sp.Trainer.Files || sp.Trainer.MaxGetBytes != wire.MaxGetFile || sp.Trainer.MaxPutBytes != wire.MaxPutFile {
		t.Fatalf("spec trainer %+v (%v); want files with their limits", sp.Trainer, err)
	}
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env, epID := r.Results[0].EnvID, r.Results[0].EpisodeID
	defer closeEnvs(s, env)
	put := func(path string, data []byte, sha string, mode uint32) (*api.FileReply, error) {
		var out api.FileReply
		_, _, err := s.Call("/v1/files/put", api.FilePutRequest{EnvID: env, Path: path, Data: data, SHA256: sha, Mode: mode}, &out)
		return &out, err
	}
	get := func(path string) (*api.FileReply, error) {
		var out api.FileReply
		_, _, err := s.Call("/v1/files/get", api.FileGetRequest{EnvID: env, Path: path}, &out)
		return &out, err
	}
	sh := func(cmd string) string {
		t.Helper()
		out, err := execCall(s, api.ExecRequest{EnvID: env, Shell: cmd})
		if err != nil {
			t.Fatalf("exec %q: %v", cmd, err)
		}
		return string(out.Stdout)
	}

	data := []byte("fixture\x00with a NUL and more\n")
	got, err := put("~/in/deep/fixture.bin", data, sum(data), 0o750)
	if err != nil || got.SHA256 != sum(data) || got.Size != len(data) {
		t.Fatalf("put: %+v %v", got, err)
	}
	back, err := get("~/in/deep/fixture.bin")
	if err != nil || !bytes.Equal(back.Data, data) || back.SHA256 != sum(data) || back.Size != len(data) {
		t.Fatalf("get: %+v %v; want the bytes put", back, err)
	}
	if st := sh(`stat -c '%a %u' ~/in/deep/fixture.bin; id -u`); len(strings.Fields(st)) != 3 || strings.Fields(st)[0] != "750" || strings.Fields(st)[1] != strings.Fields(st)[2] {
		t.Errorf("put file's mode and owner %q; want 750 and the agent's", st)
	}

	refused := func(what string, err error, want aci.Code) {
		t.Helper()
		if !codeIs(err, want) {
			t.Errorf("%s: %v; want %s", what, err, want)
		}
	}
	_, err = put("~/x.txt", data, sum([]byte("other")), 0)
	refused("put with a wrong sha256", err, aci.CodeChecksumMismatch)
	_, err = put("x.txt", data, sum(data), 0)
	refused("put to a relative path", err, aci.CodeBadRequest)
	_, err = put("/usr/bin/planted", data, sum(data), 0)
	refused("put where the agent cannot write", err, aci.CodeBadRequest)
	_, err = put("~/x.txt", data, sum(data), 0o4755)
	refused("put with a setuid mode", err, aci.CodeBadRequest)
	_, err = get("~/nothing-here")
	refused("get of a missing file", err, aci.CodeNotFound)
	_, err = get("~/in")
	refused("get of a directory", err, aci.CodeBadRequest)

	// The agent's plants: a link to a file it may read, a FIFO nobody
	// writes, a file over the bound.
	sh(`echo secret > ~/target; ln -s ~/target ~/link; mkfifo ~/fifo; head -c 2000000 /dev/zero > ~/big`)
	_, err = get("~/link")
	refused("get through a link", err, aci.CodeBadRequest)
	t0 := time.Now()
	_, err = get("~/fifo")
	refused("get of a FIFO", err, aci.CodeBadRequest)
	_, err = put("~/fifo", data, sum(data), 0)
	refused("put onto a FIFO", err, aci.CodeBadRequest)
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("FIFO get and put took %v; want an answer at once", d)
	}
	_, err = put("~/link", data, sum(data), 0)
	refused("put through a link", err, aci.CodeBadRequest)
	if got := sh("cat ~/target"); got != "secret\n" {
		t.Errorf("the link's target holds %q after a put through the link; want it untouched", got)
	}
	_, err = get("~/big")
	refused("get of a 2 MB file", err, aci.CodeTooLarge)

	var tr trajectory.Trajectory
	if err := msgpackGet(t, s, "/v1/episodes/"+epID, &tr); err != nil {
		t.Fatal(err)
	}
	var puts, gets int
	for _, ev := range tr.Events {
		switch {
		case ev.Kind == trajectory.EventPutFile && ev.Error == "" && ev.SHA256 == sum(data) && ev.Path == "~/in/deep/fixture.bin":
			puts++
		case ev.Kind == trajectory.EventGetFile && ev.Error == "" && ev.SHA256 == sum(data):
			gets++
		}
	}
	if puts != 1 || gets != 1 || len(tr.Steps) != 0 {
		t.Errorf("trajectory: %d puts, %d gets recorded by hash, %d steps; want 1, 1, 0", puts, gets, len(tr.Steps))
	}
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Done}}}})
	_, err = get("~/in/deep/fixture.bin")
	refused("get after the episode ended", err, aci.CodeEpisodeOver)
}
