package guest_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/procstat"
	"golang.org/x/sys/unix"
)

// TestResetPhases: quiesce ends the processes guestd started (an app's
// child that left its process group and session) and nothing it keeps (the X server), gives up the
// clipboard and maps back keycodes that typing borrowed; settle answers
// at once on a still screen; bad phases are bad requests.
func TestResetPhases(t *testing.T) {
	needXvfb(t)
	// guestd sweeps its pid namespace as PID 1; elsewhere its descendants,
	// which orphans stay as only under a subreaper.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("subreaper: %v", err)
	}
	var orphans []int // reparented to this process: reaped at the end
	t.Cleanup(func() {
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
		for _, pid := range orphans {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, unix.WNOHANG, nil)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := guest.StartSession(ctx, guest.SessionConfig{Screen: sizeSpec(320, 240), WM: "none"})
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	dir := t.TempDir()
	srv, err := guest.NewServer(guest.Config{Display: sess.Display(), StateDir: filepath.Join(dir, "state"), Env: append(os.Environ(), "HOME="+dir),
		Exempt: func() []int { return []int{sess.XPid()} }, Restart: sess.Restart})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "guest.sock")
	ln, err := guest.Listen("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() { srv.Close(); <-served })
	d := dialDesk(t, sess, srv, sock)

	pidFile := filepath.Join(dir, "child.pid")
	res := act(t, d, aci.Action{Verb: aci.LaunchApp, App: "sh", Args: []string{"-c", "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo $! > " + pidFile}})
	act(t, d, aci.Action{Verb: aci.ClipboardSet, Text: "episode"})
	act(t, d, aci.Action{Verb: aci.TypeText, Text: "€"}) // borrows a spare keycode
	var child int
	for deadline := time.Now().Add(10 * time.Second); child == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		child, _ = atoiTrim(b)
	}
	if child == 0 {
		t.Fatal("the app never started its child")
	}
	orphans = append(orphans, child)
	q, err := d.cl.Reset(ctxT(t), wire.ResetArgs{Phase: wire.ResetQuiesce})
	if err != nil {
		t.Fatalf("quiesce: %v", err)
	}
	if q.Killed < 1 {
		t.Errorf("quiesce killed %d processes; want at least the app's child (in a session of its own)", q.Killed)
	}
	for _, pid := range []int{res.PID, child} {
		if syscall.Kill(pid, 0) == nil && !zombie(pid) {
			t.Errorf("process %d of the episode survived quiesce", pid)
		}
	}
	if syscall.Kill(sess.XPid(), 0) != nil {
		t.Fatal("quiesce killed the X server")
	}
	if got := act(t, d, aci.Action{Verb: aci.ClipboardGet}).Clipboard; got != "" {
		t.Errorf("clipboard after quiesce = %q; want empty", got)
	}
	// Typing works again (the borrowed keycode was mapped back and is
	// borrowed anew).
	act(t, d, aci.Action{Verb: aci.TypeText, Text: "€a"})

	s, err := d.cl.Reset(ctxT(t), wire.ResetArgs{Phase: wire.ResetSettle, Settle: &aci.Settle{QuietMS: 100, MaxMS: 5000}})
	if err != nil || s.Settle == nil {
		t.Fatalf("settle: %+v, %v", s, err)
	}
	if r, err := d.cl.Reset(ctxT(t), wire.ResetArgs{Phase: wire.ResetRelaunch}); err != nil || r.Apps != 1 {
		t.Errorf("relaunch = %+v, %v; want the recorded app started again", r, err)
	}
	for _, a := range []wire.ResetArgs{{Phase: "reboot"}, {Phase: wire.ResetSettle}, {Phase: wire.ResetSettle, Settle: &aci.Settle{MaxMS: -1}}} {
		if _, err := d.cl.Reset(ctxT(t), a); aci.CodeOf(err) != aci.CodeBadRequest {
			t.Errorf("reset %+v = %v; want bad_request", a, err)
		}
	}
}

func atoiTrim(b []byte) (int, error) {
	n := 0
	for _, c := range b {
		if c >= '0' && c <= '9' {
			n = n*10 + int(c-'0')
		}
	}
	return n, nil
}

// zombie reports a process that ended but was not reaped yet.
func zombie(pid int) bool {
	st, err := procstat.Read(pid)
	return err != nil || st.State == 'Z'
}
