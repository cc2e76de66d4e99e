package guest_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

// nopidWindowEnv, set to a title, makes the test binary an X client that
// maps one window of that title and sets no _NET_WM_PID (as mupdf does),
// prints "mapped" once the server has the window and lives until its X
// connection ends.
const nopidWindowEnv = "SHINKEN_TEST_NOPID_WINDOW"

func TestMain(m *testing.M) {
	if title := os.Getenv(nopidWindowEnv); title != "" {
		if err := nopidWindow(title); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func nopidWindow(title string) error {
	c, err := xgb.NewConn()
	if err != nil {
		return err
	}
	root := xproto.Setup(c).DefaultScreen(c).Root
	w, err := xproto.NewWindowId(c)
	if err != nil {
		return err
	}
	if err := xproto.CreateWindowChecked(c, 0, w, root, 20, 20, 200, 120, 0, xproto.WindowClassInputOutput, 0, 0, nil).Check(); err != nil {
		return err
	}
	xproto.ChangeProperty(c, xproto.PropModeReplace, w, xproto.AtomWmName, xproto.AtomString, 8, uint32(len(title)), []byte(title))
	if err := xproto.MapWindowChecked(c, w).Check(); err != nil {
		return err
	}
	fmt.Println("mapped")
	for {
		if ev, err := c.WaitForEvent(); ev == nil && err == nil {
			return nil // the connection is gone
		}
	}
}

// windowTitled is the listed window titled title.
func windowTitled(t *testing.T, d *desk, title string) wire.Window {
	t.Helper()
	ws, err := d.cl.ListWindows(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws.Windows {
		if w.Title == title {
			return w
		}
	}
	t.Fatalf("no window titled %q in %+v", title, ws.Windows)
	return wire.Window{}
}

// TestLaunchAppWindowWithoutNetWMPID: an app whose window carries no
// _NET_WM_PID (mupdf) is still tied to its process, through the X server's
// record of which client created the window, so launch_app reports the
// window as soon as it is mapped instead of waiting out its deadline. A
// window of another process is not taken for the launched app's, whether
// or not it names its pid; one of the launched process's child is.
func TestLaunchAppWindowWithoutNetWMPID(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}

	// A window of a process guestd did not launch, mapped before the launches.
	other := exec.Command(self)
	other.Env = append(os.Environ(), "DISPLAY="+d.sess.Display(), nopidWindowEnv+"=other-process")
	out, err := other.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "mapped\n" {
		t.Fatalf("helper client: %q, %v", line, err)
	}
	windowTitled(t, d, "other-process")

	// A launched process without a window of its own gets none.
	if res := act(t, d, aci.Action{Verb: aci.LaunchApp, App: "true"}); res.WindowID != 0 {
		t.Errorf("launch_app true: got window %d (another process's); want none", res.WindowID)
	}

	// The launched process's own window, without _NET_WM_PID.
	t0 := time.Now()
	res := act(t, d, aci.Action{Verb: aci.LaunchApp, App: "env", Args: []string{nopidWindowEnv + "=launched", self}})
	took := time.Since(t0)
	if res.WindowID == 0 {
		t.Fatalf("launch_app: no window of pid %d after %s", res.PID, took)
	}
	if w := windowTitled(t, d, "launched"); w.ID != res.WindowID {
		t.Errorf("launch_app got window %d; want the launched one %d", res.WindowID, w.ID)
	}
	t.Logf("launch_app: window after %s", took)

	// A launcher whose child maps the window (sh runs the client and waits).
	res = act(t, d, aci.Action{Verb: aci.LaunchApp, App: "sh", Args: []string{"-c", nopidWindowEnv + "=child " + self + "; :"}})
	if w := windowTitled(t, d, "child"); res.WindowID != w.ID {
		t.Errorf("launch_app of a launcher got window %d; want its child's %d", res.WindowID, w.ID)
	}
}
