package guest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/guest"
	"github.com/shinken-rl/shinken/guest/wire"
)

// The shipped apps and, for each, the actions the fidelity tests and the
// settle measurements drive. Points are relative to the app's window.

type appAction struct {
	name string
	act  func(w aci.Window) aci.Action
	// alt, when set, is a second form of act that changes something else
	// (another line, another button), for runs that alternate the two.
	alt func(w aci.Window) aci.Action
	// undo brings the app back after the action where it opened something
	// (a menu).
	undo *aci.Action
}

type shippedApp struct {
	app   string
	args  []string
	setup []aci.Action // run once after launch (scrollback to scroll through)
	acts  []appAction
	// busy: the app's own timers keep its processes from ever looking
	// idle (Chromium's compositor and renderer), so its steps settle by
	// the damage windows, not the idle settle.
	busy bool
	// frames: the app answers for its frames (Chromium over DevTools), so
	// most of its steps end on that answer (info.settle.frame).
	frames bool
	// probe, when set, is an action the app draws in answer to once it
	// takes input: LibreOffice maps its window long before that on a
	// fresh profile and a loaded host.
	// Probe i alternates between two actions that draw differently.
	probe func(w aci.Window, i int) aci.Action
}

func at(w aci.Window, fx, fy float64) *aci.Target {
	return aci.Px(float64(w.Geometry.X)+fx*float64(w.Geometry.W), float64(w.Geometry.Y)+fy*float64(w.Geometry.H))
}

func atPx(w aci.Window, dx, dy int) *aci.Target {
	return aci.Px(float64(w.Geometry.X+dx), float64(w.Geometry.Y+dy))
}

var escape = &aci.Action{Verb: aci.Key, Keys: "Escape"}

func shippedApps() []shippedApp {
	clickPx := func(dx, dy int) func(aci.Window) aci.Action {
		return func(w aci.Window) aci.Action { return aci.Action{Verb: aci.Click, Target: atPx(w, dx, dy)} }
	}
	typ := func(s string) func(aci.Window) aci.Action {
		return func(aci.Window) aci.Action { return aci.Action{Verb: aci.TypeText, Text: s} }
	}
	key := func(k string) func(aci.Window) aci.Action {
		return func(aci.Window) aci.Action { return aci.Action{Verb: aci.Key, Keys: k} }
	}
	scroll := func(dy int) func(aci.Window) aci.Action {
		return func(w aci.Window) aci.Action { return aci.Action{Verb: aci.Scroll, Target: at(w, 0.5, 0.5), DY: dy} }
	}
	menu := func(w aci.Window) aci.Action { return aci.Action{Verb: aci.Click, Target: atPx(w, 18, 12)} }
	return []shippedApp{
		{app: "xterm", args: []string{"-geometry", "90x30+40+40"},
			setup: []aci.Action{{Verb: aci.TypeText, Text: "seq 300\n"}},
			acts: []appAction{
				{name: "click", act: func(w aci.Window) aci.Action {
					return aci.Action{Verb: aci.DoubleClick, Target: at(w, 0.015, 0.5)} // selects a number
				}, alt: func(w aci.Window) aci.Action {
					return aci.Action{Verb: aci.DoubleClick, Target: at(w, 0.015, 0.6)}
				}},
				{name: "type", act: typ("echo hi")},
				{name: "key", act: key("Return")},
				{name: "scroll", act: scroll(-5)},
				{name: "menu", act: func(w aci.Window) aci.Action {
					return aci.Action{Verb: aci.Click, Target: at(w, 0.5, 0.5), Modifiers: []string{"ctrl"}}
				}, undo: escape},
			}},
		{app: "mousepad",
			setup: []aci.Action{{Verb: aci.TypeText, Text: "line one\nline two\n"}, {Verb: aci.Key, Keys: "ctrl+End"}},
			acts: []appAction{
				{name: "click", act: clickPx(40, 61), alt: clickPx(40, 79)}, // line one, line two
				{name: "type", act: typ("hello")},
				{name: "key", act: key("Return")},
				{name: "scroll", act: scroll(3)},
				{name: "menu", act: menu, undo: escape},
			}},
		{app: "galculator",
			acts: []appAction{
				{name: "click", act: clickPx(35, 279), alt: clickPx(100, 279), undo: escape}, // buttons 1, 2; Escape clears
				{name: "type", act: typ("12"), undo: escape},
				{name: "key", act: key("Escape")},
				{name: "scroll", act: func(w aci.Window) aci.Action { // over the display
					return aci.Action{Verb: aci.Scroll, Target: at(w, 0.5, 0.2), DY: 3}
				}},
				{name: "menu", act: menu, undo: escape},
			}},
		{app: "chromium", args: []string{chromiumPage}, busy: true, frames: true, // the text field has the focus
			acts: []appAction{
				{name: "click", act: clickPx(345, 100), alt: clickPx(345, 100), undo: &aci.Action{Verb: aci.Click, Target: aci.Px(150, 100)}}, // the button counts clicks; the field gets the focus back
				{name: "type", act: typ("abc")},
				{name: "key", act: key("BackSpace")},
				{name: "scroll", act: scroll(3)},
				{name: "menu", act: func(w aci.Window) aci.Action { // the browser's own menu, top right
					return aci.Action{Verb: aci.Click, Target: atPx(w, w.Geometry.W-28, 62)}
				}, undo: escape},
			}},
		{app: "libreoffice", args: []string{"--calc"}, busy: true,
			probe: func(w aci.Window, i int) aci.Action { // two cells
				return aci.Action{Verb: aci.Click, Target: at(w, 0.5+0.1*float64(i%2), 0.6)}
			},
			acts: []appAction{
				{name: "click", act: func(w aci.Window) aci.Action { return aci.Action{Verb: aci.Click, Target: at(w, 0.3, 0.5)} },
					alt: func(w aci.Window) aci.Action { return aci.Action{Verb: aci.Click, Target: at(w, 0.4, 0.5)} }}, // two cells
				{name: "type", act: typ("123")},
				{name: "key", act: key("Return")},
				{name: "scroll", act: func(w aci.Window) aci.Action { return aci.Action{Verb: aci.Scroll, Target: at(w, 0.5, 0.6), DY: 3} }},
				{name: "menu", act: menu, undo: escape},
			}},
		{app: "pcmanfm",
			acts: []appAction{
				{name: "click", act: clickPx(205, 98), alt: clickPx(300, 98)}, // two icons
				{name: "type", act: typ("d"), undo: escape},                   // closes the type-ahead search
				{name: "key", act: key("Down")},
				{name: "scroll", act: scroll(3)},
				{name: "menu", act: menu, undo: escape},
			}},
	}
}

// chromiumPage is the page the fidelity tests drive in Chromium: a text
// field, a button that counts its clicks and a page tall enough to scroll.
const chromiumPage = `data:text/html,<body style="margin:0;font:16px sans-serif"><input autofocus style="width:300px;margin:4px"><button style="margin:4px" onclick="this.textContent=++this.n||(this.n=1)">press</button><div style="height:4000px;background:linear-gradient(white,rgb(40,90,200))">tall</div></body>`

// appDesk is a 1280x800 desktop under openbox whose HOME holds a few files
// (something for the file manager to show) and turns the GTK cursor blink
// off, so that a settled screen stays still.
func appDesk(t testing.TB) *desk {
	t.Helper()
	return appDeskIdle(t, false)
}

// appDeskIdle is appDesk with Config.SettleIdle as given: the session's X
// server, window manager and apps are all this process's descendants, so the
// idle settle sees every process that draws.
func appDeskIdle(t testing.TB, idle bool) *desk {
	t.Helper()
	needXvfb(t)
	if _, err := exec.LookPath("openbox"); err != nil {
		t.Skip("openbox not on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := guest.StartSession(ctx, guest.SessionConfig{Screen: sizeSpec(1280, 800), WM: "openbox"})
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	// Not t.TempDir: the apps' children may still write here while they die.
	home, err := os.MkdirTemp("", "shinken-apps-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	for _, f := range []string{".config/gtk-3.0/settings.ini", ".config/gtk-2.0/gtkrc"} {
		os.MkdirAll(filepath.Join(home, filepath.Dir(f)), 0o755)
	}
	os.WriteFile(filepath.Join(home, ".config/gtk-3.0/settings.ini"), []byte("[Settings]\ngtk-cursor-blink = false\ngtk-enable-animations = false\n"), 0o644)
	os.WriteFile(filepath.Join(home, ".gtkrc-2.0"), []byte("gtk-cursor-blink = 0\n"), 0o644)
	for _, n := range []string{"docs", "downloads", "notes.txt", "data.csv", "draft.md"} {
		if filepath.Ext(n) == "" {
			os.MkdirAll(filepath.Join(home, n), 0o755)
		} else {
			os.WriteFile(filepath.Join(home, n), []byte(n+"\n"), 0o644)
		}
	}
	return serveHome(t, sess, home, idle)
}

func serveHome(t testing.TB, sess *guest.Session, home string, idle bool) *desk {
	t.Helper()
	dir := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "NO_AT_BRIDGE=1")
	srv, err := guest.NewServer(guest.Config{Display: sess.Display(), StateDir: filepath.Join(dir, "state"), Env: env, SettleIdle: idle})
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

// launchApp starts app and returns its window, focused, once it has
// settled.
func launchApp(t testing.TB, d *desk, app shippedApp) aci.Window {
	t.Helper()
	if _, err := exec.LookPath(app.app); err != nil {
		t.Skipf("%s not installed", app.app)
	}
	res := act(t, d, aci.Action{Verb: aci.LaunchApp, App: app.app, Args: app.args})
	if res.WindowID == 0 {
		t.Fatalf("launch_app %s: no window within the launch wait (pid %d)", app.app, res.PID)
	}
	act(t, d, aci.Action{Verb: aci.ActivateWindow, WindowID: res.WindowID})
	var win aci.Window
	ws := act(t, d, aci.Action{Verb: aci.ListWindows})
	for _, w := range ws.Windows {
		if w.ID == res.WindowID {
			win = w
		}
	}
	if win.ID == 0 {
		t.Fatalf("list_windows: launched window %d missing from %+v", res.WindowID, ws.Windows)
	}
	if app.probe != nil {
		awaitInput(t, d, func(i int) aci.Action { return app.probe(win, i) })
	}
	for _, a := range app.setup {
		act(t, d, a)
	}
	settled(t, d, &aci.Settle{QuietMS: 300, MaxMS: 5000})
	return win
}

// awaitInput takes settled steps of probe(0), probe(1), ... until one's
// frame changes in answer: the app takes input. (A probe the app takes late
// is drawn before the next one's step; the next one draws anew.)
func awaitInput(t testing.TB, d *desk, probe func(i int) aci.Action) {
	t.Helper()
	for i := 0; i < 30; i++ {
		pre := settled(t, d, &aci.Settle{QuietMS: 300, MaxMS: 5000})
		if got := stepShot(t, d, probe(i), pre.Hash); !got.NotModified && got.Hash != pre.Hash {
			return
		}
	}
	t.Fatal("the app drew nothing in answer to 30 probes; it takes no input")
}

// settled observes once the screen has been quiet for s.QuietMS.
func settled(t testing.TB, d *desk, s *aci.Settle) *wire.Shot {
	t.Helper()
	shot, err := d.cl.Screenshot(ctxT(t), wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw, Settle: s}})
	if err != nil {
		t.Fatal(err)
	}
	return shot
}

// defaultSettle is the shipped default.
func defaultSettle() *aci.Settle {
	s := configs.DefaultSettle
	return &s
}

// damageLog is an X client of its own that records when the screen is
// damaged, for measuring how apps draw.
type damageLog struct {
	c    *xgb.Conn
	mu   sync.Mutex
	at   []time.Time
	done chan struct{}
}

func newDamageLog(t testing.TB, display string) *damageLog {
	t.Helper()
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	if err := xfixes.Init(c); err != nil {
		t.Fatal(err)
	}
	xfixes.QueryVersion(c, 5, 0).Reply()
	if err := damage.Init(c); err != nil {
		t.Fatal(err)
	}
	damage.QueryVersion(c, 1, 1).Reply()
	id, _ := damage.NewDamageId(c)
	root := xproto.Setup(c).DefaultScreen(c).Root
	if err := damage.CreateChecked(c, id, xproto.Drawable(root), damage.ReportLevelNonEmpty).Check(); err != nil {
		t.Fatal(err)
	}
	l := &damageLog{c: c, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for {
			ev, err := c.WaitForEvent()
			if ev == nil && err == nil {
				return
			}
			if _, ok := ev.(damage.NotifyEvent); ok {
				damage.Subtract(c, id, 0, 0)
				l.mu.Lock()
				l.at = append(l.at, time.Now())
				l.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { c.Close(); <-l.done })
	return l
}

func (l *damageLog) since(t0 time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, a := range l.at {
		if a.After(t0) {
			out = append(out, a.Sub(t0))
		}
	}
	return out
}

// TestMeasureAppDrawing measures, for each shipped app and action, how long
// after the input the app starts drawing, the longest gap between its
// damage events while it draws, and how long it draws: the numbers the
// default settle bounds come from (configs.DefaultSettle). It prints a
// table and runs only with SHINKEN_MEASURE=1.
func TestMeasureAppDrawing(t *testing.T) {
	if os.Getenv("SHINKEN_MEASURE") == "" {
		t.Skip("set SHINKEN_MEASURE=1 to measure the shipped apps' drawing")
	}
	const reps = 5
	for _, app := range shippedApps() {
		t.Run(app.app, func(t *testing.T) {
			d := appDesk(t)
			win := launchApp(t, d, app)
			log := newDamageLog(t, d.sess.Display())
			for _, aa := range app.acts {
				var firsts, gaps, spans []time.Duration
				for i := 0; i < reps; i++ {
					settled(t, d, &aci.Settle{QuietMS: 400, MaxMS: 5000})
					t0 := time.Now()
					act(t, d, aa.act(win))
					settled(t, d, &aci.Settle{FirstMS: 1500, QuietMS: 600, MaxMS: 6000})
					ev := log.since(t0)
					if len(ev) == 0 {
						firsts = append(firsts, -1)
					} else {
						firsts = append(firsts, ev[0])
						var gap time.Duration
						for j := 1; j < len(ev); j++ {
							gap = max(gap, ev[j]-ev[j-1])
						}
						gaps = append(gaps, gap)
						spans = append(spans, ev[len(ev)-1]-ev[0])
					}
					if aa.undo != nil {
						act(t, d, *aa.undo)
					}
				}
				fmt.Printf("measure %-10s %-6s first=%v maxgap=%v span=%v\n", app.app, aa.name, ms(firsts), ms(gaps), ms(spans))
			}
		})
	}
}

func ms(ds []time.Duration) string {
	s := "["
	for i, d := range ds {
		if i > 0 {
			s += " "
		}
		if d < 0 {
			s += "none"
		} else {
			s += fmt.Sprintf("%.1f", float64(d.Microseconds())/1000)
		}
	}
	return s + "]"
}
