package bench

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestSubtreeFindsChild(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := false
	for _, p := range subtree(allProcs(), os.Getpid()) {
		if p.pid == cmd.Process.Pid {
			found = true
		}
	}
	if !found {
		t.Fatalf("subtree of %d: child %d missing", os.Getpid(), cmd.Process.Pid)
	}
	m := TreeMemory(cmd.Process.Pid)
	if m.Procs != 1 || m.RSS <= 0 {
		t.Errorf("TreeMemory(sleep): got %+v; want 1 process with RSS > 0", m)
	}
}

// TestCPUSamplerCountsExitedChild checks that CPU burnt by a child that
// exits before Stop is still counted.
func TestCPUSamplerCountsExitedChild(t *testing.T) {
	s := StartCPUSampler(os.Getpid(), 20*time.Millisecond)
	cmd := exec.Command("sh", "-c", `end=$(($(date +%s)+1)); while [ $(date +%s) -lt $end ]; do :; done`)
	if err := cmd.Run(); err != nil {
		s.Stop()
		t.Fatal(err)
	}
	got := s.Stop()
	if got < 0.05 {
		t.Errorf("CPU of a busy child for up to 1s: got %.3fs; want at least 0.05s", got)
	}
	if got > 10 {
		t.Errorf("CPU over ~1s wall: got %.3fs; want well under 10s", got)
	}
}

func TestHostCPUAdvances(t *testing.T) {
	a := HostCPUSeconds()
	end := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(end) {
	}
	if b := HostCPUSeconds(); a <= 0 || b < a {
		t.Errorf("host CPU: got %v then %v; want positive and non-decreasing", a, b)
	}
}
