package guest

import (
	"os/exec"
	"testing"
	"time"
)

// TestQuiesceJudgesWaits runs real processes in the waits a desktop's
// threads sit in and checks how the reads judge them: an untimed read and a
// wait longer than the horizon are idle; a timer within the horizon, and a
// spinner, are not. The test process is not PID 1, so the set is its own
// descendants.
func TestQuiesceJudgesWaits(t *testing.T) {
	q := newQuiescence()
	if q == nil {
		t.Skip("quiescence reads 64-bit timespecs only")
	}
	defer q.close()
	start := func(argv ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(argv[0], argv[1:]...)
		if _, err := cmd.StdinPipe(); err != nil { // an open pipe: `cat` blocks in read
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Skipf("%s: %v", argv[0], err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	// quietIn reports whether any of n reads in a row found the set quiet;
	// the children's own start-up runs between them.
	quietIn := func(horizon time.Duration, n int) bool {
		var prev quietSnap
		for range n {
			if prev = q.read(prev, horizon); prev.quiet() {
				return true
			}
			time.Sleep(2 * time.Millisecond)
		}
		return false
	}
	quietWithin := func(horizon time.Duration) bool { return quietIn(horizon, 1500) }
	neverQuiet := func(horizon time.Duration, n int) bool { return !quietIn(horizon, n) }

	start("cat")
	start("sleep", "30")
	if !quietWithin(time.Second) {
		t.Fatal("cat blocked in read and sleep 30 with a 1 s horizon: never quiet; want quiet")
	}
	sleeper := start("sleep", "8")
	if !quietWithin(time.Second) {
		t.Fatal("sleep 8 with a 1 s horizon: never quiet; want quiet")
	}
	if !neverQuiet(10*time.Second, 30) {
		t.Error("sleep 8 with a 10 s horizon: quiet; want its timer counted as pending work")
	}
	sleeper.Process.Kill()
	sleeper.Wait()
	// Debian's python3 itself: a version manager's shim would sit in other
	// waits first.
	if _, err := exec.LookPath("/usr/bin/python3"); err == nil {
		poller := start("/usr/bin/python3", "-c", "import select\nwhile True: select.poll().poll(8000)")
		if !quietWithin(time.Second) {
			t.Fatal("poll(8000) with a 1 s horizon: never quiet; want quiet")
		}
		if !neverQuiet(10*time.Second, 30) {
			t.Error("poll(8000) with a 10 s horizon: quiet; want its timeout counted as pending work")
		}
		poller.Process.Kill()
		poller.Wait()
	}
	spinner := start("sh", "-c", "while :; do :; done")
	if !neverQuiet(time.Second, 30) {
		t.Error("a spinner: quiet; want busy")
	}
	spinner.Process.Kill()
	spinner.Wait()
	if !quietWithin(time.Second) {
		t.Error("after the spinner ended: never quiet; want quiet")
	}
}
