package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/internal/procstat"
	"golang.org/x/sys/unix"
)

// policyOf is the scheduling policy of a task (/proc/<pid>/stat field 41).
func policyOf(t *testing.T, stat string) int {
	t.Helper()
	st, err := procstat.ReadFile(stat)
	if err != nil {
		t.Fatal(err)
	}
	return st.Policy
}

// TestIdleLauncher: an agent process started with AgentIdle runs
// SCHED_IDLE, and so do the processes it forks (a fork bomb cannot shed
// it); it is not killed when the start returns (its Pdeathsig follows the
// launcher's thread, which lives until close); guestd's other threads stay
// normal; after close, a start is refused.
func TestIdleLauncher(t *testing.T) {
	l, err := newIdleLauncher()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "sleep 30 & echo $! > \"$0\"; wait", filepath.Join(t.TempDir(), "child"))
	pid, wait, err := l.wrap(startChild)(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if p := policyOf(t, "/proc/"+strconv.Itoa(pid)+"/stat"); p != unix.SCHED_IDLE {
		t.Errorf("agent process policy %d; want SCHED_IDLE (%d)", p, unix.SCHED_IDLE)
	}
	var child []byte
	for deadline := time.Now().Add(10 * time.Second); len(child) == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		child, _ = os.ReadFile(cmd.Args[3])
	}
	if p := policyOf(t, "/proc/"+strings.TrimSpace(string(child))+"/stat"); p != unix.SCHED_IDLE {
		t.Errorf("the agent's own child: policy %d; want SCHED_IDLE", p)
	}
	select {
	case ws := <-wait:
		t.Fatalf("the agent process ended right after its start: %v", ws)
	case <-time.After(200 * time.Millisecond):
	}
	// No thread but the launcher's runs idle (the main thread, which Go
	// parks rather than ends when a locked goroutine exits, may be a
	// launcher's from an earlier run).
	main := "/proc/self/task/" + strconv.Itoa(os.Getpid()) + "/stat"
	idle := 0
	tasks, _ := filepath.Glob("/proc/self/task/*/stat")
	for _, st := range tasks {
		if b, err := os.ReadFile(st); err == nil && len(b) > 0 && st != main && policyOf(t, st) != unix.SCHED_NORMAL {
			idle++
		}
	}
	if idle > 1 {
		t.Errorf("%d of guestd's threads run idle; want the launcher's alone", idle)
	}
	l.close()
	syscall.Kill(-pid, syscall.SIGKILL)
	<-wait
	if _, _, err := l.wrap(startChild)(exec.Command("true")); err == nil {
		t.Error("a start after close was accepted")
	}
}
