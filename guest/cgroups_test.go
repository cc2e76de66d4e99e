package guest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAgentCgroupsMoveOneThread: on cgroup v1, starting an agent process
// puts only the forking thread in the agent's cgroup, so guestd's other
// threads (and any the runtime makes meanwhile) are never counted against
// the agent's pids limit, while the child is born inside it. With the
// whole process moved, a fork bomb filling the agent's leaf made guestd's
// next thread creation fail and the runtime abort.
func TestAgentCgroupsMoveOneThread(t *testing.T) {
	const v1 = "/sys/fs/cgroup/pids"
	if os.Geteuid() != 0 {
		t.Skip("needs root to make cgroups")
	}
	if _, err := os.Stat(filepath.Join(v1, "tasks")); err != nil {
		t.Skip("no cgroup v1 pids hierarchy")
	}
	base := filepath.Join(v1, fmt.Sprintf("shinken-test-%d", os.Getpid()))
	for _, d := range []string{base, base + "/guest", base + "/agent"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self := []byte(strconv.Itoa(os.Getpid()))
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(v1, "cgroup.procs"), self, 0)
		for _, d := range []string{base + "/agent", base + "/guest", base} {
			os.Remove(d)
		}
	})
	if err := os.WriteFile(base+"/guest/cgroup.procs", self, 0); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.Symlink(base, filepath.Join(root, "pids")); err != nil {
		t.Fatal(err)
	}
	a, err := OpenAgentCgroups(root)
	if err != nil || a == nil || !a.threads {
		t.Fatalf("OpenAgentCgroups = %+v, %v; want the v1 hierarchy, moving threads", a, err)
	}
	var inside []string // threads of this process in the agent's cgroup, seen from start
	var child int
	cmd := exec.Command("sleep", "60")
	pid, wait, err := a.Start(cmd, func(c *exec.Cmd) (int, <-chan unix.WaitStatus, error) {
		me := unix.Gettid()
		tasks, _ := os.ReadDir("/proc/self/task")
		for _, e := range tasks {
			b, _ := os.ReadFile("/proc/self/task/" + e.Name() + "/cgroup")
			if strings.Contains(string(b), "/agent") && e.Name() != strconv.Itoa(me) {
				inside = append(inside, e.Name())
			}
		}
		return startChild(c)
	})
	if err != nil {
		t.Fatal(err)
	}
	child = pid
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", child))
	unix.Kill(child, unix.SIGKILL)
	<-wait
	if len(inside) > 0 {
		t.Errorf("threads %v of guestd were in the agent's cgroup while it forked; want only the forking thread", inside)
	}
	if !strings.Contains(string(b), filepath.Base(base)+"/agent") {
		t.Errorf("the child's cgroups %q; want it born in the agent's", b)
	}
	if got, _ := os.ReadFile("/proc/self/cgroup"); strings.Contains(string(got), "/agent") {
		t.Errorf("after Start this process is in %q; want the guest's cgroup", got)
	}
}
