package guest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"golang.org/x/sys/unix"
)

// freezeTimeout bounds the freeze before a verifier runs.
const freezeTimeout = 5 * time.Second

// runScore is the score method: it stops every process the agent could have
// started, then runs the verifier as the scoring identity with its own HOME
// and working directory, and ends whatever the verifier left behind before
// reading its output, so nothing but the verifier writes to it. The agent's
// processes stay stopped: the episode is over. Score takes no exec slot, so
// the agent can never starve it.
func (s *Server) runScore(ctx context.Context, a wire.ScoreArgs) (*wire.ScoreResult, error) {
	var argv []string
	var stdin []byte
	switch {
	case len(a.Argv) > 0 && a.Shell != "":
		return nil, aci.Errorf(aci.CodeBadRequest, "score: argv and shell are exclusive")
	case len(a.Argv) > 0:
		argv = a.Argv
	case a.Shell != "":
		// The verifier library comes first (docs/architecture.md,
		// "Verifiers read the agent's files safely").
		argv, stdin = []string{"/bin/sh", "-s"}, withVerifierPrelude(a.Shell)
	default:
		return nil, aci.Errorf(aci.CodeBadRequest, "score: need argv or shell")
	}
	timeout := defaultExecTimeout
	if a.TimeoutMS > 0 {
		timeout = min(time.Duration(a.TimeoutMS)*time.Millisecond, maxExecTimeout)
	}
	s.score.Lock()
	defer s.score.Unlock()

	t0 := time.Now()
	fctx, cancel := context.WithTimeout(ctx, freezeTimeout)
	// The cgroup freezer stops the agent's cgroup at once where the host
	// has one; the sweep then stops whatever is left.
	if err := s.cfg.AgentCgroups.Freeze(fctx); err != nil {
		s.cfg.Logf("guest: score: %v; the sweep stops the agent's processes", err)
	}
	n, err := freeze(fctx, s.exempt())
	cancel()
	if err != nil {
		return nil, err
	}
	out := &wire.ScoreResult{Frozen: n, FreezeUS: time.Since(t0).Microseconds(), Isolated: s.Isolated()}

	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, aci.Errorf(aci.CodeNotFound, "score: %v", err)
	}
	home, err := os.MkdirTemp("", "shinken-score-")
	if err != nil {
		return nil, fmt.Errorf("score: home: %w", err)
	}
	defer os.RemoveAll(home)
	if s.cfg.Scorer.distinct() {
		if err := os.Chown(home, s.cfg.Scorer.UID, s.cfg.Scorer.GID); err != nil {
			return nil, fmt.Errorf("score: home: %w", err)
		}
	}
	env := append([]string(nil), s.cfg.Env...)
	env = setEnvVar(env, "AGENT_HOME", envHome(s.cfg.Env))
	// The web apps' state, the ground truth of a web task, goes to the
	// verifier alone (web.go).
	if n, err := s.web.writeStates(filepath.Join(home, "web"), s.cfg.Scorer); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	} else if n > 0 {
		env = setEnvVar(env, "SK_WEB", filepath.Join(home, "web"))
	}
	if n, err := exportBrowser(envHome(s.cfg.Env), filepath.Join(home, "browser"), s.cfg.Scorer); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	} else if n > 0 {
		env = setEnvVar(env, "SK_BROWSER", filepath.Join(home, "browser"))
	}
	if n, err := exportApps(envHome(s.cfg.Env), filepath.Join(home, "apps"), s.cfg.Scorer); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	} else if n > 0 {
		env = setEnvVar(env, "SK_APPS", filepath.Join(home, "apps"))
	}
	for _, k := range []string{"HOME", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"} {
		env = setEnvVar(env, k, home)
	}
	// No session variable reaches the verifier (no X server, no bus the
	// agent's clients share); $SK_GUESTD names the library's binary.
	env = verifierEnv(append(env, a.Env...))
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: home}
	s.cfg.Scorer.credential(cmd)
	res, err := s.run(ctx, cmd, stdin, timeout, nil, s.procs.start, func(pid int) {
		signalGroup(pid, syscall.SIGKILL)
		if s.cfg.Scorer.distinct() {
			killUID(s.cfg.Scorer.UID)
		}
	})
	if err != nil {
		return nil, err
	}
	out.ExecResult = *res
	return out, nil
}

// exempt is the set of processes the freeze leaves running.
func (s *Server) exempt() map[int]bool {
	ex := map[int]bool{os.Getpid(): true}
	if s.cfg.Exempt != nil {
		for _, p := range s.cfg.Exempt() {
			ex[p] = true
		}
	}
	return ex
}

func setEnvVar(env []string, key, val string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, key+"="+val)
}

// procStat is what the freeze reads of one process.
type procStat struct {
	pid, ppid int
	state     byte
	start     uint64
	cpu       uint64 // utime+stime, in clock ticks
}

// readStat parses /proc/<pid>/stat.
func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	i := bytes.LastIndexByte(b, ')') // comm may hold spaces and parens
	if i < 0 || i+2 >= len(b) {
		return procStat{}, false
	}
	f := bytes.Fields(b[i+2:])
	// f[0] is field 3 (state); ppid is field 4, starttime field 22.
	if len(f) < 20 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(string(f[1]))
	start, _ := strconv.ParseUint(string(f[19]), 10, 64)
	utime, _ := strconv.ParseUint(string(f[11]), 10, 64)
	stime, _ := strconv.ParseUint(string(f[12]), 10, 64)
	return procStat{pid: pid, ppid: ppid, state: f[0][0], start: start, cpu: utime + stime}, true
}

// listProcs reads every process /proc shows.
func listProcs() []procStat {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make([]procStat, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if st, ok := readStat(pid); ok {
			out = append(out, st)
		}
	}
	return out
}

// freeze stops (SIGSTOP) every process that could be the agent's and waits
// until none can run user code. As its pid namespace's PID 1 guestd stops
// every process but the exempt ones; elsewhere only its own descendants. A
// stop that is pending blocks fork, so passes repeat until one finds nothing
// new. It returns how many processes it stopped.
func freeze(ctx context.Context, exempt map[int]bool) (int, error) {
	self := os.Getpid()
	whole := self == 1
	type key struct {
		pid   int
		start uint64
	}
	stopped := map[key]bool{}
	var pending []procStat
	for {
		procs := listProcs()
		var parent map[int]int
		if !whole {
			parent = make(map[int]int, len(procs))
			for _, p := range procs {
				parent[p.pid] = p.ppid
			}
		}
		fresh := 0
		for _, p := range procs {
			if exempt[p.pid] || p.state == 'Z' || p.state == 'X' || stopped[key{p.pid, p.start}] {
				continue
			}
			if !whole && !descends(p.pid, self, parent) {
				continue
			}
			if unix.Kill(p.pid, unix.SIGSTOP) == nil {
				stopped[key{p.pid, p.start}] = true
				pending = append(pending, p)
				fresh++
			}
		}
		if fresh == 0 {
			break
		}
		if ctx.Err() != nil {
			return len(stopped), aci.Errorf(aci.CodeTimeout, "score: freeze: processes kept appearing for %v", freezeTimeout)
		}
	}
	// Wait until every stopped process is off the CPU: stopped, or in the
	// kernel with the stop pending (it stops before user code runs again).
	for _, p := range pending {
		for {
			st, ok := readStat(p.pid)
			if !ok || st.start != p.start || bytes.IndexByte([]byte("TtDZX"), st.state) >= 0 {
				break
			}
			if ctx.Err() != nil {
				return len(stopped), aci.Errorf(aci.CodeTimeout, "score: freeze: pid %d did not stop", p.pid)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return len(stopped), nil
}

// ownProcs lists the processes that may belong to the episode, guestd
// excluded: as PID 1 every process of the namespace, elsewhere guestd's own
// descendants. Zombies are left out.
func ownProcs() []procStat {
	self := os.Getpid()
	procs := listProcs()
	var parent map[int]int
	if self != 1 {
		parent = make(map[int]int, len(procs))
		for _, p := range procs {
			parent[p.pid] = p.ppid
		}
	}
	out := procs[:0]
	for _, p := range procs {
		if p.pid == self || p.state == 'Z' || p.state == 'X' || (self != 1 && !descends(p.pid, self, parent)) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// ownPids is the pids of ownProcs; as PID 1 just the names in /proc (no
// process's stat read, so zombies too: a zombie's thread reads as idle).
func ownPids() []int {
	if os.Getpid() != 1 {
		procs := ownProcs()
		pids := make([]int, len(procs))
		for i, p := range procs {
			pids[i] = p.pid
		}
		return pids
	}
	f, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid > 1 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// descends reports whether pid has anc among its ancestors.
func descends(pid, anc int, parent map[int]int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		pid = parent[pid]
		if pid == anc {
			return true
		}
	}
	return false
}

// killUID SIGKILLs every process of uid (the scoring identity's leftovers).
func killUID(uid int) {
	for _, p := range listProcs() {
		var st unix.Stat_t
		if unix.Stat("/proc/"+strconv.Itoa(p.pid), &st) == nil && int(st.Uid) == uid {
			unix.Kill(p.pid, unix.SIGKILL)
		}
	}
}
