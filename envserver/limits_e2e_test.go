package envserver_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/pool/pooltest"
)

// TestLimitDeathOverHTTP: an agent that types a memory hog into its
// terminal ends its own sandbox at its memory limit; the step answers
// sandbox_died with detail.reason "oom" and the server counts it.
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
	var got *aci.Error
	for range 120 {
		out := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: acts}}})
		if e := out.Results[0].Error; e != nil && e.Code == aci.CodeSandboxDied {
			got = e
			break
		}
		acts = []aci.Action{{Verb: aci.Wait, MS: 250}}
	}
	if got == nil {
		t.Fatal("the memory hog's sandbox never died")
	}
	if fmt.Sprint(got.Detail) != "map[reason:oom]" {
		t.Errorf("sandbox_died detail = %v (%s); want reason oom", got.Detail, got.Message)
	}
	// The pool counts the death when its monitor sees it, maybe after the
	// step did.
	pooltest.Eventually(t, 30*time.Second, "the oom limit kill counted", func() bool {
		return metric(t, s, `shinken_sandbox_limit_kills_total{reason="oom"}`) == before+1
	})
}
