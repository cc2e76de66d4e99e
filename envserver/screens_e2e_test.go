package envserver_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/trajectory"
)

// TestPerEnvScreens: a server that declares a second screen size serves it
// to the resets that ask for it, beside its default: the X server, the
// frame, the coordinates (the task's solution scores 1), the envelope and
// a fork all follow the env's size; a size not declared is bad_request;
// a reset without one gets the default.
func TestPerEnvScreens(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) {
		c.TrainerExec = true
		c.Screens = []string{"1024x768", "1280x800"} // the default once more: ignored
		c.ScreenWarm = 1
	}})
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil {
		t.Fatal(err)
	}
	small := api.Size{W: 1024, H: 768}
	def := *sp.Observation.Screen
	if want := []api.Size{def, small}; !slices.Equal(sp.Observation.Screens, want) {
		t.Fatalf("spec screens %v; want %v", sp.Observation.Screens, want)
	}
	task := s.Tasks["xterm-hello-file"]
	var bad api.BatchReply
	if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: task.ID, Screen: &api.Size{W: 800, H: 600}}}}, &bad); err != nil {
		t.Fatal(err)
	}
	if e := bad.Results[0].Error; e == nil || e.Code != aci.CodeBadRequest || !strings.Contains(e.Message, "1024x768") {
		t.Errorf("reset with an undeclared screen: %+v; want bad_request naming the sizes served", bad.Results[0])
	}

	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task.ID, Screen: &small}, {Task: task.ID}}})
	env, other := r.Results[0].EnvID, r.Results[1].EnvID
	defer closeEnvs(s, env, other)
	dims := func(id string) string {
		t.Helper()
		out, err := execCall(s, api.ExecRequest{EnvID: id, Shell: `xdpyinfo | awk '/dimensions:/ {print $2}'`})
		if err != nil {
			t.Fatalf("exec: %v", err)
		}
		return strings.TrimSpace(string(out.Stdout))
	}
	if got := dims(env); got != "1024x768" {
		t.Errorf("the X server of an env reset with screen 1024x768 is %q", got)
	}
	if got := dims(other); got != fmt.Sprintf("%dx%d", def.W, def.H) {
		t.Errorf("the X server of an env reset without a screen is %q; want the default", got)
	}
	if o := r.Results[0].Obs; o == nil || o.Display.W != 1024 || o.Display.H != 768 {
		t.Errorf("the 1024x768 env's observation: %+v", o)
	}

	// A fork keeps its parent's size.
	var fr api.BatchReply
	if _, _, err := s.Call("/v1/fork", api.ForkRequest{EnvID: env, N: 1}, &fr); err != nil || fr.Results[0].Error != nil {
		t.Fatalf("fork: %v %+v", err, fr.Results)
	}
	child := fr.Results[0].EnvID
	defer closeEnvs(s, child)
	if got := dims(child); got != "1024x768" {
		t.Errorf("a fork of the 1024x768 env has a %q screen", got)
	}

	// The task's solution (points in pixels of the screen) scores on the
	// small screen, and the episode's envelope says its size.
	rewards, _ := play(t, s, []string{env}, [][][]aci.Action{task.Solution})
	if rewards[0] != 1 {
		t.Errorf("the solution on the 1024x768 screen scored %v; want 1", rewards[0])
	}
	var tr trajectory.Trajectory
	if err := msgpack.Unmarshal([]byte(getBody(t, s, "/v1/episodes/"+r.Results[0].EpisodeID)), &tr); err != nil {
		t.Fatal(err)
	}
	if tr.Envelope == nil || tr.Envelope.ScreenW != 1024 || tr.Envelope.ScreenH != 768 {
		t.Errorf("envelope %+v; want screen 1024x768", tr.Envelope)
	}
}
