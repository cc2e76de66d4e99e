package envserver_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/pool/pooltest"
	"github.com/shinken-rl/shinken/trajectory"
)

// TestLimitDeathOverHTTP: an agent that types a memory hog into its
// terminal ends its own sandbox at its memory limit; the step answers
// agent_error with detail.reason "oom" (the agent's fault: no retry, no
// free reroll), the episode ends agent_error, and the server counts it.
// /v1/spec lists the confinement the provider probed.
func TestLimitDeathOverHTTP(t *testing.T) {
	s := server(t)
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil {
		t.Fatal(err)
	}
	c := sp.Pool.Confinement
	if c == nil || !sp.Pool.Confined || c.Dev != "private" || c.AgentRoot || !c.NoNewPrivs || len(c.Namespaces) == 0 {
		t.Fatalf("spec confinement = %+v (confined %v); want the probed confinement", c, sp.Pool.Confined)
	}
	if c.Cgroup == "" {
		t.Skip("no cgroups on this host")
	}
	before := metric(t, s, `shinken_sandbox_limit_kills_total{reason="oom"}`)
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env := r.Results[0].EnvID
	defer closeEnvs(s, env)
	acts := []aci.Action{{Verb: aci.Click, Target: aci.Px(200, 200)}, {Verb: aci.TypeText, Text: `python3 -c 'x = b"x" * (3 << 30)'`}, {Verb: aci.Key, Keys: "Return"}}
	// The hog needs seconds to fill 2 GiB on a loaded machine (a page
	// fault per 4 KiB): the episode's ten steps wait 3 s each for it.
	var got *aci.Error
	for range 10 {
		out := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: acts}}})
		res := out.Results[0]
		if e := res.Error; e != nil && (e.Code == aci.CodeSandboxDied || e.Code == aci.CodeAgentError) {
			got = e
			if res.Info == nil || res.Info.ExitReason != string(trajectory.AgentError) || !res.Truncated {
				t.Errorf("limit death result info %+v truncated %v; want exit agent_error", res.Info, res.Truncated)
			}
			break
		}
		if res.Error != nil || res.Terminated || res.Truncated {
			t.Fatalf("the episode ended before the memory hog's sandbox died: error %v, truncated %v, info %+v", res.Error, res.Truncated, res.Info)
		}
		acts = []aci.Action{{Verb: aci.Wait, MS: 3000}}
	}
	if got == nil {
		t.Fatal("the memory hog's sandbox never died")
	}
	if got.Code != aci.CodeAgentError || fmt.Sprint(got.Detail) != "map[reason:oom]" {
		t.Errorf("limit death error = %s %v (%s); want agent_error with reason oom", got.Code, got.Detail, got.Message)
	}
	// The pool counts the death when its monitor sees it, maybe after the
	// step did.
	pooltest.Eventually(t, 30*time.Second, "the oom limit kill counted", func() bool {
		return metric(t, s, `shinken_sandbox_limit_kills_total{reason="oom"}`) == before+1
	})
}
