package envserver_test

import (
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// The red team across the episode boundary: an episode that tries to leave
// something behind for the next one on the same sandbox (a process that
// keeps writing the answer, a tracer in the desktop's helpers, files where
// a reset keeps them, shared memory, a process table full of zombies). Each
// attack ends scored as a failure, and then every env of the task, reset
// in place onto the sandboxes the attack used, must score exactly as on a
// fresh replica: a `fail` scores 0, the reference solution scores 1.

// tracer tries PTRACE_ATTACH on every process it can see and leaves a
// writer behind in each it attaches: the attack that, through the AT-SPI
// registry kept across resets, once gave a later episode reward.
const tracer = `import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
n = 0
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid() and libc.ptrace(16, int(p), 0, 0) == 0:
        n += 1
        libc.ptrace(17, int(p), 0, 0)
open(os.path.expanduser("~/traced"), "w").write(str(n))
`

type persistence struct {
	name   string
	attack []aci.Action
	// then: how every later episode of the task plays, and what it scores.
	then   [][]aci.Action
	reward float64
}

func persistenceAttacks(hello *configs.Task) []persistence {
	writer := `setsid sh -c 'while :; do echo "hello shinken" > ~/hello.txt; sleep 0.05; done' </dev/null >/dev/null 2>&1 &
nohup sh -c 'trap "" HUP TERM; while :; do echo "hello shinken" > /tmp/hello.txt; cp /tmp/hello.txt ~/hello.txt; sleep 0.05; done' </dev/null >/dev/null 2>&1 &`
	fill := `rm -rf ~/.shinken && mkdir -p ~/.shinken && head -c 50000000 /dev/zero > ~/.shinken/xvfb.log
head -c 20000000 /dev/zero > /dev/shm/fill; ipcmk -M 8000000 >/dev/null; ipcmk -S 4 -Q >/dev/null
for d in /run/shinken /run/shinken/session /run/shinken/session/bus /tmp/.X11-unix; do head -c 1000000 /dev/zero > "$d/fill" 2>/dev/null; done`
	return []persistence{
		{name: "writer left running", attack: []aci.Action{sh(writer), wait(300)},
			then: [][]aci.Action{{{Verb: aci.Wait, MS: 500}, {Verb: aci.Fail}}}, reward: 0},
		{name: "tracer in the desktop's helpers", attack: []aci.Action{py(tracer), sh(writer), wait(500)},
			then: [][]aci.Action{{{Verb: aci.Wait, MS: 500}, {Verb: aci.Fail}}}, reward: 0},
		{name: "files where a reset keeps them", attack: []aci.Action{sh(fill), wait(1500)},
			then: hello.Solution, reward: 1},
		{name: "zombies and a fork bomb", attack: []aci.Action{sh(`b(){ b|b& }; b`), wait(800)},
			then: hello.Solution, reward: 1},
	}
}

func TestRedTeamNextEpisodeProcess(t *testing.T) {
	redTeamNext(t, servertest.Start(t, servertest.Options{Pool: 2, Replicas: 2, Logf: t.Logf}))
}

func TestRedTeamNextEpisodeDocker(t *testing.T) {
	redTeamNext(t, dockerServer(t, servertest.Options{Pool: 2, Replicas: 2, Logf: t.Logf}))
}

func redTeamNext(t *testing.T, s *servertest.Server) {
	const task, followers = "xterm-hello-file", 3
	for _, x := range persistenceAttacks(s.Tasks[task]) {
		t.Run(x.name, func(t *testing.T) {
			r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task}}})
			attacker := r.Results[0].EnvID
			// The attack may solve its own episode (the writer does); what
			// counts is that it stays there.
			_, reasons := playLenient(t, s, []string{attacker}, [][][]aci.Action{{x.attack, doneStep}})
			if reasons[0] != "task_complete" {
				t.Errorf("the attack's episode ended %q; want task_complete (scored)", reasons[0])
			}
			closeEnvs(s, attacker) // its sandbox is reset in place for the next lease
			req := api.ResetRequest{}
			for range followers {
				req.Envs = append(req.Envs, api.ResetEnv{Task: task})
			}
			r = reset(t, s, req)
			var envs []string
			scripts := make([][][]aci.Action, followers)
			for i, res := range r.Results {
				if res.Error != nil {
					t.Fatalf("follower reset: %v", res.Error)
				}
				envs = append(envs, res.EnvID)
				scripts[i] = x.then
			}
			rewards, reasons := play(t, s, envs, scripts)
			for i := range envs {
				if rewards[i] != x.reward || reasons[i] != "task_complete" {
					t.Errorf("a later episode (%d of %d) scored %v (%s); a fresh replica scores %v, task_complete",
						i+1, followers, rewards[i], reasons[i], x.reward)
				}
			}
			closeEnvs(s, envs...)
		})
	}
}

// playLenient is play for an attacker: its steps may record the agent's
// own errors.
func playLenient(t *testing.T, s *servertest.Server, envs []string, scripts [][][]aci.Action) (rewards []float64, reasons []string) {
	t.Helper()
	rewards, reasons = make([]float64, len(envs)), make([]string, len(envs))
	for k := 0; ; k++ {
		req := api.StepRequest{}
		var idx []int
		for i, sc := range scripts {
			if k < len(sc) {
				req.Steps = append(req.Steps, api.StepEnv{EnvID: envs[i], Actions: sc[k]})
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return rewards, reasons
		}
		r := step(t, s, req)
		for j, res := range r.Results {
			i := idx[j]
			if res.Error != nil {
				t.Fatalf("env %s step %d: %v", envs[i], k, res.Error)
			}
			if res.Terminated || res.Truncated {
				rewards[i], reasons[i] = res.Reward, res.Info.ExitReason
			}
		}
	}
}
