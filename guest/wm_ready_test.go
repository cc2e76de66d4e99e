package guest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/guest"
)

// TestWMReadyMeansServing: a window manager counts as ready only once its
// event loop answers, not when it has claimed the root. openbox claims the
// root first and loads its configuration, theme and fonts after; an app
// mapped in between is managed late (xterm waits out Xt's 5 s wmTimeout).
// Here openbox is stopped once it holds the root: a stopped WM answers
// nothing, so the wait must not end until it runs again.
func TestWMReadyMeansServing(t *testing.T) {
	needXvfb(t)
	if _, err := exec.LookPath("openbox"); err != nil {
		t.Skip("openbox not on PATH")
	}
	sess, err := guest.StartSession(ctxT(t), guest.SessionConfig{Screen: sizeSpec(320, 240), WM: "none"})
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	wm := exec.Command("openbox", "--sm-disable")
	wm.Env = append(os.Environ(), "DISPLAY="+sess.Display(), "HOME="+t.TempDir())
	if err := wm.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wm.Process.Kill(); wm.Wait() })

	c, err := xgb.NewConnDisplay(sess.Display())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := xproto.Setup(c).DefaultScreen(c).Root
	check, err := xproto.InternAtom(c, false, uint16(len("_NET_SUPPORTING_WM_CHECK")), "_NET_SUPPORTING_WM_CHECK").Reply()
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		r, err := xproto.GetProperty(c, false, root, check.Atom, xproto.AtomWindow, 0, 1).Reply()
		if err == nil && r.ValueLen == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("openbox never claimed the root")
		}
	}
	if err := wm.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err = guest.AwaitWM(stopped, sess.Display())
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitWM with the WM stopped after claiming the root = %v; want it to wait out its deadline", err)
	}
	if err := wm.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := guest.AwaitWM(ctxT(t), sess.Display()); err != nil {
		t.Fatalf("AwaitWM once the WM runs again: %v", err)
	}
}
