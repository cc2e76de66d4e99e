package guest_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

// needChromium skips where Debian's chromium is missing (make deps
// installs it).
func needChromium(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("chromium not installed (make deps installs it)")
	}
}

// TestBrowserOpensPageAndShowsIt launches Chromium, opens a page over
// guestd's DevTools pipe and finds the page's colour in the capture.
func TestBrowserOpensPageAndShowsIt(t *testing.T) {
	needChromium(t)
	d := startDesk(t, 1024, 700, "openbox")
	res := act(t, d, aci.Action{Verb: aci.LaunchApp, App: "chromium"})
	if res.WindowID == 0 {
		res.WindowID = awaitWindow(t, d, res.PID, 60*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	page := "data:text/html,<body style='background:rgb(10,200,30);margin:0'><h1>Shinken</h1></body>"
	if _, err := d.cl.Browser(ctx, wire.BrowserArgs{Open: []string{page}}); err != nil {
		t.Fatalf("browser open: %v", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		shot, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: "raw"}})
		if err != nil {
			t.Fatal(err)
		}
		if p := pixel(shot, 512, 600); p == [3]byte{10, 200, 30} {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("pixel (512,600) is %v; want the page's green", p)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r, err := d.cl.Browser(ctx, wire.BrowserArgs{Close: true}); err != nil || !r.Closed {
		t.Fatalf("browser close: %+v %v", r, err)
	}
}

// TestBrowserSettleFollowsLoadsAndAnimations: a step in Chromium ends on
// the tab's frames (info.settle.frame) only when nothing is drawn later on
// timers of its own: moving onto a link (the status bubble), a click that
// starts a slow navigation, and one that starts a CSS transition are waited
// out by the damage windows, and the step's frame is the one the screen
// settles on; a click that changes nothing ends on the frames.
func TestBrowserSettleFollowsLoadsAndAnimations(t *testing.T) {
	needChromium(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<body style="margin:0"><a href="/next" style="display:block;height:400px;background:rgb(200,0,0)">next</a></body>`)
	})
	mux.HandleFunc("/next", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(400 * time.Millisecond) // a slow server: the old page stays up meanwhile
		fmt.Fprint(w, `<body style="margin:0;background:rgb(0,160,0)"><div id="box" style="height:300px;background:rgb(0,0,200);transition:background-color 600ms linear" onclick="this.style.backgroundColor='rgb(250,250,0)'">box</div></body>`)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	d := appDesk(t)
	win := launchApp(t, d, shippedApp{app: "chromium", args: []string{"http://" + ln.Addr().String() + "/"}})
	pre := settled(t, d, &aci.Settle{QuietMS: 800, MaxMS: 5000})

	// Onto the link: the status bubble shows its address after a delay of
	// its own, which the frames do not cover.
	got := stepShot(t, d, aci.Action{Verb: aci.Move, Target: atPx(win, 300, 400)}, pre.Hash)
	final := settled(t, d, &aci.Settle{FirstMS: 500, QuietMS: 500, MaxMS: 5000})
	t.Logf("hover: settle %+v", got.Settle)
	if got.Hash != final.Hash || got.Settle.Frame {
		t.Errorf("hover over a link: settle %+v, step frame final: %v; want the damage windows to wait for the status bubble", got.Settle, got.Hash == final.Hash)
	}

	// The click: the slow page loads; the frames do not end the step.
	got = stepShot(t, d, aci.Action{Verb: aci.Click, Target: atPx(win, 300, 400)}, final.Hash)
	final = settled(t, d, &aci.Settle{FirstMS: 500, QuietMS: 500, MaxMS: 5000})
	t.Logf("navigation: settle %+v", got.Settle)
	if got.Hash != final.Hash {
		t.Errorf("navigation: the step's frame is not the settled one (settle %+v): %s", got.Settle, diffBox(got, final))
	}
	if got.Settle.Frame || got.Settle.WaitedMS < 400 {
		t.Errorf("navigation: settle %+v; want the damage windows to wait for the 400 ms load", got.Settle)
	}
	if p := pixel(final, 640, 750); p != [3]byte{0, 160, 0} {
		t.Errorf("after the click pixel (640,750) is %v; want the next page's green", p)
	}

	// The transition: the frames do not end the step; the damage does.
	got = stepShot(t, d, aci.Action{Verb: aci.Click, Target: atPx(win, 300, 200)}, final.Hash)
	final = settled(t, d, &aci.Settle{FirstMS: 500, QuietMS: 500, MaxMS: 5000})
	t.Logf("transition: settle %+v", got.Settle)
	if got.Hash != final.Hash {
		t.Errorf("transition: the step's frame is not the settled one (settle %+v)", got.Settle)
	}
	if got.Settle.Frame || got.Settle.WaitedMS < 600 {
		t.Errorf("transition: settle %+v; want the damage windows to wait out the 600 ms transition", got.Settle)
	}

	// The same click again changes nothing: the frames end the step before
	// the first-damage window would.
	got = stepShot(t, d, aci.Action{Verb: aci.Click, Target: atPx(win, 300, 200)}, final.Hash)
	t.Logf("no change: settle %+v", got.Settle)
	if !got.NotModified || !got.Settle.Frame || got.Settle.Damaged || got.Settle.WaitedMS >= int64(defaultSettle().FirstMS) {
		t.Errorf("a click that changes nothing: not_modified %v, settle %+v; want not_modified, ended on the frames within the %d ms first-damage window",
			got.NotModified, got.Settle, defaultSettle().FirstMS)
	}
}

func diffBox(a, b *wire.Shot) string {
	if a.Data == nil || b.Data == nil || a.W != b.W || a.H != b.H {
		return "no data"
	}
	x0, y0, x1, y1, n := a.W, a.H, -1, -1, 0
	for y := 0; y < a.H; y++ {
		for x := 0; x < a.W; x++ {
			i := (y*a.W + x) * 3
			if a.Data[i] != b.Data[i] || a.Data[i+1] != b.Data[i+1] || a.Data[i+2] != b.Data[i+2] {
				n++
				x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
			}
		}
	}
	return fmt.Sprintf("%d px in (%d,%d)-(%d,%d)", n, x0, y0, x1, y1)
}

// TestBrowserPipeFloodEndsOnlyTheBrowser: the agent runs as Chromium's user
// and can open Chromium's DevTools pipe through /proc; a message without
// end written into it ends guestd's connection to that browser at the
// bound, and guestd goes on serving (a screenshot; browser open answers a
// typed error).
func TestBrowserPipeFloodEndsOnlyTheBrowser(t *testing.T) {
	needChromium(t)
	d := startDesk(t, 1024, 700, "openbox")
	res := act(t, d, aci.Action{Verb: aci.LaunchApp, App: "chromium"})
	if res.WindowID == 0 {
		awaitWindow(t, d, res.PID, 60*time.Second)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := d.cl.Browser(ctx, wire.BrowserArgs{Open: []string{"data:text/html,<p>hi"}}); err != nil {
		t.Fatalf("browser open before the flood: %v", err)
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/4", res.PID), os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("Chromium's DevTools pipe is out of reach here: %v", err)
	}
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for i := 0; i < 10; i++ { // 10 MiB, no zero byte; the writes fail once guestd closes its end
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	if _, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG}}); err != nil {
		t.Fatalf("screenshot after the flood: %v", err)
	}
	_, err = d.cl.Browser(ctx, wire.BrowserArgs{Open: []string{"data:text/html,<p>again"}})
	if c := aci.CodeOf(err); c != aci.CodeInvalidAction && c != aci.CodeInternal {
		t.Fatalf("browser open after the flood: %v; want the browser gone (invalid_action) or its connection failed (internal)", err)
	}
}
