package envserver_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// pollingVerifier is the shipped verifiers' old form, kept as the baseline:
// it polls for up to 5 s before it answers 0.
const pollingVerifier = `for i in $(seq 50); do if [ "$(cat "$AGENT_HOME/hello.txt" 2>/dev/null)" = 'hello shinken' ]; then echo 1; exit 0; fi; sleep 0.1; done; echo 0`

// BenchmarkDoneToReward times the step that sends done, from request to
// reward, on xterm-hello-file solved and unsolved, with the shipped verifier
// (answers at once, after the freeze) and the old polling one. verify_us and
// freeze_us are the server's own timings of the verdict and of the freeze in
// it.
//
//	go test -run '^$' -bench BenchmarkDoneToReward -benchtime 5x ./envserver/
func BenchmarkDoneToReward(b *testing.B) {
	shipped, err := configs.LoadTasks("")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	instant := *shipped["xterm-hello-file"]
	polling := instant
	polling.ID = "xterm-hello-file-polling"
	polling.Verifier = configs.Verifier{Shell: pollingVerifier, TimeoutMS: 10000}
	for _, t := range []*configs.Task{&instant, &polling} {
		js, err := json.Marshal(t)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, t.ID+".json"), js, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	s := servertest.Start(b, servertest.Options{Pool: 2, Tasks: dir})
	for _, verifier := range []string{instant.ID, polling.ID} {
		for _, solved := range []bool{true, false} {
			name := map[bool]string{true: "solved", false: "unsolved"}[solved]
			if verifier == polling.ID {
				name = "polling-" + name
			}
			b.Run(name, func(b *testing.B) {
				task := s.Tasks[verifier]
				var verifyUS, freezeUS int64
				b.StopTimer()
				for range b.N {
					var rr api.BatchReply
					if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: verifier}}}, &rr); err != nil || rr.Results[0].Error != nil {
						b.Fatalf("reset: %v %+v", err, rr.Results)
					}
					env := rr.Results[0].EnvID
					if solved {
						for _, acts := range task.Solution[:len(task.Solution)-1] {
							benchStep(b, s, env, acts)
						}
						benchStep(b, s, env, []aci.Action{{Verb: aci.Wait, MS: 300}})
					}
					b.StartTimer()
					res := benchStep(b, s, env, []aci.Action{{Verb: aci.Done}})
					b.StopTimer()
					want := map[bool]float64{true: 1, false: 0}[solved]
					if rv(res) != want || res.Info == nil {
						b.Fatalf("done: got reward %v (%+v); want %v", rv(res), res.Info, want)
					}
					verifyUS += res.Info.Timings["verify_us"]
					freezeUS += res.Info.Timings["freeze_us"]
					s.Call("/v1/close", api.CloseRequest{EnvIDs: []string{env}}, nil)
				}
				b.ReportMetric(float64(verifyUS)/float64(b.N), "verify_us/op")
				b.ReportMetric(float64(freezeUS)/float64(b.N), "freeze_us/op")
			})
		}
	}
}

func benchStep(b *testing.B, s *servertest.Server, env string, acts []aci.Action) api.Result {
	b.Helper()
	var r api.BatchReply
	if _, _, err := s.Call("/v1/step", api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: acts}}}, &r); err != nil || r.Results[0].Error != nil {
		b.Fatalf("step: %v %+v", err, r.Results)
	}
	return r.Results[0]
}

// BenchmarkUnsolvedDone times done right after reset (reward 0) on every
// shipped task: early in training most episodes end this way.
//
//	go test -run '^$' -bench BenchmarkUnsolvedDone -benchtime 3x ./envserver/
func BenchmarkUnsolvedDone(b *testing.B) {
	s := servertest.Start(b, servertest.Options{Pool: 2})
	for _, id := range s.Tasks.IDs() {
		b.Run(id, func(b *testing.B) {
			b.StopTimer()
			for range b.N {
				var rr api.BatchReply
				if _, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: id}}}, &rr); err != nil || rr.Results[0].Error != nil {
					b.Fatalf("reset: %v %+v", err, rr.Results)
				}
				env := rr.Results[0].EnvID
				b.StartTimer()
				res := benchStep(b, s, env, []aci.Action{{Verb: aci.Done}})
				b.StopTimer()
				if rv(res) != 0 || res.Info.ExitReason != "task_complete" {
					b.Fatalf("done: got reward %v exit %q; want 0 task_complete", rv(res), res.Info.ExitReason)
				}
				s.Call("/v1/close", api.CloseRequest{EnvIDs: []string{env}}, nil)
			}
		})
	}
}
