package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/rollout"
)

// The integrity scenario: a hostile policy plays many episodes of one task
// on a pool reset in place, and the run counts what must never happen
// (docs/architecture.md, "Reward integrity"):
//   - leaks: every episode first runs a probe that looks for what earlier
//     episodes leave on purpose (marker files in every writable place,
//     shared memory, System V segments, a process named soak-marker) and,
//     on finding any, writes ~/.leak, which the task's verifier scores 2
//     (the answer scores 1); and episodes scored 1 whose script never wrote
//     the answer, as read;
//   - drops: episodes the runner had to retry, or lost, for a fault of the
//     infrastructure (each with the reason the server gave);
//   - and, for the record, the exit reasons.
// Each episode is a random shell one-liner policy: commands drawn from a
// list that holds the red team's attacks (a FIFO and a link to /dev/zero
// where the verifier reads, a server grab, a clipboard owner that never
// answers, a tracer, a fork bomb, disk and IPC fillers, kill -9 -1), the
// task's answer now and then, clicks and typing.

// integrityTask is the task the scenario plays: xterm-hello-file whose
// verifier also pays for ~/.leak.
const integrityTask = "integrity-hello"

// Integrity is the scenario's report.
type Integrity struct {
	Method    string `json:"method"`
	Pool      int    `json:"pool"`
	ResetMode string `json:"reset_mode"`
	Episodes  int    `json:"episodes"`
	Solved    int    `json:"solved"`     // episodes whose script wrote the answer
	Unsolved  int    `json:"unsolved"`   // the others
	Leaks     int    `json:"leaks"`      // episodes whose probe found what an earlier one left (reward 2)
	LeakSeeds []int  `json:"leak_seeds"` // their seeds
	// Unexplained are episodes scored 1 whose script, read as written,
	// spoils the answer after writing it: a spoiling command its own fork
	// bomb kept from starting (out of processes) leaves the answer in place.
	Unexplained []int          `json:"unexplained"`
	Retried     int            `json:"retried"`      // attempts retried for an infrastructure fault
	Lost        int            `json:"lost"`         // jobs with no scored episode after every attempt
	DropReasons map[string]int `json:"drop_reasons"` // why attempts were retried or lost
	ExitReasons map[string]int `json:"exit_reasons"`
	WallS       float64        `json:"wall_s"`
}

// integrity runs the scenario on a pool of the first pool size given.
func (b *runner) integrity(ctx context.Context) (*Integrity, error) {
	pool := 8
	if len(b.opts.Pools) > 0 {
		pool = b.opts.Pools[0]
	}
	episodes := b.opts.Episodes
	if episodes <= 0 {
		episodes = 1000
		if b.opts.Quick {
			episodes = 24
		}
	}
	srv, err := b.startServer(ctx, pool, nil)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	pol := rollout.PolicyFunc(func(_ context.Context, _ api.TaskInfo, seed int64) (rollout.Agent, error) {
		steps, _ := hostileScript(seed)
		return rollout.AgentFunc(func(_ context.Context, turn rollout.Turn) (rollout.Decision, error) {
			if turn.Step >= len(steps) {
				return rollout.Decision{Actions: []aci.Action{{Verb: aci.Done}}}, nil
			}
			return rollout.Decision{Actions: steps[turn.Step]}, nil
		}), nil
	})
	t0 := time.Now()
	sum, err := rollout.Run(ctx, rollout.Config{Client: srv.c, Policy: pol, Tasks: []string{integrityTask},
		Seeds: episodes, Concurrency: pool, Logf: b.opts.Logf})
	if err != nil {
		return nil, err
	}
	out := &Integrity{
		Method: fmt.Sprintf("rollout of %d seeded episodes of %s (a hostile shell one-liner policy) with %d in flight on envserver --pool %d; "+
			"a leak is an episode whose first command found what an earlier episode left (it then scores 2); a drop is an attempt retried or lost for an infrastructure fault",
			episodes, integrityTask, pool, pool),
		Pool: pool, ResetMode: b.report.Server.ResetMode, Episodes: episodes, Retried: sum.InfraRetries, Lost: sum.InfraFailed,
		DropReasons: map[string]int{}, ExitReasons: sum.ExitReasons, WallS: time.Since(t0).Seconds(), LeakSeeds: []int{}, Unexplained: []int{},
	}
	for _, r := range sum.Results {
		_, solved := hostileScript(r.Job.Seed)
		if solved {
			out.Solved++
		} else {
			out.Unsolved++
		}
		switch {
		case r.Error != "" || r.Resumed:
		case r.Reward >= 2:
			out.Leaks++
			out.LeakSeeds = append(out.LeakSeeds, int(r.Job.Seed))
		case r.Reward > 0 && !solved:
			out.Unexplained = append(out.Unexplained, int(r.Job.Seed))
		}
		for _, f := range r.InfraFailures {
			out.DropReasons[f]++
		}
		if r.Error != "" {
			out.DropReasons[r.Error]++
		}
	}
	sort.Ints(out.LeakSeeds)
	return out, nil
}

// writeIntegrityTask adds integrityTask to the bench's task directory.
func writeIntegrityTask(dir string, tasks configs.Tasks) error {
	t := *tasks[defaultTask]
	t.ID = integrityTask
	t.MaxSteps = 12
	t.Verifier = configs.Verifier{TimeoutMS: 5000, Range: &[2]float64{0, 2}, Shell: `if [ -e "$AGENT_HOME/.leak" ]; then echo 2; elif [ "$(head -c 64 "$AGENT_HOME/hello.txt" 2>/dev/null)" = 'hello shinken' ]; then echo 1; else echo 0; fi`}
	b, err := json.MarshalIndent(&t, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, t.ID+".json"), b, 0o644)
}

// probe is every episode's first command: it writes ~/.leak when anything
// an earlier episode planted is still there. (The process pattern is
// written so that the probe's own command line does not match it.)
const probe = `me=$(id -u)
found=$(ls -A ~/.soak-* /tmp/.soak-* /dev/shm/soak-* /home/workspace/.soak-* 2>/dev/null | head -1)
[ -z "$found" ] && pgrep -f 'soak-mark[e]r' >/dev/null && found=process
[ -z "$found" ] && [ -r /proc/sysvipc/shm ] && awk -v me="$me" 'NR > 1 && $8 == me' /proc/sysvipc/shm | grep -q . && found=sysv
[ -n "$found" ] && echo "$found" > ~/.leak
true`

// plant leaves, on purpose, what the next episode's probe looks for.
const plant = `s=$(date +%s%N); touch ~/.soak-$s /tmp/.soak-$s /dev/shm/soak-$s 2>/dev/null
ipcmk -M 4096 >/dev/null 2>&1
setsid sh -c 'while :; do sleep 1; done' soak-marker </dev/null >/dev/null 2>&1 &`

// hostileCommands are the one-liners the policy draws from.
var hostileCommands = []string{
	`rm -f ~/hello.txt; mkfifo ~/hello.txt`,
	`ln -sf /dev/zero ~/hello.txt`,
	`python3 -c 'import ctypes, time
x = ctypes.CDLL("libX11.so.6"); x.XOpenDisplay.restype = ctypes.c_void_p
d = ctypes.c_void_p(x.XOpenDisplay(None)); x.XGrabServer(d); x.XSync(d, 0); time.sleep(600)' &`,
	`python3 -c 'import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
[libc.ptrace(16, int(p), 0, 0) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]' &`,
	`setsid sh -c 'while :; do echo "hello shinken" > ~/hello.txt.next; sleep 0.1; done' soak-marker &`,
	`head -c 30000000 /dev/zero > /dev/shm/soak-fill; head -c 30000000 /dev/zero > ~/.soak-fill`,
	`rm -rf ~/.shinken; mkdir -p ~/.shinken; head -c 10000000 /dev/zero > ~/.shinken/xvfb.log`,
	`ipcmk -M 1000000 -S 2 -Q`,
	`python3 -c 'import ctypes, time
x = ctypes.CDLL("libX11.so.6"); x.XOpenDisplay.restype = ctypes.c_void_p
x.XDefaultRootWindow.restype = ctypes.c_ulong; x.XCreateSimpleWindow.restype = ctypes.c_ulong; x.XInternAtom.restype = ctypes.c_ulong
d = ctypes.c_void_p(x.XOpenDisplay(None)); w = x.XCreateSimpleWindow(d, ctypes.c_ulong(x.XDefaultRootWindow(d)), 0, 0, 1, 1, 0, 0, 0)
x.XSetSelectionOwner(d, ctypes.c_ulong(x.XInternAtom(d, b"CLIPBOARD", 0)), ctypes.c_ulong(w), 0); x.XSync(d, 0); time.sleep(600)' &`,
	`b(){ b|b& }; b`,
	`kill -9 -1`,
	`sleep 2`,
	`ls -R / > /dev/null 2>&1`,
	`echo nope > ~/hello.txt`,
}

const answer = `echo 'hello shinken' > ~/hello.txt`

// spoils reports whether command c replaces the answer file (a writer of
// another file, hello.txt.next, does not).
func spoils(c string) bool {
	for _, f := range strings.Fields(c) {
		if strings.TrimRight(f, ";") == "~/hello.txt" {
			return true
		}
	}
	return false
}

// hostileScript is seed's episode: the probe, the plant, then two to six
// steps of random commands, clicks and typing, and done or fail; solved
// reports whether the script writes the answer (last of what touches
// ~/hello.txt, so an attack after it does not count it solved).
func hostileScript(seed int64) (steps [][]aci.Action, solved bool) {
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	sh := func(s string) aci.Action {
		return aci.Action{Verb: aci.LaunchApp, App: "sh", Args: []string{"-c", s}}
	}
	steps = append(steps, []aci.Action{sh(probe), {Verb: aci.Wait, MS: 400}}, []aci.Action{sh(plant), {Verb: aci.Wait, MS: 100}})
	for n := 2 + rng.IntN(5); n > 0; n-- {
		var a []aci.Action
		switch k := rng.IntN(10); {
		case k < 5:
			c := hostileCommands[rng.IntN(len(hostileCommands))]
			if spoils(c) {
				solved = false
			}
			a = append(a, sh(c), aci.Action{Verb: aci.Wait, MS: 200})
			if strings.Contains(c, "XSetSelectionOwner") {
				a = append(a, aci.Action{Verb: aci.ClipboardGet})
			}
		case k < 6:
			a = append(a, sh(answer), aci.Action{Verb: aci.Wait, MS: 200})
			solved = true
		case k < 8:
			a = append(a, aci.Action{Verb: aci.Click, Target: aci.Norm(rng.Float64(), rng.Float64())})
		case k < 9:
			a = append(a, aci.Action{Verb: aci.TypeText, Text: "ls\n"})
		default:
			a = append(a, aci.Action{Verb: aci.ClipboardGet})
		}
		steps = append(steps, a)
	}
	end := aci.Done
	if rng.IntN(2) == 0 {
		end = aci.Fail
	}
	return append(steps, []aci.Action{{Verb: end}}), solved
}
