package main_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/internal/procstat"
	"github.com/shinken-rl/shinken/pool/pooltest"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

// binaries builds envserver and guestd into a temp dir once per test.
func binaries(t *testing.T) (envserver, guestd string) {
	t.Helper()
	for _, bin := range []string{"Xvfb", "openbox"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (make deps installs it)", bin)
		}
	}
	dir := t.TempDir()
	guestd, err := pooltest.BuildGuestd(dir)
	if err != nil {
		t.Fatal(err)
	}
	envserver = filepath.Join(dir, "envserver")
	if out, err := exec.Command("go", "build", "-o", envserver, ".").CombinedOutput(); err != nil {
		t.Fatalf("build envserver: %v: %s", err, out)
	}
	return envserver, guestd
}

// proc is a running envserver binary.
type proc struct {
	cmd     *exec.Cmd
	url     string
	log     *syncBuf
	exited  chan struct{} // closed once the process has exited (waitErr set)
	waitErr error
}

// wait waits up to d for the process to exit and returns its Wait error;
// ok is false when it is still running.
func (p *proc) wait(d time.Duration) (err error, ok bool) {
	select {
	case <-p.exited:
		return p.waitErr, true
	case <-time.After(d):
		return nil, false
	}
}

// syncBuf is a buffer the server's output is copied into while tests read it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func startServer(t *testing.T, bin, guestd, state string) *proc {
	t.Helper()
	return startServerPool(t, bin, guestd, state, 2)
}

func startServerPool(t *testing.T, bin, guestd, state string, pool int, args ...string) *proc {
	t.Helper()
	addr := filepath.Join(t.TempDir(), "addr")
	log := &syncBuf{}
	cmd := exec.Command(bin, append([]string{"--listen", "127.0.0.1:0", "--pool", strconv.Itoa(pool), "--state", state, "--guestd", guestd, "--addr-file", addr}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, log: log, exited: make(chan struct{})}
	go func() { p.waitErr = cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		// Stopped as an operator would (SIGTERM: its sandboxes, their
		// cgroups and state mounts go with it); killed only when that
		// hangs. A crashed server's leftovers are the next start's sweep.
		cmd.Process.Signal(syscall.SIGTERM)
		if _, ok := p.wait(2 * time.Minute); !ok {
			t.Errorf("envserver still running 2 minutes after SIGTERM")
			cmd.Process.Kill()
			p.wait(time.Minute)
		}
		if t.Failed() {
			t.Logf("envserver log:\n%s", log.String())
		}
	})
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, err := os.ReadFile(addr); err == nil && len(b) > 0 {
			p.url = strings.TrimSpace(string(b))
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("envserver did not serve within 2 minutes:\n%s", log.String())
		}
		time.Sleep(20 * time.Millisecond) // polls the addr file it writes once serving
	}
}

func call(t *testing.T, url, path string, req, resp any) {
	t.Helper()
	body, _ := msgpack.Marshal(req)
	r, err := http.Post(url+path, "application/msgpack", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 {
		t.Fatalf("%s: status %d: %q", path, r.StatusCode, b)
	}
	if err := msgpack.Unmarshal(b, resp); err != nil {
		t.Fatal(err)
	}
}

// descendants lists pid -> start time of every descendant of root.
func descendants(root int) map[int]string {
	kids := map[int][]int{}
	start := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procstat.Read(pid)
		if err != nil {
			continue
		}
		kids[st.PPID] = append(kids[st.PPID], pid)
		start[pid] = strconv.FormatUint(st.Start, 10)
	}
	out := map[int]string{}
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, k := range kids[p] {
			out[k] = start[k]
			queue = append(queue, k)
		}
	}
	return out
}

// alive reports whether pid still runs as the process that started at st.
func alive(pid int, st string) bool {
	s, err := procstat.Read(pid)
	return err == nil && strconv.FormatUint(s.Start, 10) == st && s.State != 'Z'
}

// TestKillNineMidBatch kills the real envserver binary with SIGKILL while a
// step batch is in flight, restarts it on the same state directory, and
// checks that nothing was lost or left behind: every episode is readable
// and typed sandbox_died/server_restart with the steps it had, no file is
// corrupt or quarantined, and no sandbox process of the killed server
// survives it.
func TestKillNineMidBatch(t *testing.T) {
	bin, guestd := binaries(t)
	state := t.TempDir()
	s1 := startServer(t, bin, guestd, state)
	var r api.BatchReply
	call(t, s1.url, "/v1/reset", api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}, {Task: "xterm-count-lines"}}}, &r)
	var envs, eps []string
	for _, res := range r.Results {
		if res.Error != nil {
			t.Fatalf("reset: %v", res.Error)
		}
		envs = append(envs, res.EnvID)
		eps = append(eps, res.EpisodeID)
	}
	const steps = 2
	for range steps {
		var sr api.BatchReply
		req := api.StepRequest{}
		for _, e := range envs {
			req.Steps = append(req.Steps, api.StepEnv{EnvID: e, Action: &aci.Action{Verb: aci.Move, Target: aci.Px(5, 5)}})
		}
		call(t, s1.url, "/v1/step", req, &sr)
		for _, res := range sr.Results {
			if res.Error != nil || (res.Info != nil && res.Info.SaveError != nil) {
				t.Fatalf("step: %+v", res)
			}
		}
	}
	// Trainer file writes run on a guestd thread that takes the agent's
	// filesystem identity for the write, and the kernel clears a thread's
	// parent-death signal when its fsuid changes: had one landed on
	// guestd's main thread, the sandbox would outlive its killed server.
	// Whether a write lands there is the scheduler's choice, so this
	// cannot fail every time it should; many writes make it likely.
	data := []byte("x")
	sum := sha256.Sum256(data)
	for i := range 40 {
		for _, e := range envs {
			var fr api.FileReply
			call(t, s1.url, "/v1/files/put", api.FilePutRequest{EnvID: e, Path: fmt.Sprintf("~/f%d", i), Data: data, SHA256: hex.EncodeToString(sum[:])}, &fr)
		}
	}
	procs := descendants(s1.cmd.Process.Pid)
	if len(procs) == 0 {
		t.Fatal("the server has no sandbox processes")
	}
	// A batch in flight: both envs wait 5 s; the request is written whole
	// on a raw connection, then the server dies.
	req := api.StepRequest{}
	for _, e := range envs {
		req.Steps = append(req.Steps, api.StepEnv{EnvID: e, Action: &aci.Action{Verb: aci.Wait, MS: 5000}})
	}
	body, _ := msgpack.Marshal(req)
	conn, err := net.Dial("tcp", strings.TrimPrefix(s1.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/step HTTP/1.1\r\nHost: x\r\nContent-Type: application/msgpack\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err := conn.Write(body); err != nil {
		t.Fatal(err)
	}
	if err := s1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s1.wait(time.Minute)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the in-flight request's connection stayed open 30 s after the kill")
		}
	}
	// Every sandbox process dies with its server.
	deadline := time.Now().Add(30 * time.Second)
	for pid, st := range procs {
		for alive(pid, st) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d of the killed server still runs 30 s later", pid)
			}
			time.Sleep(20 * time.Millisecond) // polls /proc for the process's end
		}
	}

	s2 := startServer(t, bin, guestd, state)
	for _, id := range eps {
		var tr trajectory.Trajectory
		resp, err := http.Get(s2.url + "/v1/episodes/" + id)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("episode %s after restart: status %d %q", id, resp.StatusCode, b)
		}
		if err := msgpack.Unmarshal(b, &tr); err != nil {
			t.Fatalf("episode %s: %v", id, err)
		}
		if tr.ExitReason != trajectory.SandboxDied || tr.ExitDetail != trajectory.ExitDetailServerRestart || tr.EndedAt == nil {
			t.Errorf("episode %s: exit %q detail %q ended %v; want sandbox_died, server_restart, ended", id, tr.ExitReason, tr.ExitDetail, tr.EndedAt)
		}
		if len(tr.Steps) < steps {
			t.Errorf("episode %s: %d steps; want at least the %d replied before the kill", id, len(tr.Steps), steps)
		}
	}
	if q, _ := filepath.Glob(filepath.Join(state, "episodes", "quarantine", "*")); len(q) != 0 {
		t.Errorf("files quarantined after a kill -9: %v; want none corrupt", q)
	}
	if j, _ := filepath.Glob(filepath.Join(state, "episodes", "episodes", "*.journal")); len(j) != 0 {
		t.Errorf("journals left open after the restart: %v", j)
	}
	if runs, _ := filepath.Glob(filepath.Join(state, "sandboxes", "runs", "*.lock")); len(runs) != 1 {
		t.Errorf("provider runs after the restart: %v; want only the new server's (the killed one's swept)", runs)
	}
	if !strings.Contains(s2.log.String(), "server_restart") {
		t.Errorf("the restart did not log the episodes it closed")
	}
	// Graceful stop of the second server.
	s2.cmd.Process.Signal(syscall.SIGTERM)
	if err, ok := s2.wait(90 * time.Second); !ok {
		t.Fatalf("envserver still running 90 s after SIGTERM")
	} else if err != nil {
		t.Errorf("envserver after SIGTERM: %v", err)
	}
}
