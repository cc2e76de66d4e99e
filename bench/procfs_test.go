package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
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

// burnEnv makes the test binary a child that burns burnCPU of its own CPU
// time, says so on stdout, and exits when its stdin closes.
const burnEnv = "BENCH_TEST_BURN_CHILD"

const burnCPU = 300 * time.Millisecond

// maybeBurnChild runs burnChild (and exits) when the binary was started
// as one; TestMain calls it first.
func maybeBurnChild() {
	if os.Getenv(burnEnv) == "1" {
		burnChild()
	}
}

// burnChild spins until its own user+system time reaches burnCPU (measured
// by the kernel, not the wall clock), then reports and waits for stdin EOF.
func burnChild() {
	for {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			os.Exit(2)
		}
		if time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= burnCPU {
			break
		}
		for i := 0; i < 1e6; i++ {
			spin++
		}
	}
	fmt.Println("burnt")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

var spin int

// TestCPUSamplerCountsExitedChild checks that CPU burnt by a child that
// exits before Stop is still counted. The child burns a fixed amount of CPU
// (its own rusage), and it exits only after the sampler has taken a sample
// that began after the child reported.
func TestCPUSamplerCountsExitedChild(t *testing.T) {
	s := StartCPUSampler(os.Getpid(), 20*time.Millisecond)
	stopped := false
	defer func() {
		if !stopped {
			s.Stop()
		}
	}()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), burnEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "burnt\n" {
		t.Fatalf("child: got %q, %v; want \"burnt\"", line, err)
	}
	// Two more completed samples: the second began after the report.
	n := s.Samples()
	deadline := time.Now().Add(time.Minute)
	for s.Samples() < n+2 {
		if time.Now().After(deadline) {
			t.Fatalf("sampler took no sample in a minute (%d samples)", s.Samples())
		}
		time.Sleep(5 * time.Millisecond) // polls a counter; asserts nothing by itself
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	got := s.Stop()
	stopped = true
	if min := burnCPU.Seconds() - 0.02; got < min { // /proc ticks are 10 ms
		t.Errorf("CPU of a child that burnt %v: got %.3fs; want at least %.2fs", burnCPU, got, min)
	}
	if got > 30 {
		t.Errorf("CPU: got %.3fs; want well under 30s", got)
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
