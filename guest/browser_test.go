package guest_test

import (
	"context"
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
