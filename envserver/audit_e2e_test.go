package envserver_test

import (
	"slices"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/trajectory"
)

// TestEpisodeEnvelopeAndAudit: an episode records at its start what it may
// do, and its trajectory, as served, lists every use of those powers by
// the agent (a launch, a clipboard write, a launch that failed) and by the
// trainer (a put, an exec), in the order they happened; an observation
// uses none.
func TestEpisodeEnvelopeAndAudit(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) { c.TrainerExec = true }})
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil {
		t.Fatal(err)
	}
	task := s.Tasks["xterm-hello-file"]
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task.ID}}})
	env, epID := r.Results[0].EnvID, r.Results[0].EpisodeID
	defer closeEnvs(s, env)

	data := []byte("fixture")
	if _, _, err := s.Call("/v1/files/put", api.FilePutRequest{EnvID: env, Path: "~/in.txt", Data: data, SHA256: sum(data)}, &api.FileReply{}); err != nil {
		t.Fatalf("put: %v", err)
	}
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: []aci.Action{
		{Verb: aci.LaunchApp, App: "xterm", Args: []string{"-geometry", "40x10+400+300"}},
		{Verb: aci.ClipboardSet, Text: "twelve bytes"},
	}}}})
	if _, err := execCall(s, api.ExecRequest{EnvID: env, Argv: []string{"sh", "-c", "exit 4"}}); err != nil {
		t.Fatalf("exec: %v", err)
	}
	if _, _, err := s.Call("/v1/observe", api.ObserveRequest{EnvIDs: []string{env}}, &api.BatchReply{}); err != nil {
		t.Fatalf("observe: %v", err)
	}
	bad := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.LaunchApp, App: "no-such-program-anywhere"}}}})
	if bad.Results[0].Info == nil || bad.Results[0].Info.Error == nil {
		t.Fatalf("launching a program that is not there: %+v; want an error", bad.Results[0])
	}

	var tr trajectory.Trajectory
	if err := msgpack.Unmarshal([]byte(getBody(t, s, "/v1/episodes/"+epID)), &tr); err != nil {
		t.Fatalf("episode: %v", err)
	}
	ev := tr.Envelope
	if ev == nil {
		t.Fatal("the trajectory has no envelope")
	}
	var screen api.Size
	if sp.Observation.Screen != nil {
		screen = *sp.Observation.Screen
	}
	wantNet := "host"
	if c := sp.Pool.Confinement; c != nil && slices.Contains(c.Namespaces, "net") {
		wantNet = "none"
	}
	if !slices.Equal(ev.Apps, task.Apps) || ev.Shell != task.AllowShell || !ev.Clipboard || !ev.TrainerExec || !ev.TrainerFiles ||
		ev.Network != wantNet || ev.ScreenW != screen.W || ev.ScreenH != screen.H {
		t.Errorf("envelope %+v; want apps %v shell %v, clipboard, trainer exec and files, network %s, screen %dx%d",
			ev, task.Apps, task.AllowShell, wantNet, screen.W, screen.H)
	}

	type use struct{ by, kind string }
	var got []use
	for _, u := range tr.Audit {
		got = append(got, use{u.By, u.Kind})
	}
	want := []use{{"trainer", "put_file"}, {"agent", "launch_app"}, {"agent", "clipboard_set"}, {"trainer", "exec"}, {"agent", "launch_app"}}
	if !slices.Equal(got, want) {
		t.Fatalf("audit %+v; want %v", tr.Audit, want)
	}
	a := tr.Audit
	if a[0].SHA256 != sum(data) || a[0].Bytes != len(data) || a[0].Path == "" {
		t.Errorf("put in the audit: %+v", a[0])
	}
	if !slices.Equal(a[1].Argv, []string{"xterm", "-geometry", "40x10+400+300"}) || a[1].Failed || a[1].Step != 0 {
		t.Errorf("launch in the audit: %+v", a[1])
	}
	if a[2].Bytes != len("twelve bytes") {
		t.Errorf("clipboard_set in the audit: %+v; want its size", a[2])
	}
	if a[3].Exit == nil || *a[3].Exit != 4 || a[3].Step != 1 {
		t.Errorf("exec in the audit: %+v; want exit 4 after one step", a[3])
	}
	if !a[4].Failed || a[4].Error == "" || a[4].Step != 1 {
		t.Errorf("failed launch in the audit: %+v; want failed with its error", a[4])
	}
}
