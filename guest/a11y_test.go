package guest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest"
	"github.com/shinken-rl/shinken/guest/wire"
)

// a11yDesk is appDesk's desktop with the session's buses: apps launched on
// it export their accessibility trees.
func a11yDesk(t testing.TB) *desk {
	t.Helper()
	needXvfb(t)
	if !guest.HasA11y() {
		t.Skip("dbus-daemon or at-spi2-registryd missing (install dbus and at-spi2-core); skipping a11y tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := guest.StartSession(ctx, guest.SessionConfig{Screen: sizeSpec(1280, 800), WM: "openbox", A11y: true})
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	if sess.Bus() == nil {
		t.Fatal("session started without its accessibility bus")
	}
	home, err := os.MkdirTemp("", "shinken-a11y-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.MkdirAll(filepath.Join(home, ".config/gtk-3.0"), 0o755)
	os.WriteFile(filepath.Join(home, ".config/gtk-3.0/settings.ini"), []byte("[Settings]\ngtk-cursor-blink = false\ngtk-enable-animations = false\n"), 0o644)
	for _, n := range []string{"docs", "downloads", "notes.txt", "data.csv"} {
		if filepath.Ext(n) == "" {
			os.MkdirAll(filepath.Join(home, n), 0o755)
		} else {
			os.WriteFile(filepath.Join(home, n), []byte(n+"\n"), 0o644)
		}
	}
	dir := t.TempDir()
	env := sess.AppEnv(append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "NO_AT_BRIDGE=1"))
	srv, err := guest.NewServer(guest.Config{Display: sess.Display(), StateDir: filepath.Join(dir, "state"), Env: env, A11yBus: sess.Bus().A11yAddress()})
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
	return dialDesk(t, sess, srv, sock)
}

// tree observes the structured observation in mode (tree or diff).
func tree(t testing.TB, d *desk, mode string) *aci.A11yTree {
	t.Helper()
	shot, err := d.cl.Screenshot(ctxT(t), wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG, A11y: mode, Settle: &aci.Settle{QuietMS: 100, MaxMS: 3000}}})
	if err != nil {
		t.Fatal(err)
	}
	if shot.A11y == nil {
		t.Fatalf("observe a11y=%s: no tree in the shot", mode)
	}
	if shot.A11y.Error != nil {
		t.Fatalf("observe a11y=%s: %v", mode, shot.A11y.Error)
	}
	return shot.A11y
}

// find returns the first element with role named name, else the first
// whose name contains name.
func find(tr *aci.A11yTree, role, name string) (aci.Element, bool) {
	for _, e := range tr.Elements {
		if e.Role == role && e.Name == name {
			return e, true
		}
	}
	for _, e := range tr.Elements {
		if e.Role == role && strings.Contains(e.Name, name) {
			return e, true
		}
	}
	return aci.Element{}, false
}

// launch starts app on d, focused and settled, and returns its pid.
func launch(t testing.TB, d *desk, app string, args ...string) int {
	t.Helper()
	if _, err := exec.LookPath(app); err != nil {
		t.Skipf("%s not installed", app)
	}
	res := act(t, d, aci.Action{Verb: aci.LaunchApp, App: app, Args: args})
	if res.WindowID == 0 {
		// launch_app waits 10 s for the window; a first start on a loaded
		// machine (font caches, the bus's first activation) can take longer.
		res.WindowID = awaitWindow(t, d, res.PID, 60*time.Second)
	}
	act(t, d, aci.Action{Verb: aci.ActivateWindow, WindowID: res.WindowID})
	settled(t, d, &aci.Settle{QuietMS: 300, MaxMS: 5000})
	return res.PID
}

// awaitWindow waits for a top-level window of pid, checking the window
// list as it changes.
func awaitWindow(t testing.TB, d *desk, pid int, limit time.Duration) uint32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if ws, err := d.cl.ListWindows(ctx); err == nil {
			for _, w := range ws.Windows {
				if w.PID == pid {
					return w.ID
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("launch_app: no window of pid %d within %s", pid, limit)
		case <-tick.C:
		}
	}
}

// actSettled acts and settles the screen afterwards, as the env does after
// every step: element verbs travel over D-Bus and input over X, so an app
// sees them in order only once each has landed.
func actSettled(t testing.TB, d *desk, a aci.Action) {
	t.Helper()
	if _, err := d.cl.Act(ctxT(t), wire.ActArgs{Action: a, Observe: &wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw, Settle: &aci.Settle{FirstMS: 300, QuietMS: 80, MaxMS: 2000}}}}); err != nil {
		t.Fatalf("act %s: %v", a.Verb, err)
	}
}

func mustFind(t testing.TB, tr *aci.A11yTree, role, name string) aci.Element {
	t.Helper()
	e, ok := find(tr, role, name)
	if !ok {
		t.Fatalf("no %s %q in the tree:\n%s", role, name, tr.Text)
	}
	return e
}

func actErr(t testing.TB, d *desk, a aci.Action) error {
	t.Helper()
	_, err := d.cl.Act(ctxT(t), wire.ActArgs{Action: a})
	return err
}

// TestA11yShippedApps reads the trees of the shipped GUI apps: each has its
// window, its menus and its main controls with on-screen boxes.
func TestA11yShippedApps(t *testing.T) {
	d := a11yDesk(t)
	for _, c := range []struct {
		app  string
		want [][2]string // role, name
		args []string
		name string // the tree's app name, when not app
		quit string // the key that quits it, when not ctrl+q
	}{
		{app: "galculator", want: [][2]string{{"menu", "File"}, {"toggle button", "7"}, {"toggle button", "="}, {"text", ""}}},
		{app: "mousepad", want: [][2]string{{"menu", "File"}, {"menu", "Search"}, {"text", ""}}},
		{app: "pcmanfm", want: [][2]string{{"menu", "Go"}, {"push button", "Home Folder"}, {"table cell", "Home Folder"}, {"statusbar", "items"}}},
		// The browser's own controls and the page's, in one tree.
		{app: "chromium", args: []string{chromiumPage}, name: "Chromium", quit: "ctrl+shift+q",
			want: [][2]string{{"entry", "Address and search bar"}, {"push button", "Reload"}, {"document web", ""}, {"push button", "press"}, {"page tab list", ""}}},
		// LibreOffice: the grid manages its million cells (its children are
		// not read).
		{app: "libreoffice", args: []string{"--calc"}, name: "soffice",
			want: [][2]string{{"menu", "Format"}, {"table", "Sheet Sheet1"}, {"page tab", "Sheet1"}, {"push button", "Save"}}},
		{app: "libreoffice", args: []string{"--writer"}, name: "soffice",
			want: [][2]string{{"menu", "Format"}, {"push button", "Save"}, {"document text", ""}}},
	} {
		t.Run(c.app, func(t *testing.T) {
			launch(t, d, c.app, c.args...)
			tr := tree(t, d, aci.A11yFull)
			name := c.name
			if name == "" {
				name = c.app
			}
			if tr.App != name || tr.Window == "" || tr.Nodes < 15 || tr.Truncated {
				t.Errorf("app %q window %q nodes %d truncated %v; want %s's whole tree", tr.App, tr.Window, tr.Nodes, tr.Truncated, c.app)
			}
			for _, w := range c.want {
				e := mustFind(t, tr, w[0], w[1])
				if e.Box.W <= 0 || e.Box.H <= 0 || e.Box.X < 0 || e.Box.Y < 0 || e.Box.X+e.Box.W > 1280 || e.Box.Y+e.Box.H > 800 {
					t.Errorf("%s %q box %+v; want on the 1280x800 screen", w[0], w[1], e.Box)
				}
			}
			if !strings.HasPrefix(tr.Text, "app: \""+name+"\"") || !strings.Contains(tr.Text, "\nfocus: ") || len(tr.Hash) != 32 {
				t.Errorf("tree text lacks its header/trailer or hash %q:\n%s", tr.Hash, tr.Text)
			}
			quit := c.quit
			if quit == "" {
				quit = "ctrl+q"
			}
			act(t, d, aci.Action{Verb: aci.Key, Keys: quit})
		})
	}
}

// TestA11yIDsAndDiff: ids stay put across observations and content changes;
// a diff names exactly what changed (typing), what appeared (an open menu)
// and what went away (the menu closed).
func TestA11yIDsAndDiff(t *testing.T) {
	d := a11yDesk(t)
	launch(t, d, "mousepad")
	t0 := tree(t, d, aci.A11yFull)
	t1 := tree(t, d, aci.A11yDiff)
	if !t1.Diff || t1.Rev != t0.Rev || len(t1.Elements) != 0 || !strings.Contains(t1.Text, "no changes") {
		t.Fatalf("diff of an unchanged desktop: diff %v rev %d/%d elements %d:\n%s", t1.Diff, t1.Rev, t0.Rev, len(t1.Elements), t1.Text)
	}
	text := mustFind(t, t0, "text", "")
	file := mustFind(t, t0, "menu", "File")

	actSettled(t, d, aci.Action{Verb: aci.TypeText, Text: "hello tree"})
	t2 := tree(t, d, aci.A11yDiff)
	if !t2.Diff || t2.Base != t0.Rev || t2.Rev != t0.Rev+1 {
		t.Fatalf("diff after typing: diff %v base %d rev %d; want a diff against rev %d", t2.Diff, t2.Base, t2.Rev, t0.Rev)
	}
	var changed bool
	for _, e := range t2.Elements {
		if e.ID == text.ID && e.Value == "hello tree" {
			changed = true
		}
	}
	if !changed || !strings.Contains(t2.Text, "~ "+text.ID+" text value=\"hello tree\"") {
		t.Fatalf("diff after typing lacks the text element %s with its new value:\n%s", text.ID, t2.Text)
	}

	actSettled(t, d, aci.Action{Verb: aci.Click, Target: aci.Ref(file.ID)})
	t3 := tree(t, d, aci.A11yDiff)
	full := tree(t, d, aci.A11yFull)
	quit, ok := find(full, "menu item", "Quit")
	if !ok {
		t.Fatalf("File menu not open after clicking %s:\n%s", file.ID, full.Text)
	}
	if t3.Diff && !strings.Contains(t3.Text, "+ "+quit.ID+" menu item \"Quit\"") {
		t.Errorf("diff after opening the menu lacks its Quit item %s:\n%s", quit.ID, t3.Text)
	}
	if e := mustFind(t, full, "text", ""); e.ID != text.ID {
		t.Errorf("text element is %s after a menu opened; was %s", e.ID, text.ID)
	}
	if e := mustFind(t, full, "menu", "File"); e.ID != file.ID {
		t.Errorf("File menu is %s after it opened; was %s", e.ID, file.ID)
	}

	actSettled(t, d, aci.Action{Verb: aci.Key, Keys: "Escape"})
	t4 := tree(t, d, aci.A11yDiff)
	if !t4.Diff || !slices.Contains(t4.Removed, quit.ID) || !strings.Contains(t4.Text, "- removed ") {
		t.Fatalf("diff after closing the menu: diff %v removed %v; want %s among the removed:\n%s", t4.Diff, t4.Removed, quit.ID, t4.Text)
	}
	// Reopened, the same item keeps its id: it is the same element.
	actSettled(t, d, aci.Action{Verb: aci.Click, Target: aci.Ref(file.ID)})
	again := tree(t, d, aci.A11yFull)
	if q, _ := find(again, "menu item", "Quit"); q.ID != quit.ID {
		t.Errorf("reopened Quit item is %s; was %s", q.ID, quit.ID)
	}
	actSettled(t, d, aci.Action{Verb: aci.Key, Keys: "Escape"})

	// A dialog opens (a second top-level of the app) and closes.
	actSettled(t, d, aci.Action{Verb: aci.Key, Keys: "ctrl+o"})
	withDialog := tree(t, d, aci.A11yFull)
	dlg := mustFind(t, withDialog, "file chooser", "")
	actSettled(t, d, aci.Action{Verb: aci.Key, Keys: "Escape"})
	closed := tree(t, d, aci.A11yDiff)
	if !closed.Diff || !slices.Contains(closed.Removed, dlg.ID) {
		t.Fatalf("diff after closing the dialog: diff %v; want %s among the removed %v:\n%s", closed.Diff, dlg.ID, closed.Removed, closed.Text)
	}
	if e := mustFind(t, closed, "text", ""); e.ID != text.ID && len(closed.Elements) > 0 {
		t.Errorf("text element changed id to %s", e.ID)
	}

	// A new episode starts ids over.
	shot, err := d.cl.Screenshot(ctxT(t), wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG, A11y: aci.A11yFull}, A11yReset: true})
	if err != nil || shot.A11y == nil || len(shot.A11y.Elements) == 0 || shot.A11y.Elements[0].ID != "e1" || shot.A11y.Rev != 1 {
		t.Fatalf("after a11y_reset: %v, %+v; want ids from e1 at rev 1", err, shot.A11y)
	}
}

// TestA11yElementActions: a click on an element ref, invoke_action and
// set_value change the app as asked; a stale or unknown ref is typed.
func TestA11yElementActions(t *testing.T) {
	d := a11yDesk(t)
	launch(t, d, "galculator")
	tr := tree(t, d, aci.A11yFull)
	display := mustFind(t, tr, "text", "")
	actSettled(t, d, aci.Action{Verb: aci.Click, Target: aci.Ref(mustFind(t, tr, "toggle button", "7").ID)})
	actSettled(t, d, aci.Action{Verb: aci.Click, Target: aci.Ref(mustFind(t, tr, "toggle button", "+").ID)})
	actSettled(t, d, aci.Action{Verb: aci.InvokeAction, Target: aci.Ref(mustFind(t, tr, "toggle button", "5").ID), Text: "click"})
	actSettled(t, d, aci.Action{Verb: aci.InvokeAction, Target: aci.Ref(mustFind(t, tr, "toggle button", "=").ID)})
	after := tree(t, d, aci.A11yFull)
	if e := mustFind(t, after, "text", ""); e.ID != display.ID || e.Value != "12" {
		t.Fatalf("display after 7+5= is %s %q; want %s \"12\":\n%s", e.ID, e.Value, display.ID, after.Text)
	}
	if err := actErr(t, d, aci.Action{Verb: aci.InvokeAction, Target: aci.Ref(mustFind(t, tr, "toggle button", "=").ID), Text: "fly"}); aci.CodeOf(err) != aci.CodeInvalidAction {
		t.Errorf("invoke_action with an unknown action: %v; want invalid_action", err)
	}
	for ref, code := range map[string]aci.Code{"e99999": aci.CodeStaleElementRef, "x7": aci.CodeInvalidAction} {
		if err := actErr(t, d, aci.Action{Verb: aci.Click, Target: aci.Ref(ref)}); aci.CodeOf(err) != code {
			t.Errorf("click on ref %q: %v; want %s", ref, err, code)
		}
	}

	// set_value on editable text; a ref to a closed window is stale.
	act(t, d, aci.Action{Verb: aci.Key, Keys: "ctrl+q"})
	launch(t, d, "mousepad")
	mp := tree(t, d, aci.A11yFull)
	text := mustFind(t, mp, "text", "")
	act(t, d, aci.Action{Verb: aci.SetValue, Target: aci.Ref(text.ID), Text: "set by ref"})
	if e := mustFind(t, tree(t, d, aci.A11yFull), "text", ""); e.Value != "set by ref" {
		t.Fatalf("text after set_value is %q; want \"set by ref\"", e.Value)
	}
	if err := actErr(t, d, aci.Action{Verb: aci.SetValue, Target: aci.Ref(mustFind(t, mp, "menu", "File").ID), Text: "x"}); aci.CodeOf(err) != aci.CodeInvalidAction {
		t.Errorf("set_value on a menu: %v; want invalid_action", err)
	}
	err := actErr(t, d, aci.Action{Verb: aci.Click, Target: aci.Ref(display.ID)}) // galculator has quit
	if aci.CodeOf(err) != aci.CodeStaleElementRef {
		t.Fatalf("click on an element of a closed app: %v; want stale_element_ref", err)
	}
	if e := aci.AsError(err); !strings.Contains(e.Message, "observe again") {
		t.Errorf("stale_element_ref message %q lacks the re-observe hint", e.Message)
	}
}

// TestA11yHungApp: a stopped app costs a typed error inside the deadline,
// the pixels still come, and the env is usable once the app is gone.
func TestA11yHungApp(t *testing.T) {
	d := a11yDesk(t)
	pid := launch(t, d, "galculator")
	tree(t, d, aci.A11yFull)
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	shot, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG, A11y: aci.A11yFull}})
	if err != nil {
		t.Fatalf("observe with a stopped app: %v; want the pixels and a typed tree error", err)
	}
	if len(shot.Data) == 0 || shot.A11y == nil || shot.A11y.Error == nil || shot.A11y.Error.Code != aci.CodeTimeout {
		t.Fatalf("observe with a stopped app: data %d bytes, tree %+v; want pixels and a timeout tree error", len(shot.Data), shot.A11y)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	launch(t, d, "mousepad")
	if tr := tree(t, d, aci.A11yFull); tr.App != "mousepad" {
		t.Fatalf("after the stopped app died the tree is of %q; want mousepad", tr.App)
	}
}

func TestA11yDump(t *testing.T) {
	d := a11yDesk(t)
	// What each shipped app's tree must hold: its app line and an element
	// a task acts on.
	for _, c := range []struct{ app, want string }{
		{"galculator", `toggle button "7"`},
		{"mousepad", `menu "File"`},
		{"pcmanfm", `menu "File"`},
	} {
		launchApp(t, d, shippedApp{app: c.app})
		tr := tree(t, d, aci.A11yFull)
		t.Logf("%s: nodes %d walk %dms settle %dms events %d trunc %q\n%s", c.app, tr.Nodes, tr.WalkMS, tr.SettleMS, tr.Events, tr.TruncatedBy, tr.Text)
		if !strings.HasPrefix(tr.Text, `app: "`+c.app+`"`) || !strings.Contains(tr.Text, c.want) || tr.Nodes < 5 || tr.TruncatedBy != "" {
			t.Errorf("%s: a tree of %d nodes (truncated by %q) without %s:\n%s", c.app, tr.Nodes, tr.TruncatedBy, c.want, tr.Text)
		}
	}
}
