package envserver_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// TestDiskFull puts the episode store on a small tmpfs and fills it: steps
// still happen and are answered, each carrying a typed save_error, the
// failure is counted, and once space is back new episodes are saved again.
func TestDiskFull(t *testing.T) {
	var mnt string
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) {
		mnt = filepath.Join(c.State, "episodes")
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
			t.Skipf("cannot mount a tmpfs (needs root): %v", err)
		}
		t.Cleanup(func() {
			if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", mnt, err)
			}
			os.RemoveAll(filepath.Dir(mnt))
		})
	}})
	// Fill the disk.
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	before := metric(t, s, "shinken_episode_save_failures_total")

	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env := r.Results[0].EnvID
	defer closeEnvs(s, env)
	move := &aci.Action{Verb: aci.Move, Target: aci.Px(3, 3)}
	for i := range 2 {
		out := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: move}}})
		res := out.Results[0]
		if res.Error != nil || res.Obs == nil {
			t.Fatalf("step %d on a full disk: got error %v obs %v; want a normal step", i, res.Error, res.Obs)
		}
		if res.Info == nil || res.Info.SaveError == nil || res.Info.SaveError.Code != aci.CodeInternal {
			t.Fatalf("step %d on a full disk: info %+v; want a typed save_error", i, res.Info)
		}
	}
	if got := metric(t, s, "shinken_episode_save_failures_total") - before; got != 1 {
		t.Errorf("save failures counted: %v; want 1 (one episode)", got)
	}
	// Space again: a new episode is saved.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	r = reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{EnvID: env, Task: "xterm-hello-file"}}})
	out := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: move}}})
	if res := out.Results[0]; res.Error != nil || (res.Info != nil && res.Info.SaveError != nil) {
		t.Fatalf("step once space is back: %+v; want it saved", res)
	}
	var tr struct {
		Steps []any `msgpack:"steps"`
	}
	if err := msgpackGet(t, s, "/v1/episodes/"+out.Results[0].EpisodeID, &tr); err != nil || len(tr.Steps) != 1 {
		t.Errorf("episode after recovery: %d steps, %v; want 1", len(tr.Steps), err)
	}
}
