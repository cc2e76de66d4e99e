package envserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/rollout"
	"github.com/shinken-rl/shinken/trajectory"
)

// verifierExploits are the hostile files an agent plants in its home so that
// a verifier reading them hangs, reads nothing, or reads a wrong kind of file
// as the right one, and pays. Each is played on a shipped task and must end
// with reward 0 and task_complete (never scorer_error: the verifier answers,
// at once) in one attempt (docs/architecture.md, "Verifiers read the
// agent's files safely").
func verifierExploits() []exploit {
	const hello, clean, mkexec = "xterm-hello-file", "xterm-clean-tmp", "xterm-make-executable"
	return []exploit{
		// cat blocked on the FIFO (no writer) until the verifier's timeout.
		{name: "hello.txt a FIFO", task: hello, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`mkfifo ~/hello.txt`), wait(300)}, doneStep}},
		// cat read zeros until the timeout or the output cap.
		{name: "hello.txt a link to /dev/zero", task: hello, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`ln -s /dev/zero ~/hello.txt`), wait(300)}, doneStep}},
		// Nothing deleted; ls junk/*.tmp failed silently for the scorer
		// (no read permission), so the glob looked empty.
		{name: "junk unlistable", task: clean, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`chmod 311 ~/junk`), wait(300)}, doneStep}},
		// 9,000 more .tmp names of 250 characters, the .tmp files still
		// there: the glob overflowed ls's argv (E2BIG: 2.4 MB of paths
		// against 2 MiB), ls printed nothing.
		{name: "junk past a glob's argv", task: clean, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`cd ~/junk && seq -f '%0246g.tmp' 9000 | xargs touch`), wait(2000)}, {wait(2000)}, doneStep}},
		// The marker written by running the script through sh (as the task's
		// wrong solution does), then run.sh replaced by a directory, which
		// find -perm -u+x matched as an executable.
		{name: "run.sh a directory", task: mkexec, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`sh ~/run.sh && rm ~/run.sh && mkdir -m 755 ~/run.sh`), wait(300)}, doneStep}},
	}
}

// TestRedTeamVerifiers plays verifierExploits as the red team plays its
// exploits (redTeam in redteam_test.go): through the rollout runner, over
// HTTP, on real process sandboxes with the shipped tasks.
func TestRedTeamVerifiers(t *testing.T) {
	playVerifierExploits(t, servertest.Start(t, servertest.Options{Pool: 3, Logf: t.Logf}))
}

// TestRedTeamVerifiersDocker is TestRedTeamVerifiers on containers, whose
// verifiers run guestd's check mode from its mount there.
func TestRedTeamVerifiersDocker(t *testing.T) {
	playVerifierExploits(t, dockerServer(t, servertest.Options{Pool: 3, Logf: t.Logf}))
}

// playVerifierExploits runs each of verifierExploits as a rollout job (the
// seed picks the exploit) and checks reward, exit reason, attempts and
// that the verifier answered.
func playVerifierExploits(t *testing.T, s *servertest.Server) {
	xs := verifierExploits()
	byTask := map[string][]int{}
	for i, x := range xs {
		byTask[x.task] = append(byTask[x.task], i)
	}
	client := rollout.NewClient(s.URL, s.Token, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// Each task's golden checkpoint first, so that a slow first setup on
	// a loaded machine is not mistaken for a retry the agent bought.
	for task := range byTask {
		for try := 0; ; try++ {
			var rr api.BatchReply
			_, _, err := s.Call("/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: task}}}, &rr)
			if err == nil && rr.Results[0].Error == nil {
				closeEnvs(s, rr.Results[0].EnvID)
				break
			}
			if try == 2 {
				t.Fatalf("warming %s: %v %+v", task, err, rr.Results)
			}
		}
	}
	for task, idx := range byTask {
		policy := rollout.PolicyFunc(func(_ context.Context, _ api.TaskInfo, seed int64) (rollout.Agent, error) {
			x := xs[idx[seed]]
			return rollout.AgentFunc(func(_ context.Context, turn rollout.Turn) (rollout.Decision, error) {
				if turn.Step >= len(x.steps) {
					return rollout.Decision{Actions: doneStep}, nil
				}
				return rollout.Decision{Actions: x.steps[turn.Step]}, nil
			}), nil
		})
		sum, err := rollout.Run(ctx, rollout.Config{
			Client: client, Policy: policy, Tasks: []string{task}, Seeds: len(idx), Concurrency: 2,
		})
		if err != nil {
			t.Fatalf("rollout %s: %v", task, err)
		}
		if sum.InfraRetries != 0 {
			t.Errorf("%s: the runner retried %d attempts; want none", task, sum.InfraRetries)
		}
		if len(sum.Results) != len(idx) {
			t.Errorf("%s: %d results; want %d", task, len(sum.Results), len(idx))
		}
		for _, r := range sum.Results {
			x := xs[idx[r.Job.Seed]]
			t.Run(strings.ReplaceAll(x.name, " ", "_"), func(t *testing.T) {
				if r.Reward != 0 || r.ExitReason != string(x.exit) || r.Attempts != 1 || len(r.InfraFailures) > 0 {
					t.Fatalf("got reward %v exit %q attempts %d (retried for %v, error %q); want reward 0 exit %q in one attempt",
						r.Reward, r.ExitReason, r.Attempts, r.InfraFailures, r.Error, x.exit)
				}
				tr, err := client.Episode(ctx, r.EpisodeID)
				if err != nil {
					t.Fatalf("episode: %v", err)
				}
				if last := tr.Steps[len(tr.Steps)-1]; last.Error != nil {
					t.Errorf("last step error = %+v; want the verifier's answer", last.Error)
				}
			})
		}
	}
}
