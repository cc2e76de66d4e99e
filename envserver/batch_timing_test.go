package envserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// BenchmarkBatchStep compares one 16-env batch step with 16 single-env
// steps sent one after another, over real HTTP against real sandboxes, in
// two observation modes:
//
//   - not_modified: the screen does not change and the client lists its
//     frame in have, so no image is encoded or sent;
//   - unchanged_without_have: the same unchanged screens, but the client
//     does not send have: the server skips the encode (shared cache) yet
//     sends the frame bytes;
//   - png: every step types a character, so every env's screen changes and
//     its frame is encoded and sent.
//
// It reports milliseconds per env-step for each way and their ratio, and the
// reply bytes per env-step.
//
//	go test ./envserver -run '^$' -bench BatchStep -benchtime 10x
func BenchmarkBatchStep(b *testing.B) {
	const n = 16
	// The shipped task with a step budget the benchmark cannot exhaust.
	tasks, err := configs.LoadTasks("")
	if err != nil {
		b.Fatal(err)
	}
	long := *tasks["xterm-hello-file"]
	long.ID, long.MaxSteps = "bench-long", 1<<30
	js, _ := json.Marshal(long)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bench-long.json"), js, 0o644); err != nil {
		b.Fatal(err)
	}
	s := servertest.Start(b, servertest.Options{Pool: n + 2, Tasks: dir})
	var req api.ResetRequest
	for i := 0; i < n; i++ {
		req.Envs = append(req.Envs, api.ResetEnv{Task: long.ID})
	}
	var r api.BatchReply
	if _, _, err := s.Call("/v1/reset", req, &r); err != nil {
		b.Fatal(err)
	}
	envs := make([]string, n)
	for i, res := range r.Results {
		if res.Error != nil {
			b.Fatal(res.Error)
		}
		envs[i] = res.EnvID
	}
	defer s.Call("/v1/close", api.CloseRequest{EnvIDs: envs}, nil)
	// Focus each terminal once so typed characters land.
	click := make([]api.StepEnv, n)
	for i, e := range envs {
		click[i] = api.StepEnv{EnvID: e, Action: &aci.Action{Verb: aci.Click, Target: aci.Px(200, 200)}}
	}
	if _, _, err := s.Call("/v1/step", api.StepRequest{Steps: click}, &r); err != nil {
		b.Fatal(err)
	}

	for _, mode := range []struct {
		name   string
		action aci.Action
		have   bool
	}{
		{"not_modified", aci.Action{Verb: aci.Wait, MS: 0}, true},
		{"unchanged_without_have", aci.Action{Verb: aci.Wait, MS: 0}, false},
		{"png", aci.Action{Verb: aci.TypeText, Text: "x"}, false},
	} {
		b.Run(mode.name, func(b *testing.B) {
			have := map[string]string{} // env → last frame
			call := func(steps []api.StepEnv) int {
				req := api.StepRequest{Steps: steps, Observe: &api.Observe{Format: aci.FormatPNG}}
				if mode.have {
					for _, st := range steps {
						if h := have[st.EnvID]; h != "" {
							req.Have = append(req.Have, h)
						}
					}
				}
				var out api.BatchReply
				_, size, err := s.Call("/v1/step", req, &out)
				if err != nil {
					b.Fatal(err)
				}
				for _, res := range out.Results {
					if res.Error != nil {
						b.Fatal(res.Error)
					}
					have[res.EnvID] = res.Obs.Frame
				}
				return size
			}
			steps := make([]api.StepEnv, n)
			for i, e := range envs {
				a := mode.action
				steps[i] = api.StepEnv{EnvID: e, Action: &a}
			}
			call(steps) // learn the frames
			var batch, seq []time.Duration
			var batchBytes, seqBytes int
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				t0 := time.Now()
				batchBytes += call(steps)
				batch = append(batch, time.Since(t0))
				t0 = time.Now()
				for i := range steps {
					seqBytes += call(steps[i : i+1])
				}
				seq = append(seq, time.Since(t0))
			}
			b.StopTimer()
			mb, ms := median(batch), median(seq)
			b.ReportMetric(float64(mb.Microseconds())/1000/n, "batch_ms/env-step")
			b.ReportMetric(float64(ms.Microseconds())/1000/n, "sequential_ms/env-step")
			b.ReportMetric(float64(ms)/float64(mb), "speedup")
			b.ReportMetric(float64(batchBytes)/float64(b.N*n), "batch_B/env-step")
			b.ReportMetric(float64(seqBytes)/float64(b.N*n), "sequential_B/env-step")
		})
	}
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
