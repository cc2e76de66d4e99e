package envserver_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/pool"
)

// BenchmarkWarmReset resets one env of xterm-hello-file back to back over
// real HTTP, in both reset modes in the same run (docs/architecture.md,
// "Reset in place"): inplace (the released sandbox is reset in place and
// kept as a replica) and reboot (it is retired and a replica boots). Each
// reset first types into the env, so every episode leaves a dirty
// sandbox. It reports each mode's reset p50 and p95 through HTTP, the
// boots per reset, and the p50 ratio reboot/inplace.
//
//	go test ./envserver -run '^$' -bench WarmReset -benchtime 1x
func BenchmarkWarmReset(b *testing.B) {
	const task, resets = "xterm-hello-file", 20
	p50 := map[string]float64{}
	for _, mode := range []string{pool.ResetModeInPlace, pool.ResetModeReboot} {
		s := servertest.Start(b, servertest.Options{Pool: 1, Replicas: 2, Edit: func(c *configs.Server) { c.ResetMode = mode }})
		reset := func(envID string) (string, time.Duration) {
			t0 := time.Now()
			var r api.BatchReply
			if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{EnvID: envID, Task: task}}}, &r); err != nil {
				b.Fatal(err)
			}
			d := time.Since(t0)
			if r.Results[0].Error != nil {
				b.Fatalf("%s reset: %v", mode, r.Results[0].Error)
			}
			return r.Results[0].EnvID, d
		}
		env, _ := reset("") // builds the golden
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := s.Pool.WaitReplicas(ctx, task, 2); err != nil {
			b.Fatal(err)
		}
		cancel()
		before := s.Pool.Stats()
		var ds []time.Duration
		for range resets {
			var st api.BatchReply
			if _, _, err := s.Call("/v1/step", api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.TypeText, Text: "dirty"}}}}, &st); err != nil {
				b.Fatal(err)
			}
			_, d := reset(env)
			ds = append(ds, d)
		}
		after := s.Pool.Stats()
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		ms := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
		p50[mode] = ms(0.5)
		b.ReportMetric(ms(0.5), mode+"-p50-ms")
		b.ReportMetric(ms(0.95), mode+"-p95-ms")
		b.ReportMetric(float64(after.Boots-before.Boots)/resets, mode+"-boots/reset")
		b.ReportMetric(float64(after.Resets-before.Resets)/resets, mode+"-inplace/reset")
		b.Logf("%s: p50 %.1f ms, p95 %.1f ms, boots %d, in-place resets %d, on-demand restores %d over %d resets",
			mode, ms(0.5), ms(0.95), after.Boots-before.Boots, after.Resets-before.Resets, after.OnDemandRestores-before.OnDemandRestores, resets)
	}
	b.ReportMetric(p50[pool.ResetModeReboot]/p50[pool.ResetModeInPlace], "reboot/inplace-p50")
}

// BenchmarkFork8 forks 8 children of one xterm-hello-file env over real
// HTTP, in both reset modes in the same run, with 8 warm sandboxes each
// time (the children of the previous fork closed and the pool refilled):
// inplace resets the warm sandboxes to the snapshot, reboot boots 8. It
// reports each mode's fork p50 and the ratio.
//
//	go test ./envserver -run '^$' -bench Fork8 -benchtime 1x
func BenchmarkFork8(b *testing.B) {
	const task, n, forks = "xterm-hello-file", 8, 5
	p50 := map[string]float64{}
	for _, mode := range []string{pool.ResetModeInPlace, pool.ResetModeReboot} {
		s := servertest.Start(b, servertest.Options{Pool: n, Replicas: 1, Edit: func(c *configs.Server) {
			c.ResetMode = mode
			c.MaxSandboxes = 3*n + 8
		}})
		var r api.BatchReply
		if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: task}}}, &r); err != nil || r.Results[0].Error != nil {
			b.Fatalf("reset: %v %v", err, r.Results[0].Error)
		}
		src := r.Results[0].EnvID
		var ds []time.Duration
		for range forks {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			if err := s.Pool.WaitWarm(ctx, n); err != nil {
				b.Fatal(err)
			}
			cancel()
			t0 := time.Now()
			var fr api.BatchReply
			if _, _, err := s.Call("/v1/fork", api.ForkRequest{EnvID: src, N: n}, &fr); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
			var ids []string
			for _, res := range fr.Results {
				if res.Error != nil {
					b.Fatalf("%s fork: %v", mode, res.Error)
				}
				ids = append(ids, res.EnvID)
			}
			if _, _, err := s.Call("/v1/close", api.CloseRequest{EnvIDs: ids}, nil); err != nil {
				b.Fatal(err)
			}
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		p50[mode] = float64(ds[len(ds)/2].Microseconds()) / 1000
		b.ReportMetric(p50[mode], mode+"-p50-ms")
		b.Logf("%s: fork of %d p50 %.0f ms (min %.0f, max %.0f) over %d forks", mode, n, p50[mode],
			float64(ds[0].Microseconds())/1000, float64(ds[len(ds)-1].Microseconds())/1000, forks)
	}
	b.ReportMetric(p50[pool.ResetModeReboot]/p50[pool.ResetModeInPlace], "reboot/inplace-p50")
}
