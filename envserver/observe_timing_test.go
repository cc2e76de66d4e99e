package envserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// BenchmarkObserveNotModifiedHTTP measures, over real HTTP against a real
// sandbox, a step that only observes (verb screenshot) an unchanged screen
// whose frame the client lists in have: guestd answers not_modified from X
// DAMAGE without capturing, and the reply carries no image. Beside it in the
// same run: the same step with settling off, and the same step without have
// (the frame bytes travel; the shared cache spares the encode).
//
//	go test ./envserver -run '^$' -bench ObserveNotModifiedHTTP -benchtime 300x
func BenchmarkObserveNotModifiedHTTP(b *testing.B) {
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
	s := servertest.Start(b, servertest.Options{Pool: 1, Tasks: dir})
	var r api.BatchReply
	if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: long.ID}}}, &r); err != nil || r.Results[0].Error != nil {
		b.Fatalf("reset: %v %+v", err, r.Results)
	}
	env, frame := r.Results[0].EnvID, r.Results[0].Obs.Frame
	look := api.StepEnv{EnvID: env, Action: &aci.Action{Verb: aci.Screenshot}}
	for _, c := range []struct {
		name string
		req  api.StepRequest
	}{
		{"not_modified_settled", api.StepRequest{Steps: []api.StepEnv{look}, Have: []string{frame}}},
		{"not_modified_settle_off", api.StepRequest{Steps: []api.StepEnv{look}, Have: []string{frame},
			Observe: &api.Observe{Format: aci.FormatPNG, Settle: &aci.Settle{}}}},
		{"unchanged_without_have", api.StepRequest{Steps: []api.StepEnv{look}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			durs := make([]time.Duration, 0, b.N)
			size := 0
			for i := 0; i < b.N; i++ {
				var out api.BatchReply
				t0 := time.Now()
				_, n, err := s.Call("/v1/step", c.req, &out)
				durs = append(durs, time.Since(t0))
				if err != nil || out.Results[0].Error != nil || out.Results[0].Obs.Frame != frame {
					b.Fatalf("step: %v %+v", err, out.Results)
				}
				size = n
			}
			slices.Sort(durs)
			b.ReportMetric(float64(durs[len(durs)/2].Nanoseconds())/1e6, "p50_ms")
			b.ReportMetric(float64(durs[len(durs)*95/100].Nanoseconds())/1e6, "p95_ms")
			b.ReportMetric(float64(size), "reply_bytes")
		})
	}
}
