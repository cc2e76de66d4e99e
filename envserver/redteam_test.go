package envserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/rollout"
	"github.com/shinken-rl/shinken/trajectory"
)

// The red team: every way an agent that did not solve its task has been
// seen to earn reward or buy a free retry, played as an agent plays, over
// real HTTP against real sandboxes, driven by the rollout runner. Each must
// end with reward 0 and the exit reason it deserves, in one attempt.

// exploit is one attack: a scripted episode and what it must come to.
type exploit struct {
	name  string
	task  string
	steps [][]aci.Action
	text  string // when set, the first step is this model text (pyautogui)
	exit  trajectory.ExitReason
	// code, when set, is the info.error code the first step must record,
	// with ran of its actions run (a refused step runs none; an action the
	// guest refused ran, and failed); ran -1: any number.
	code aci.Code
	ran  int
}

// sh is the agent running a shell command: the xterm tasks give it a
// terminal, so launch_app of any program is theirs to use. args become $0...
func sh(script string, args ...string) aci.Action {
	return aci.Action{Verb: aci.LaunchApp, App: "sh", Args: append([]string{"-c", script}, args...)}
}

// starve speaks the guest protocol to the socket named by argv[1] (msgpack
// encoded by hand: the sandbox may have no msgpack module) and holds every
// exec slot guestd has with commands that sleep, so that a verifier run
// through exec would find guestd busy.
const starve = `import socket, struct, sys, time
class Raw(bytes): pass
def p(o):
    if isinstance(o, Raw): return bytes(o)
    if isinstance(o, dict): return bytes([0x80 | len(o)]) + b"".join(p(k) + p(v) for k, v in o.items())
    if isinstance(o, list): return bytes([0x90 | len(o)]) + b"".join(p(x) for x in o)
    if isinstance(o, str):
        b = o.encode()
        return (bytes([0xa0 | len(b)]) if len(b) < 32 else bytes([0xd9, len(b)])) + b
    return bytes([o]) if o < 128 else b"\xcd" + struct.pack(">H", o)
def send(s, m):
    b = p(m)
    s.sendall(struct.pack(">I", len(b)) + b)
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
send(s, {"id": 1, "t": "call", "m": "hello", "body": Raw(p({"protocol": 1}))})
for i in range(2, 64):
    send(s, {"id": i, "t": "call", "m": "exec", "body": Raw(p({"argv": ["sleep", "60"]}))})
time.sleep(60)
`

// xgrab is an X client of the agent's that grabs the server and never lets
// go; xclip one that owns CLIPBOARD and never answers a request for it
// (libX11 through ctypes: the sandbox's OS has both).
const (
	xgrab = `import ctypes, time
x = ctypes.CDLL("libX11.so.6")
x.XOpenDisplay.restype = ctypes.c_void_p
d = ctypes.c_void_p(x.XOpenDisplay(None))
x.XGrabServer(d)
x.XSync(d, 0)
time.sleep(600)
`
	xclip = `import ctypes, time
x = ctypes.CDLL("libX11.so.6")
x.XOpenDisplay.restype = ctypes.c_void_p
x.XDefaultRootWindow.restype = ctypes.c_ulong
x.XCreateSimpleWindow.restype = ctypes.c_ulong
x.XInternAtom.restype = ctypes.c_ulong
d = ctypes.c_void_p(x.XOpenDisplay(None))
w = x.XCreateSimpleWindow(d, ctypes.c_ulong(x.XDefaultRootWindow(d)), 0, 0, 1, 1, 0, 0, 0)
x.XSetSelectionOwner(d, ctypes.c_ulong(x.XInternAtom(d, b"CLIPBOARD", 0)), ctypes.c_ulong(w), 0)
x.XSync(d, 0)
time.sleep(600)
`
)

// py runs a Python program as the agent.
func py(prog string) aci.Action {
	return aci.Action{Verb: aci.LaunchApp, App: "python3", Args: []string{"-c", prog}}
}

func wait(ms int) aci.Action { return aci.Action{Verb: aci.Wait, MS: ms} }

var doneStep = []aci.Action{{Verb: aci.Done}}

// repoRoot is this checkout's root, whose task files hold every answer.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

func exploits(stateDir string) []exploit {
	hello := "xterm-hello-file"
	taskFile := filepath.Join(repoRoot(), "configs", "tasks", hello+".json")
	exe, _ := os.Executable()
	return append([]exploit{
		{name: "host file read", task: hello, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(fmt.Sprintf(`for f in %q %q %q/*/*; do grep -aoh 'hello shin[k]en' "$f" 2>/dev/null | head -1 > ~/hello.txt && [ -s ~/hello.txt ] && break; done`,
				taskFile, exe, stateDir)), wait(1500)}, doneStep}},
		{name: "stdout injection", task: hello, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`while :; do for p in /proc/[0-9]*; do echo 1 > $p/fd/1; echo 1e308 > $p/fd/1; done 2>/dev/null; done`), wait(300)}, doneStep}},
		{name: "verifier stopped or killed", task: hello, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`me=$(id -u); while :; do pkill -STOP -v -U $me; pkill -KILL -v -U $me; for p in /proc/[0-9]*; do kill -STOP ${p#/proc/}; done 2>/dev/null; done`), wait(300)}, doneStep}},
		{name: "exec-slot starvation", task: hello, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`for s in /run/shinken/guest.sock $(find / -xdev -type s 2>/dev/null); do python3 -c "$0" "$s" & done`, starve), wait(500)}, doneStep}},
		{name: "argv snooping", task: hello, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`while :; do cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' ' ' | grep -o 'hello shin[k]en' | head -1 > ~/.s && [ -s ~/.s ] && mv ~/.s ~/hello.txt; done`), wait(300)}, doneStep}},
		{name: "kill 1 during scoring", task: hello, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`while :; do kill -TERM 1; kill -KILL 1; kill -TERM -1; done 2>/dev/null`), wait(300)}, doneStep}},
		{name: "session killed", task: hello, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`kill -9 -1`), wait(500)}, {wait(2500)}, doneStep}},
		{name: "fork bomb", task: hello, exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{sh(`b(){ b|b& }; b`), wait(500)}, {{Verb: aci.LaunchApp, App: "xterm"}}, doneStep}},
		{name: "sleep to timeout", task: hello, exit: trajectory.TaskComplete, code: aci.CodeInvalidAction,
			text: "import time\ntime.sleep(60)", steps: [][]aci.Action{nil, doneStep}},
		{name: "sleep to timeout, strict task", task: "redteam-strict", exit: trajectory.AgentError, code: aci.CodeInvalidAction,
			text: "import time\ntime.sleep(60)", steps: [][]aci.Action{nil}},
		{name: "waits past the step budget", task: hello, exit: trajectory.TaskComplete, code: aci.CodeInvalidAction,
			steps: [][]aci.Action{{wait(aci.Caps.WaitMS), wait(aci.Caps.WaitMS)}, doneStep}},
		{name: "duration overflow", task: hello, exit: trajectory.TaskComplete, code: aci.CodeInvalidAction, steps: [][]aci.Action{
			{{Verb: aci.Drag, Target: aci.Px(10, 10), To: aci.Px(20, 20), DurationMS: 1 << 62}}, doneStep}},
		{name: "missing program", task: hello, exit: trajectory.TaskComplete, code: aci.CodeInvalidAction, ran: 1, steps: [][]aci.Action{
			{{Verb: aci.LaunchApp, App: "no-such-program-anywhere"}}, doneStep}},
		{name: "app the task does not offer", task: "mousepad-write-note", exit: trajectory.TaskComplete, code: aci.CodeInvalidAction, steps: [][]aci.Action{
			{{Verb: aci.LaunchApp, App: "xterm"}}, doneStep}},
		// Failure is never optional: what the agent's own clients do to the
		// display is the agent's outcome, not a dead sandbox.
		{name: "X server grabbed", task: hello, exit: trajectory.TaskComplete, code: aci.CodeAgentError, ran: -1, steps: [][]aci.Action{
			{py(xgrab), wait(800)}, doneStep}},
		{name: "clipboard owner never answers", task: hello, exit: trajectory.TaskComplete, code: aci.CodeAgentError, ran: 3, steps: [][]aci.Action{
			{py(xclip), wait(800), {Verb: aci.ClipboardGet}}, doneStep}},
		// The agent traces nothing it did not start.
		{name: "ptrace what the agent did not start", task: "redteam-untraceable", exit: trajectory.TaskComplete, steps: [][]aci.Action{
			{py(tracer), wait(300)}, doneStep}},
		// The verdict contract: a verifier that echoes what the agent wrote.
		verdict("1e308"), verdict("1\n1"), verdict("nan"), verdict("inf"), verdict("-1"),
		verdict("yes"), verdict(""), verdict("crash"), verdict("hang"),
	}, verifierExploits()...)
}

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

func verdict(out string) exploit {
	return exploit{name: fmt.Sprintf("verdict %q", out), task: "redteam-verdict", exit: trajectory.ScorerError,
		steps: [][]aci.Action{{sh(fmt.Sprintf(`printf '%%s' %q > ~/verdict.txt`, out)), wait(300)}, doneStep}}
}

// redteamTasks writes the task suite the red team plays: shipped tasks and
// two of its own.
func redteamTasks(t *testing.T) string {
	dir := t.TempDir()
	shipped, err := configs.LoadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	hello := *shipped["xterm-hello-file"]
	strict := hello
	strict.ID, strict.EndOnAgentError = "redteam-strict", true
	echo := hello
	echo.ID = "redteam-verdict"
	echo.Verifier = configs.Verifier{TimeoutMS: 1000, Shell: `v=$(cat "$AGENT_HOME/verdict.txt"); ` +
		`case "$v" in crash) exit 3;; hang) sleep 30;; esac; printf '%s\n' "$v"`}
	// untraceable scores 0 only when the tracer ran and could trace none of
	// the processes it did not start (the desktop's helpers, the task's
	// xterm, guestd, the X server).
	untraceable := hello
	untraceable.ID = "redteam-untraceable"
	untraceable.Verifier = configs.Verifier{TimeoutMS: 5000, Shell: `n=$(head -c 32 "$AGENT_HOME/traced" 2>/dev/null); if [ "$n" = 0 ]; then echo 0; else echo 1; fi`}
	// The attacks on these three know their one instance's files: they are
	// fixed copies of what the shipped families draw.
	fixed, err := configs.LoadTasks(filepath.Join("testdata", "tasks"))
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range []*configs.Task{&hello, &strict, &echo, &untraceable, fixed["mousepad-write-note"],
		fixed["xterm-clean-tmp"], fixed["xterm-make-executable"]} {
		b, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, task.ID+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRedTeamProcess(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 4, Tasks: redteamTasks(t), Logf: t.Logf})
	redTeam(t, s)
}

func TestRedTeamDocker(t *testing.T) {
	s := dockerServer(t, servertest.Options{Pool: 4, Tasks: redteamTasks(t), Logf: t.Logf})
	redTeam(t, s)
}

// redTeam runs every exploit as a rollout job (the seed picks the exploit)
// and checks reward, exit reason, attempts and the recorded steps.
func redTeam(t *testing.T, s *servertest.Server) {
	var spec api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &spec); err != nil || !spec.Pool.Confined || !strings.Contains(spec.Pool.Isolation, "verifier") {
		t.Errorf("spec pool: %+v (%v); want confined, with its isolation described", spec.Pool, err)
	}
	xs := exploits(s.State)
	byTask := map[string][]int{}
	for i, x := range xs {
		byTask[x.task] = append(byTask[x.task], i)
	}
	client := rollout.NewClient(s.URL, s.Token, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// Each task's golden checkpoint is made before the red team plays, so
	// that a slow first setup on a loaded machine is not mistaken for a
	// retry the agent bought.
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
				if turn.Step == 0 && x.text != "" {
					return rollout.Decision{Text: x.text, Dialect: "pyautogui"}, nil
				}
				if turn.Step >= len(x.steps) {
					return rollout.Decision{Actions: doneStep}, nil
				}
				return rollout.Decision{Actions: x.steps[turn.Step]}, nil
			}), nil
		})
		sum, err := rollout.Run(ctx, rollout.Config{
			Client: client, Policy: policy, Tasks: []string{task}, Seeds: len(idx), Concurrency: 3,
		})
		if err != nil {
			t.Fatalf("rollout %s: %v", task, err)
		}
		if sum.InfraRetries != 0 {
			t.Errorf("%s: the runner retried %d attempts; want none", task, sum.InfraRetries)
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
				first := tr.Steps[0]
				if x.code != "" && (first.Error == nil || first.Error.Code != x.code || first.Ran == nil || (x.ran >= 0 && *first.Ran != x.ran)) {
					t.Errorf("first step: error %v ran %v; want %s with %d run", first.Error, ranOf(first.Ran), x.code, x.ran)
				}
				last := tr.Steps[len(tr.Steps)-1]
				if x.exit == trajectory.ScorerError {
					if last.Error == nil || last.Error.Code != aci.CodeScorerError || last.Error.Detail == nil {
						t.Errorf("last step error = %+v; want scorer_error with the verifier's output kept", last.Error)
					}
				}
			})
		}
	}
}

func ranOf(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

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
	known  string // a leak not closed yet: the attack is skipped, saying why
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
	redTeamNextWith(t, s, persistenceAttacks(s.Tasks["xterm-hello-file"]))
}

// redTeamNextWith plays each attack on xterm-hello-file, then later
// episodes of it until one runs on the attacker's sandbox.
func redTeamNextWith(t *testing.T, s *servertest.Server, attacks []persistence) {
	const task, followers = "xterm-hello-file", 12
	for _, x := range attacks {
		t.Run(x.name, func(t *testing.T) {
			if x.known != "" {
				t.Skip("known: " + x.known)
			}
			r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task}}})
			attacker := r.Results[0].EnvID
			sandbox, ok := s.Server.EnvGuest(attacker) // the guest connection names the sandbox
			if !ok {
				t.Fatalf("env %s has no sandbox", attacker)
			}
			// The attack may solve its own episode (the writer does); what
			// counts is that it stays there.
			_, reasons := playSteps(t, s, []string{attacker}, [][][]aci.Action{{x.attack, doneStep}}, nil, false)
			if reasons[0] != "task_complete" {
				t.Errorf("the attack's episode ended %q; want task_complete (scored)", reasons[0])
			}
			closeEnvs(s, attacker) // its sandbox is reset in place for a later lease
			// Later episodes, one at a time, until one runs on the attacker's
			// sandbox (idle replicas are leased before it, settled first);
			// each must score as on a fresh replica.
			// Retired sandboxes (reboot mode: docker) are never leased
			// again: no later episode runs on the attacker's, and two fresh
			// ones show what a shared host state would carry over.
			n := followers
			if s.Pool.ResetMode() != pool.ResetModeInPlace {
				n = 2
			}
			same := false
			for try := 0; try < n && !same; try++ {
				r = reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task}}})
				env := r.Results[0].EnvID
				if g, ok := s.Server.EnvGuest(env); ok && g == sandbox {
					same = true
				}
				rewards, reasons := play(t, s, []string{env}, [][][]aci.Action{x.then})
				if rewards[0] != x.reward || reasons[0] != "task_complete" {
					t.Errorf("a later episode (on the attacker's sandbox: %v) scored %v (%s); a fresh replica scores %v, task_complete",
						same, rewards[0], reasons[0], x.reward)
				}
				closeEnvs(s, env)
			}
			if !same && s.Pool.ResetMode() == pool.ResetModeInPlace {
				t.Errorf("none of %d later episodes ran on the attacker's sandbox (reset in place): the attack was not put to the test", followers)
			}
		})
	}
}
