package envserver_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
)

type sem struct {
	Verb       aci.Verb
	Role, Name string
	Text       string
	Nth        int
}

func TestA11yExplore(t *testing.T) {
	var plans map[string][][]sem
	b, _ := os.ReadFile(os.Getenv("PLANS"))
	if err := json.Unmarshal(b, &plans); err != nil {
		t.Skip(err)
	}
	s := a11yServer(t)
	out := map[string][][]aci.Action{}
	tree := &api.Observe{A11y: aci.A11yFull}
	for task, steps := range plans {
		r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task}}, Observe: tree})
		env, obs := r.Results[0].EnvID, r.Results[0].Obs
		t.Logf("%s reset:\n%s", task, obs.TreeText)
		for _, st := range steps {
			var acts []aci.Action
			for _, a := range st {
				act := aci.Action{Verb: a.Verb, Text: a.Text}
				if a.Role != "" {
					e, ok := nthElement(obs, a.Role, a.Name, a.Nth)
					if !ok {
						t.Fatalf("%s: no %s %q in\n%s", task, a.Role, a.Name, obs.TreeText)
					}
					act.Target = aci.Ref(e.ID)
				}
				acts = append(acts, act)
			}
			res := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: acts}}, Observe: tree}).Results[0]
			if res.Error != nil || (res.Info != nil && res.Info.Error != nil) {
				t.Fatalf("%s: %v %v", task, res.Error, res.Info.Error)
			}
			obs = res.Obs
			t.Logf("%s after %s reward %v exit %q:\n%s", task, fmt.Sprint(acts), res.Reward, res.Info.ExitReason, obs.TreeText)
			out[task] = append(out[task], acts)
		}
		closeEnvs(s, env)
	}
	b, _ = json.MarshalIndent(out, "", "  ")
	os.WriteFile(os.Getenv("PLANS")+".out", b, 0o644)
}

func nthElement(obs *aci.Observation, role, name string, n int) (aci.Element, bool) {
	for _, e := range obs.Elements {
		if e.Role == role && e.Name == name {
			if n == 0 {
				return e, true
			}
			n--
		}
	}
	return aci.Element{}, false
}
