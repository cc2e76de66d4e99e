package main_test

import (
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

// TestSoak runs the real envserver under a trainer-like load for
// $SHINKEN_SOAK (a duration, e.g. 30m; unset: skipped): SHINKEN_SOAK_ENVS
// envs (default 16) driven by a random policy with resets and forks, one
// sandbox killed from outside every SHINKEN_SOAK_KILL_EVERY (default 1m).
// At the end the server is stopped with SIGTERM and restarted, and it
// reports lost episodes (started but not readable, or never ended), leaked
// processes, mounts and display sockets, and the server's RSS at start and
// end. It fails on any loss or leak.
//
//	SHINKEN_SOAK=30m go test -run TestSoak -timeout 40m -v ./cmd/envserver
func TestSoak(t *testing.T) {
	dur, err := time.ParseDuration(os.Getenv("SHINKEN_SOAK"))
	if err != nil {
		t.Skip("set SHINKEN_SOAK=30m to run the soak")
	}
	nenvs := envInt("SHINKEN_SOAK_ENVS", 16)
	killEvery, err := time.ParseDuration(os.Getenv("SHINKEN_SOAK_KILL_EVERY"))
	if err != nil {
		killEvery = time.Minute
	}
	bin, guestd := binaries(t)
	state := t.TempDir()
	mountsBefore := countMounts(state)
	// Retention must keep every episode the soak starts, or the oldest
	// would read as lost: a 30-minute soak starts ~15k.
	cfg := filepath.Join(t.TempDir(), "soak.json")
	if err := os.WriteFile(cfg, []byte(`{"max_episodes": 1000000}`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", cfg}
	// SHINKEN_SOAK_PROFILE=<dir>: the server's heap profile is saved there
	// a tenth in and at the end, for `go tool pprof -diff_base`.
	profDir, pprofAddr := os.Getenv("SHINKEN_SOAK_PROFILE"), ""
	if profDir != "" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pprofAddr = l.Addr().String()
		l.Close()
		args = append(args, "--pprof", pprofAddr)
	}
	heap := func(name string) {
		if profDir == "" {
			return
		}
		resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/heap?gc=1")
		if err != nil {
			t.Logf("heap profile: %v", err)
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := os.WriteFile(filepath.Join(profDir, name), b, 0o644); err != nil {
			t.Logf("heap profile: %v", err)
		}
	}
	s := startServerPool(t, bin, guestd, state, nenvs, args...)
	// RSS "at start" is taken once the load has warmed up (a tenth in).
	var rssStart int
	warm := time.AfterFunc(dur/10, func() { rssStart = rss(s.cmd.Process.Pid); heap("heap-start.pb.gz") })
	defer warm.Stop()

	var (
		mu       sync.Mutex
		episodes = map[string]bool{} // episode id -> seen
		counts   = map[string]int{}
	)
	note := func(what string, ids ...string) {
		mu.Lock()
		defer mu.Unlock()
		counts[what]++
		for _, id := range ids {
			if id != "" {
				episodes[id] = true
			}
		}
	}
	tasks := []string{"xterm-hello-file", "xterm-count-lines", "xterm-sort-names", "xterm-rename-file"}
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	for w := range nenvs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			env, ended := "", false
			for time.Now().Before(stop) {
				// An ended episode's env is reset in place, as a trainer
				// does; now and then a live one is reset mid-episode.
				if env == "" || ended || rng.Intn(20) == 0 {
					ended = false
					var r api.BatchReply
					if err := post(s.url, "/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{EnvID: env, Task: tasks[rng.Intn(len(tasks))]}}}, &r); err != nil {
						note("reset_http_error")
						continue
					}
					res := r.Results[0]
					note("reset", res.EpisodeID)
					if res.Error != nil {
						note("reset_error:" + string(res.Error.Code))
						env = ""
						continue
					}
					env = res.EnvID
				}
				if rng.Intn(25) == 0 {
					var fr api.BatchReply
					if err := post(s.url, "/v1/fork", api.ForkRequest{EnvID: env, N: 1}, &fr); err == nil {
						for _, res := range fr.Results {
							note("fork", res.EpisodeID)
							post(s.url, "/v1/close", api.CloseRequest{EnvIDs: []string{res.EnvID}}, &api.CloseReply{})
						}
					} else {
						note("fork_error")
					}
				}
				var sr api.BatchReply
				if err := post(s.url, "/v1/step", api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: randomAction(rng)}}}, &sr); err != nil {
					note("step_http_error")
					continue
				}
				res := sr.Results[0]
				note("step")
				switch {
				case res.Error != nil:
					note("step_error:" + string(res.Error.Code))
					env = ""
				case res.Info != nil && res.Info.SaveError != nil:
					note("save_error")
				case res.Terminated || res.Truncated:
					ended = true
				}
			}
			if env != "" {
				post(s.url, "/v1/close", api.CloseRequest{EnvIDs: []string{env}}, &api.CloseReply{})
			}
		}()
	}
	// The killer: one sandbox's init, from outside, every killEvery.
	killed := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(killEvery)
		defer tick.Stop()
		for time.Now().Before(stop) {
			<-tick.C
			var inits []int
			for pid := range descendants(s.cmd.Process.Pid) {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(b)) == "guestd" {
					inits = append(inits, pid)
				}
			}
			if len(inits) > 0 {
				syscall.Kill(inits[rand.Intn(len(inits))], syscall.SIGKILL)
				killed++
			}
		}
	}()
	wg.Wait()
	<-done
	rssEnd := rss(s.cmd.Process.Pid)
	heap("heap-end.pb.gz")
	procs := descendants(s.cmd.Process.Pid)
	s.cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, s, 3*time.Minute); code != 0 {
		t.Errorf("exit code after SIGTERM: %d", code)
	}
	leakedProcs := 0
	for pid, st := range procs {
		if alive(pid, st) {
			leakedProcs++
		}
	}
	// A stopped provider leaves no run behind: its sandboxes' dirs,
	// display claims and snapshots go with it.
	leftRuns, _ := filepath.Glob(filepath.Join(state, "sandboxes", "runs", "*"))
	s2 := startServerPool(t, bin, guestd, state, 1, "--config", cfg)
	lost := 0
	reasons := map[trajectory.ExitReason]int{}
	for id := range episodes {
		resp, err := http.Get(s2.url + "/v1/episodes/" + id)
		if err != nil {
			t.Fatal(err)
		}
		var tr trajectory.Trajectory
		err = msgpack.NewDecoder(resp.Body).Decode(&tr)
		resp.Body.Close()
		if resp.StatusCode != 200 || err != nil || tr.EndedAt == nil {
			lost++
			continue
		}
		if tr.ExitReason == "" {
			reasons["(abandoned: reset or closed mid-episode)"]++
		} else {
			reasons[tr.ExitReason]++
		}
	}
	s2.cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, s2, 3*time.Minute)
	quarantined, _ := filepath.Glob(filepath.Join(state, "episodes", "quarantine", "*"))
	mountsAfter := countMounts(state)
	t.Logf("soak %v, %d envs, kill every %v: %d sandboxes killed", dur, nenvs, killEvery, killed)
	t.Logf("requests: %v", counts)
	t.Logf("episodes: %d started, %d lost, by exit reason %v, %d quarantined", len(episodes), lost, reasons, len(quarantined))
	t.Logf("leaks: %d processes, mounts %d -> %d, provider runs left %v", leakedProcs, mountsBefore, mountsAfter, leftRuns)
	t.Logf("server RSS: %d KiB a tenth in, %d KiB at the end", rssStart, rssEnd)
	if lost > 0 || leakedProcs > 0 || len(quarantined) > 0 || mountsAfter > mountsBefore || len(leftRuns) > 0 {
		t.Errorf("soak lost %d episodes, leaked %d processes and %d mounts, quarantined %d files; want none", lost, leakedProcs, mountsAfter-mountsBefore, len(quarantined))
	}
}

func randomAction(rng *rand.Rand) *aci.Action {
	switch rng.Intn(10) {
	case 0:
		return &aci.Action{Verb: aci.Done}
	case 1, 2:
		return &aci.Action{Verb: aci.TypeText, Text: "echo soak"}
	case 3:
		return &aci.Action{Verb: aci.Key, Keys: "Return"}
	case 4:
		return &aci.Action{Verb: aci.Wait, MS: 50}
	default:
		return &aci.Action{Verb: aci.Click, Target: aci.Px(float64(rng.Intn(1280)), float64(rng.Intn(800)))}
	}
}

func post(url, path string, req, resp any) error {
	body, _ := msgpack.Marshal(req)
	r, err := http.Post(url+path, "application/msgpack", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	defer r.Body.Close()
	if r.StatusCode != 200 {
		return fmt.Errorf("status %d", r.StatusCode)
	}
	return msgpack.NewDecoder(r.Body).Decode(resp)
}

func rss(pid int) int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// countMounts counts the host's mounts under dir (the host's other mounts
// come and go with whatever else runs on it).
func countMounts(dir string) int {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			n++
		}
	}
	return n
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
