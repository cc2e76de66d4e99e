package envserver_test

import (
	"sync"
	"testing"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// TestBurstOfResets sends 24 resets at once to a server whose pool keeps 4
// warm, under the default cap (what the host's memory holds): the burst
// queues for boots and is served, every reset succeeds on its own sandbox
// (none fails pool_exhausted while there is room). docs/architecture.md,
// "Bursts".
func TestBurstOfResets(t *testing.T) {
	const burst = 24
	s := servertest.Start(t, servertest.Options{Pool: 4, Edit: func(c *configs.Server) {
		c.MaxSandboxes = 0 // the default: what the host's memory holds
		c.LeaseTimeout = 0 // a reset queues for as long as its reset_timeout
	}})
	var spec api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Pool.MaxSandboxes < burst+8 {
		t.Skipf("this host's memory holds %d desktops; the test needs %d", spec.Pool.MaxSandboxes, burst+8)
	}
	// The task's golden exists before the burst, as after a trainer's first batch.
	first := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	closeEnvs(s, first.Results[0].EnvID)

	results := make([]api.Result, burst)
	errs := make([]error, burst)
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			var r api.BatchReply
			if _, _, errs[i] = s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}}, &r); errs[i] == nil {
				results[i] = r.Results[0]
			}
		})
	}
	wg.Wait()
	var envs []string
	sandboxes := map[string]bool{}
	for i, res := range results {
		if errs[i] != nil {
			t.Errorf("reset %d: %v", i, errs[i])
			continue
		}
		envs = append(envs, res.EnvID)
		if res.Error != nil {
			t.Errorf("reset %d: %v", i, res.Error)
			continue
		}
		sb, ok := s.Server.EnvSandbox(res.EnvID)
		if !ok || sandboxes[sb] {
			t.Errorf("reset %d: env %s on sandbox %q (live %v, shared %v); want its own", i, res.EnvID, sb, ok, sandboxes[sb])
		}
		sandboxes[sb] = true
	}
	defer closeEnvs(s, envs...)
	if got := metric(t, s, `shinken_resets_total{outcome="ok"}`); got != burst+1 {
		t.Errorf("%v resets ok; want %d (every one of the burst, and the first)", got, burst+1)
	}
	if got := metric(t, s, "shinken_pool_queued"); got != 0 {
		t.Errorf("%v callers still queued after the burst", got)
	}
}
