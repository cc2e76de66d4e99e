package guest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/internal/procstat"
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
			keep[p.PID] = true
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

// TestSignalPassSparesReusedPid: a process listed by a pass may end before
// it is signalled and its pid go to another process. The pass then signals
// nothing, whether it reaches the pid through a pidfd or, without pidfds,
// by pid: the pid's start time is no longer the one listed.
func TestSignalPassSparesReusedPid(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	defer func() { cmd.Process.Kill(); <-done }()
	now, err := procstat.Read(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// What a pass listed before the pid was reused: the same pid, an
	// earlier process.
	stale := now
	stale.Start--

	open := pidfdOpen
	t.Cleanup(func() { pidfdOpen = open })
	for _, noPidfd := range []bool{false, true} {
		if noPidfd {
			pidfdOpen = func(int, int) (int, error) { return -1, unix.ENOSYS }
		}
		sent, refused := signalPass([]procstat.Stat{stale}, unix.SIGKILL, nil)
		if len(sent) != 0 || refused != 0 {
			t.Fatalf("without pidfds %v: a pass over a reused pid signalled %d, %d refused; want none", noPidfd, len(sent), refused)
		}
		select {
		case <-done:
			t.Fatalf("without pidfds %v: the pid's new process was killed", noPidfd)
		case <-time.After(50 * time.Millisecond):
		}
	}
	pidfdOpen = open
	sent, _ := signalPass([]procstat.Stat{now}, unix.SIGKILL, nil)
	if len(sent) != 1 || sent[0].fd < 0 {
		t.Fatalf("a pass over the process listed signalled %+v; want it, through a pidfd", sent)
	}
	unix.Close(sent[0].fd)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the process listed was not killed")
	}
}

// TestFreezeStops: the scoring freeze stops a process of guestd's, and
// counts it, leaving the exempt ones running.
func TestFreezeStops(t *testing.T) {
	if os.Getpid() == 1 {
		t.Skip("as PID 1 the freeze would take the whole namespace")
	}
	exempt := map[int]bool{}
	for _, p := range ownProcs() {
		exempt[p.PID] = true
	}
	run := func() (*exec.Cmd, <-chan struct{}) {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		return cmd, done
	}
	stopped, _ := run()
	spared, _ := run()
	exempt[spared.Process.Pid] = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := freeze(ctx, exempt)
	if err != nil || n != 1 {
		t.Fatalf("freeze: %d stopped, %v; want 1", n, err)
	}
	if st, err := procstat.Read(stopped.Process.Pid); err != nil || st.State != 'T' {
		t.Fatalf("frozen process: %+v, %v; want state T", st, err)
	}
	if st, err := procstat.Read(spared.Process.Pid); err != nil || st.State == 'T' {
		t.Fatalf("exempt process: %+v, %v; want it running", st, err)
	}
}
