package envserver_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

// a11yServer is the shared server with frames (and so tree revisions)
// recorded, skipping where its sandboxes have no accessibility bus.
func a11yServer(t *testing.T) *servertest.Server {
	t.Helper()
	s := server(t)
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil {
		t.Fatal(err)
	}
	if len(sp.Observation.A11y) == 0 {
		if slices.Contains(sp.Verbs, string(aci.InvokeAction)) {
			t.Fatal("spec lists invoke_action without observation.a11y")
		}
		t.Skip("sandboxes have no accessibility bus (install dbus and at-spi2-core)")
	}
	if !slices.Contains(sp.Verbs, string(aci.InvokeAction)) || !slices.Contains(sp.Verbs, string(aci.SetValue)) || !slices.Contains(sp.Observation.A11y, aci.A11yDiff) {
		t.Fatalf("spec with a11y: verbs %v, modes %v; want invoke_action, set_value and diff", sp.Verbs, sp.Observation.A11y)
	}
	return s
}

func elementOf(obs *aci.Observation, role, name string) (aci.Element, bool) {
	for _, e := range obs.Elements {
		if e.Role == role && e.Name == name {
			return e, true
		}
	}
	return aci.Element{}, false
}

// TestA11yObservation drives an env through the trainer API with the tree:
// reset and steps carry tree_text and elements, a diff shows typing, an
// element click opens a menu, a stale ref is the agent's typed error, and
// the episode records its tree revisions, stored like frames.
func TestA11yObservation(t *testing.T) {
	s := a11yServer(t)
	if status, _, _ := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: "mousepad-write-note"}}, Observe: &api.Observe{A11y: "pixels"}}, nil); status != 400 {
		t.Errorf("observe.a11y \"pixels\": status %d; want 400 bad_request", status)
	}
	tree := &api.Observe{A11y: aci.A11yFull}
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "mousepad-write-note"}}, Observe: tree})
	env, epID, obs := r.Results[0].EnvID, r.Results[0].EpisodeID, r.Results[0].Obs
	defer closeEnvs(s, env)
	if obs.A11y == nil || obs.A11y.Error != nil || !strings.HasPrefix(obs.TreeText, `app: "mousepad"`) || len(obs.Tree) != 32 || len(obs.Elements) < 5 {
		t.Fatalf("reset with a11y=tree: info %+v tree %q elements %d:\n%s", obs.A11y, obs.Tree, len(obs.Elements), obs.TreeText)
	}
	if obs.Elements[0].ID != "e1" {
		t.Errorf("first element of an episode is %s; want e1", obs.Elements[0].ID)
	}
	text, ok := elementOf(obs, "text", "")
	file, ok2 := elementOf(obs, "menu", "File")
	if !ok || !ok2 {
		t.Fatalf("no text area or File menu in:\n%s", obs.TreeText)
	}

	diff := &api.Observe{A11y: aci.A11yDiff}
	st := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.TypeText, Text: "milk"}}}, Observe: diff})
	got := st.Results[0].Obs
	if got.A11y == nil || !got.A11y.Diff || !strings.Contains(got.TreeText, "~ "+text.ID+` text value="milk"`) || len(got.Elements) != 1 {
		t.Fatalf("diff after typing: %+v elements %v:\n%s", got.A11y, got.Elements, got.TreeText)
	}

	st = step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Click, Target: aci.Ref(file.ID)}}}, Observe: tree})
	if _, ok := elementOf(st.Results[0].Obs, "menu item", "Save As..."); !ok || st.Results[0].Info.Error != nil {
		t.Fatalf("click on %s did not open the File menu (error %v):\n%s", file.ID, st.Results[0].Info.Error, st.Results[0].Obs.TreeText)
	}
	st = step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: []aci.Action{{Verb: aci.Key, Keys: "Escape"}, {Verb: aci.Click, Target: aci.Ref("e9999")}}}}, Observe: tree})
	res := st.Results[0]
	if res.Error != nil || res.Info.Error == nil || res.Info.Error.Code != aci.CodeStaleElementRef || res.Terminated {
		t.Fatalf("click on a ref never issued: %+v info %+v; want the agent's stale_element_ref, episode going on", res.Error, res.Info)
	}

	st = step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Fail}}}})
	var tr trajectory.Trajectory
	if err := msgpack.Unmarshal([]byte(getBody(t, s, "/v1/episodes/"+epID)), &tr); err != nil {
		t.Fatalf("episode: %v", err)
	}
	if tr.InitTree != obs.Tree || len(tr.Steps) < 3 || tr.Steps[0].ObsTree == "" || tr.Steps[0].ObsTree == tr.InitTree {
		t.Fatalf("trajectory trees: init %q (want %q), steps %+v", tr.InitTree, obs.Tree, tr.Steps)
	}
	if s.Store != nil {
		if b, err := s.Store.Frame(tr.InitTree, "a11y"); err == nil && string(b) != obs.TreeText {
			t.Errorf("stored tree %s differs from the observation's text", tr.InitTree)
		}
	}
}

// a11yTasks lists the shipped tasks this server can run, and the observe
// setting their reference solutions need: tasks that act on element refs
// observe the tree (their refs are minted by it) and are left out where the
// sandboxes have no accessibility bus.
func a11yTasks(t *testing.T, s *servertest.Server) ([]string, *api.Observe) {
	t.Helper()
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil {
		t.Fatal(err)
	}
	has := len(sp.Observation.A11y) > 0
	var ids []string
	for _, id := range s.Tasks.IDs() {
		if s.Tasks[id].A11y && !has {
			t.Logf("task %s needs the accessibility tree, which these sandboxes lack: skipped", id)
			continue
		}
		ids = append(ids, id)
	}
	if !has {
		return ids, nil
	}
	return ids, &api.Observe{A11y: aci.A11yFull}
}
