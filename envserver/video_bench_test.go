package envserver_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// BenchmarkVideo times one episode video's encode (frames read and
// decoded, actions drawn, ffmpeg run) for episodes of 20 and 100 click
// steps in a real app, recorded on a real server:
//
//	go test -run '^$' -bench Video -benchtime 3x ./envserver/
func BenchmarkVideo(b *testing.B) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		b.Skip("ffmpeg not installed (make deps installs it)")
	}
	tasks, err := configs.LoadTasks("")
	if err != nil {
		b.Fatal(err)
	}
	long := *tasks["galculator-compute"]
	long.ID, long.MaxSteps = "bench-video", 1000
	js, _ := json.Marshal(long)
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, long.ID+".json"), js, 0o644); err != nil {
		b.Fatal(err)
	}
	s := servertest.Start(b, servertest.Options{Pool: 1, Tasks: dir, AllowUnchecked: true})
	quick := &api.Observe{Format: aci.FormatPNG, Settle: &aci.Settle{QuietMS: 50, MaxMS: 300}}
	episodes := map[int]string{}
	for _, n := range []int{20, 100} {
		var r api.BatchReply
		if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: long.ID}}}, &r); err != nil || r.Results[0].Error != nil {
			b.Fatalf("reset: %v %v", err, r.Results)
		}
		env := r.Results[0].EnvID
		for i := 0; i < n; i++ {
			x, y := float64(40+(i*53)%400), float64(120+(i*37)%300)
			var out api.BatchReply
			req := api.StepRequest{Observe: quick, Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Click, X: &x, Y: &y}}}}
			if _, _, err := s.Call("/v1/step", req, &out); err != nil || out.Results[0].Error != nil {
				b.Fatalf("step %d: %v %v", i, err, out.Results)
			}
		}
		episodes[n] = r.Results[0].EpisodeID
		s.Call("/v1/close", api.CloseRequest{EnvIDs: []string{env}}, nil)
	}
	for _, n := range []int{20, 100} {
		b.Run(map[int]string{20: "steps=20", 100: "steps=100"}[n], func(b *testing.B) {
			out := filepath.Join(b.TempDir(), "v.mp4")
			frames := 0
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var err error
				if frames, err = envserver.EncodeEpisodeVideo(s.Server, episodes[n], out); err != nil {
					b.Fatal(err)
				}
			}
			per := float64(time.Since(start).Milliseconds()) / float64(b.N)
			b.ReportMetric(per, "ms/episode")
			b.ReportMetric(per/float64(frames), "ms/frame")
		})
	}
}
