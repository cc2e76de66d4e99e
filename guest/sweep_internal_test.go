package guest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"golang.org/x/sys/unix"
)

// TestSweepFailsClosed: where no pidfd can be opened (an old kernel, a
// seccomp filter), the reset's sweep still kills by pid and returns only
// once the process is gone; where the kill itself is refused, the sweep
// fails at its deadline instead of leaving the process to the next
// episode.
func TestSweepFailsClosed(t *testing.T) {
	if os.Getpid() == 1 {
		t.Skip("as PID 1 the sweep would take the whole namespace")
	}
	open, kill := pidfdOpen, killPid
	t.Cleanup(func() { pidfdOpen, killPid = open, kill })
	pidfdOpen = func(int, int) (int, error) { return -1, unix.ENOSYS }
	noThaw := func() error { return nil }
	start := func() (*exec.Cmd, map[int]bool, <-chan struct{}) {
		keep := map[int]bool{} // whatever else this process has running is not the test's
		for _, p := range ownProcs() {
			keep[p.pid] = true
		}
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }() // reaped: not left a zombie
		return cmd, keep, done
	}

	cmd, keep, done := start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := sweep(ctx, keep, noThaw)
	if err != nil || n < 1 {
		t.Fatalf("sweep without pidfds: %d kills, %v; want the sleeper killed", n, err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("sweep returned while pid %d lives", cmd.Process.Pid)
	}

	killPid = func(int, unix.Signal) error { return unix.EPERM }
	cmd, keep, done = start()
	defer func() { cmd.Process.Kill(); <-done }()
	short, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if _, err := sweep(short, keep, noThaw); aci.CodeOf(err) != aci.CodeTimeout {
		t.Fatalf("sweep with the kill refused: %v; want a timeout", err)
	}
	select {
	case <-done:
		t.Fatal("the sleeper died though every kill was refused")
	default:
	}
}
