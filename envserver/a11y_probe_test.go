package envserver_test

import (
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
)

func TestA11yProbe(t *testing.T) {
	s := a11yServer(t)
	tree := &api.Observe{A11y: aci.A11yFull}
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "pcmanfm-new-folder-ref"}}, Observe: tree})
	env := r.Results[0].EnvID
	defer closeEnvs(s, env)
	res := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: []aci.Action{
		{Verb: aci.Wait, MS: 3000},
		{Verb: aci.ListWindows},
		{Verb: aci.LaunchApp, App: "sh", Args: []string{"-c", "xwininfo -root -tree | grep -i -A2 pcmanfm > /tmp/pc.log 2>&1; xprop -root _NET_CLIENT_LIST >> /tmp/pc.log"}},
		{Verb: aci.Wait, MS: 500},
		{Verb: aci.LaunchApp, App: "mousepad", Args: []string{"/tmp/pc.log"}},
		{Verb: aci.Wait, MS: 1500},
	}}}, Observe: tree}).Results[0]
	t.Logf("%v %+v\n%s", res.Error, res.Info.Results, res.Obs.TreeText)
	for _, e := range res.Obs.Elements {
		if e.Role == "text" {
			t.Logf("TEXT: %s", e.Value)
		}
	}
}
