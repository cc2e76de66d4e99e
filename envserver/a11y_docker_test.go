package envserver_test

import (
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// TestA11yDocker: container sandboxes run the buses too: the spec lists
// the tree, a reset observes it, and a task solved through element refs
// scores 1 in a container.
func TestA11yDocker(t *testing.T) {
	s := dockerServer(t, servertest.Options{Pool: 1})
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil || len(sp.Observation.A11y) == 0 {
		t.Fatalf("docker spec observation %+v (%v); want the a11y modes", sp.Observation, err)
	}
	task := s.Tasks["mousepad-uppercase-ref"]
	tree := &api.Observe{A11y: aci.A11yFull}
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task.ID}}, Observe: tree})
	env, obs := r.Results[0].EnvID, r.Results[0].Obs
	defer closeEnvs(s, env)
	if obs.A11y == nil || obs.A11y.Error != nil || !strings.HasPrefix(obs.TreeText, `app: "mousepad"`) {
		t.Fatalf("reset in a container: a11y %+v:\n%s", obs.A11y, obs.TreeText)
	}
	rewards, _ := playObserving(t, s, []string{env}, [][][]aci.Action{instanceOf(t, s, r.Results[0]).Solution}, tree)
	if rewards[0] != 1 {
		t.Errorf("%s in a container: got reward %v; want 1", task.ID, rewards[0])
	}
}
