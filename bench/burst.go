package bench

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
)

// Burst is the load a trainer puts on a host: a batch of resets at once
// (a GRPO batch) on a small warm pool, then every env stepping slowly, as a
// policy that takes seconds per step does.
type Burst struct {
	Method    string `json:"method"`
	ResetMode string `json:"reset_mode"`
	Pool      int    `json:"pool"`
	Envs      int    `json:"envs"`
	// ResetsOK and ResetFailures count the burst's resets; FailCodes
	// counts the failures by error code.
	ResetsOK      int            `json:"resets_ok"`
	ResetFailures int            `json:"reset_failures"`
	FailCodes     map[string]int `json:"fail_codes,omitempty"`
	Reset         Dist           `json:"reset_latency"`
	Steps         int            `json:"steps"`
	StepErrors    int            `json:"step_errors"`
	Step          Dist           `json:"step_latency"`
	// Memory is per live desktop (every sandbox of the server, leased or
	// idle), measured at the end of the stepping window.
	Memory MemPoint `json:"memory"`
}

// burstPeriod is how often each env steps: a slow policy.
const burstPeriod = 3 * time.Second

func (b *runner) bursts(ctx context.Context) ([]*Burst, error) {
	var out []*Burst
	for _, mode := range b.resetModes() {
		r, err := b.burst(ctx, mode)
		if err != nil {
			return out, fmt.Errorf("%s: %w", mode, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (b *runner) burst(ctx context.Context, mode string) (*Burst, error) {
	pool, n := b.sz.burstPool, b.sz.burstEnvs
	srv, err := b.startServer(ctx, pool, func(c *configs.Server) { c.ResetMode = mode })
	if err != nil {
		return nil, err
	}
	defer srv.close()
	c := srv.c
	out := &Burst{ResetMode: mode, Pool: pool, Envs: n, FailCodes: map[string]int{},
		Method: fmt.Sprintf("a fresh server with pool %d (shipped config, reset_mode %s); %d concurrent POST /v1/reset of new envs of task %s, each its own request; then for %s every env that got one steps once per %s (a random click, png, default settle); reset and step latency are client wall times; memory is PSS per live sandbox at the end",
			pool, mode, n, b.opts.Task, b.sz.burstWindow, burstPeriod)}
	var mu sync.Mutex
	var resets, steps []time.Duration
	envs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			rr, err := resetAll(ctx, c, &api.ResetRequest{Envs: []api.ResetEnv{{Task: b.opts.Task}}})
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.ResetFailures++
				out.FailCodes[string(aci.CodeOf(err))]++
				if rr != nil && len(rr.Results) == 1 {
					envs[i] = rr.Results[0].EnvID
				}
				return
			}
			out.ResetsOK++
			resets = append(resets, d)
			envs[i] = rr.Results[0].EnvID
		}()
	}
	wg.Wait()
	defer func() {
		var ids []string
		for _, e := range envs {
			if e != "" {
				ids = append(ids, e)
			}
		}
		c.Close(context.WithoutCancel(ctx), ids...)
	}()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	out.Reset = Summarize(resets)
	// Slow stepping: each env once per burstPeriod, starts spread evenly.
	end := time.Now().Add(b.sz.burstWindow)
	for i, env := range envs {
		if env == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now().Add(burstPeriod * time.Duration(i) / time.Duration(n))
			for k := 0; ; k++ {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				if time.Now().After(end) {
					return
				}
				x, y := float64(100+(i*37+k*53)%1000), float64(100+(i*29+k*31)%600)
				t0 := time.Now()
				rep, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Click, Target: aci.Px(x, y)}}}})
				d := time.Since(t0)
				mu.Lock()
				if err != nil || rep.Results[0].Error != nil {
					out.StepErrors++
				} else {
					out.Steps++
					steps = append(steps, d)
				}
				mu.Unlock()
				next = next.Add(burstPeriod)
			}
		}()
	}
	wg.Wait()
	out.Step = Summarize(steps)
	var ms []Mem
	for _, pid := range sandboxInits() {
		ms = append(ms, TreeMemory(pid))
	}
	out.Memory = memPoint(ms)
	codes := make([]string, 0, len(out.FailCodes))
	for k := range out.FailCodes {
		codes = append(codes, k)
	}
	sort.Strings(codes)
	b.opts.Logf("bench: burst %s: %d/%d resets ok (failures by code %v), reset p50 %.0f ms p95 %.0f ms, step p50 %.0f ms p95 %.0f ms, %.1f MiB PSS per desktop",
		mode, out.ResetsOK, n, out.FailCodes, out.Reset.P50, out.Reset.P95, out.Step.P50, out.Step.P95, out.Memory.PSSMiB)
	return out, nil
}
