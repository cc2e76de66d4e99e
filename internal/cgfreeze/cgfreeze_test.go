package cgfreeze

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testCgroup makes a fresh freezer cgroup for the test (v1's freezer
// hierarchy, or a v2 cgroup) and removes it after, its processes killed.
func testCgroup(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup needs root")
	}
	parent := "/sys/fs/cgroup/freezer"
	if _, err := os.Stat(filepath.Join(parent, "freezer.state")); err != nil {
		if _, err := os.Stat(parent); err != nil {
			parent = "/sys/fs/cgroup" // v2
		}
	}
	dir := filepath.Join(parent, fmt.Sprintf("cgfreeze-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no cgroup to freeze here: %v", err)
	}
	t.Cleanup(func() {
		_ = Thaw(dir)
		for range 100 {
			b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if len(strings.TrimSpace(string(b))) == 0 {
				break
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, _ := strconv.Atoi(f); pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		_ = os.Remove(dir)
	})
	return dir
}

// TestFreezeForkLoop: processes that fork as fast as they can (the shell
// loop an agent runs) are frozen every time, and stay frozen: the counter
// they bump does not move while frozen.
func TestFreezeForkLoop(t *testing.T) {
	work := t.TempDir() // made first: removed after the loops are killed
	dir := testCgroup(t)
	// Each loop forks a short-lived child per turn and counts its turns.
	loop := `i=0; while :; do i=$((i+1)); /bin/true; echo $i > "$0/n$1"; done`
	for n := range 4 {
		cmd := exec.Command("/bin/sh", "-c", loop, work, strconv.Itoa(n))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go cmd.Wait()
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
			_ = cmd.Process.Kill()
			t.Fatal(err)
		}
	}
	read := func() string {
		var s []string
		for n := range 4 {
			b, _ := os.ReadFile(filepath.Join(work, "n"+strconv.Itoa(n)))
			s = append(s, strings.TrimSpace(string(b)))
		}
		return strings.Join(s, ",")
	}
	for round := range 30 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := Freeze(ctx, dir)
		cancel()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if ok, err := Frozen(dir); !ok || err != nil {
			t.Fatalf("round %d: frozen %v %v after Freeze", round, ok, err)
		}
		before := read()
		time.Sleep(20 * time.Millisecond)
		if after := read(); after != before {
			t.Fatalf("round %d: the loops ran while frozen: %s -> %s", round, before, after)
		}
		if err := Thaw(dir); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFreezeEmpty: an empty cgroup freezes at once, and a plain
// directory is no freezer.
func TestFreezeEmpty(t *testing.T) {
	dir := testCgroup(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// An empty cgroup freezes at once, even with ctx already ended: the
	// kernel's answer is read before the deadline is.
	if err := Freeze(ctx, dir); err != nil {
		t.Fatalf("empty cgroup: %v", err)
	}
	if err := Thaw(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := kindOf(t.TempDir()); err == nil {
		t.Fatal("a plain directory has a freezer")
	}
}
