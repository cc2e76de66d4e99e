package guest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/klauspost/compress/s2"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/internal/xrec"
	"github.com/shinken-rl/shinken/guest/wire"
)

const testW, testH = 640, 480

type desk struct {
	sess *guest.Session
	srv  *guest.Server
	cl   *client.Client
	sock string
}

func needXvfb(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("Xvfb"); err != nil {
		t.Skip("Xvfb not on PATH (install xvfb); skipping X11 tests")
	}
}

// startDesk starts Xvfb (no WM unless wm is set), a guest server on a unix
// socket and a client; all are ended by t.Cleanup.
func startDesk(t testing.TB, w, h int, wm string) *desk {
	t.Helper()
	needXvfb(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if wm == "" {
		wm = "none"
	}
	sess, err := guest.StartSession(ctx, guest.SessionConfig{Screen: sizeSpec(w, h), WM: wm})
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	return serveOn(t, sess)
}

func serveOn(t testing.TB, sess *guest.Session) *desk {
	t.Helper()
	dir := t.TempDir()
	srv, err := guest.NewServer(guest.Config{Display: sess.Display(), StateDir: filepath.Join(dir, "state"), Env: append(os.Environ(), "HOME="+dir)})
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

func dialDesk(t testing.TB, sess *guest.Session, srv *guest.Server, sock string) *desk {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, "unix", sock)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return &desk{sess: sess, srv: srv, cl: cl, sock: sock}
}

func sizeSpec(w, h int) string { return fmt.Sprintf("%dx%dx24", w, h) }

func formatInt(n int) string { return strconv.Itoa(n) }

func recorder(t testing.TB, d *desk, x, y, w, h int) *xrec.Recorder {
	t.Helper()
	r, err := xrec.New(d.sess.Display(), x, y, w, h, "xrec")
	if err != nil {
		t.Fatalf("recorder: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func act(t testing.TB, d *desk, a aci.Action) *wire.ActResult {
	t.Helper()
	res, err := d.cl.Act(ctxT(t), wire.ActArgs{Action: a})
	if err != nil {
		t.Fatalf("act %s: %v", a.Verb, err)
	}
	return res
}

func presses(ev []xrec.Event) []xrec.Event { return xrec.Of(ev, "press") }

func waitPresses(t *testing.T, r *xrec.Recorder, n int) []xrec.Event {
	t.Helper()
	ev, err := r.Wait(5*time.Second, func(ev []xrec.Event) bool { return len(presses(ev)) >= n && len(xrec.Of(ev, "release")) >= n })
	if err != nil {
		t.Fatalf("got %d presses; want %d: %v", len(presses(ev)), n, err)
	}
	return presses(ev)
}

func TestClickLandsOnRequestedPixel(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	r := recorder(t, d, 0, 0, testW, testH)
	cases := []struct {
		name   string
		a      aci.Action
		x, y   int
		button byte
		n      int
	}{
		{"px", aci.Action{Verb: aci.Click, Target: aci.Px(123, 45)}, 123, 45, 1, 1},
		{"px-fraction", aci.Action{Verb: aci.Click, Target: aci.Px(10.9, 20.2)}, 10, 20, 1, 1},
		{"norm-origin", aci.Action{Verb: aci.Click, Target: aci.Norm(0, 0)}, 0, 0, 1, 1},
		{"norm-last-pixel", aci.Action{Verb: aci.Click, Target: aci.Norm(1, 1)}, testW - 1, testH - 1, 1, 1},
		{"norm-middle", aci.Action{Verb: aci.Click, Target: aci.Norm(0.5, 0.25)}, 320, 120, 1, 1},
		{"right", aci.Action{Verb: aci.RightClick, Target: aci.Px(300, 200)}, 300, 200, 3, 1},
		{"middle", aci.Action{Verb: aci.Click, Button: "middle", Target: aci.Px(5, 6)}, 5, 6, 2, 1},
		{"double", aci.Action{Verb: aci.DoubleClick, Target: aci.Px(77, 88)}, 77, 88, 1, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r.Reset()
			res := act(t, d, c.a)
			if res.Pointer != [2]int{c.x, c.y} {
				t.Errorf("pointer got %v; want [%d %d]", res.Pointer, c.x, c.y)
			}
			ps := waitPresses(t, r, c.n)
			if len(ps) != c.n {
				t.Fatalf("got %d presses; want %d", len(ps), c.n)
			}
			for _, p := range ps {
				if p.X != c.x || p.Y != c.y || p.Button != c.button {
					t.Errorf("press got button %d at (%d,%d); want button %d at (%d,%d)", p.Button, p.X, p.Y, c.button, c.x, c.y)
				}
			}
		})
	}
	t.Run("modifiers-held", func(t *testing.T) {
		r.Reset()
		act(t, d, aci.Action{Verb: aci.Click, Target: aci.Px(50, 60), Modifiers: []string{"ctrl", "shift"}})
		ps := waitPresses(t, r, 1)
		const want = 1<<2 | 1<<0 // ControlMask | ShiftMask
		if ps[0].State&want != want {
			t.Errorf("press state got %#x; want ctrl+shift (%#x) held", ps[0].State, want)
		}
	})
}

func TestBadTargetsAreInvalidAction(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	r := recorder(t, d, 0, 0, testW, testH)
	nan := 0.0
	nan = nan / nan
	bad := []aci.Action{
		{Verb: aci.Click, Target: aci.Px(testW, 10)},
		{Verb: aci.Click, Target: aci.Px(-1, 10)},
		{Verb: aci.Click, Target: aci.Px(10, testH+5)},
		{Verb: aci.Click, Target: aci.Norm(1.01, 0.5)},
		{Verb: aci.Click, Target: aci.Norm(-0.1, 0.5)},
		{Verb: aci.Click, Target: aci.Px(nan, 3)},
		{Verb: aci.Click, Target: &aci.Target{Kind: "point_mm", X: 1, Y: 1}},
		{Verb: aci.Click},
		{Verb: aci.Click, Target: aci.Px(1, 1), Button: "fourth"},
		{Verb: aci.Drag, Target: aci.Px(1, 1)},
		{Verb: aci.Drag, Target: aci.Px(1, 1), To: aci.Px(1e6, 1)},
		{Verb: aci.Scroll},
		{Verb: aci.Key, Keys: "ctrl+nosuchkey"},
		{Verb: aci.TypeText, Text: "bell\a"},
	}
	for _, a := range bad {
		_, err := d.cl.Act(ctxT(t), wire.ActArgs{Action: a})
		if aci.CodeOf(err) != aci.CodeInvalidAction {
			t.Errorf("%+v: got %v; want invalid_action", a, err)
		}
	}
	if _, err := d.cl.Act(ctxT(t), wire.ActArgs{Action: aci.Action{Verb: "teleport"}}); aci.CodeOf(err) != aci.CodeUnknownVerb {
		t.Errorf("teleport: got %v; want unknown_verb", err)
	}
	// A sync point: a valid click after the bad ones is the first press seen.
	act(t, d, aci.Action{Verb: aci.Click, Target: aci.Px(9, 9)})
	ps := waitPresses(t, r, 1)
	if len(ps) != 1 || ps[0].X != 9 || ps[0].Y != 9 {
		t.Errorf("presses got %+v; want only the valid click at (9,9)", ps)
	}
}

func TestClickThroughDownscaledFrame(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	r := recorder(t, d, 0, 0, testW, testH)
	shot, err := d.cl.Screenshot(ctxT(t), wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw, MaxLongEdge: 200}})
	if err != nil {
		t.Fatal(err)
	}
	if shot.W != 200 || shot.H != 150 || len(shot.Data) != 200*150*3 {
		t.Fatalf("frame got %dx%d (%d bytes); want 200x150 raw", shot.W, shot.H, len(shot.Data))
	}
	for _, fp := range [][2]int{{0, 0}, {57, 33}, {199, 149}} {
		r.Reset()
		st, err := aci.Coords{Space: aci.CoordsFrame}.MapTarget(aci.Target{Kind: aci.PointPx, X: float64(fp[0]), Y: float64(fp[1])}, &shot.Display)
		if err != nil {
			t.Fatal(err)
		}
		act(t, d, aci.Action{Verb: aci.Click, Target: &st})
		p := waitPresses(t, r, 1)[0]
		// The screen pixels that frame pixel averages.
		x0, x1 := fp[0]*testW/200, (fp[0]+1)*testW/200
		y0, y1 := fp[1]*testH/150, (fp[1]+1)*testH/150
		if p.X < x0 || p.X >= x1 || p.Y < y0 || p.Y >= y1 {
			t.Errorf("frame pixel %v: click got (%d,%d); want inside [%d,%d)x[%d,%d)", fp, p.X, p.Y, x0, x1, y0, y1)
		}
	}
}

func typeAndCheck(t *testing.T, d *desk, r *xrec.Recorder, text string) {
	t.Helper()
	r.Reset()
	act(t, d, aci.Action{Verb: aci.TypeText, Text: text})
	ev, err := r.Wait(20*time.Second, func(ev []xrec.Event) bool { return len([]rune(xrec.Text(ev))) >= len([]rune(text)) })
	if got := xrec.Text(ev); got != text {
		t.Fatalf("typed text got %q; want %q (%v)", got, text, err)
	}
}

func TestTypeText(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	r := recorder(t, d, 0, 0, testW, testH)
	t.Run("ascii", func(t *testing.T) {
		typeAndCheck(t, d, r, "Hello, World! 0123456789 ~`!@#$%^&*()_+-={}[]|\\:;\"'<>,.?/\tEnd\n")
	})
	t.Run("unicode", func(t *testing.T) {
		typeAndCheck(t, d, r, "héllo wörld — ✓ 日本語 🙂 Ωμέγα ß")
	})
	t.Run("long", func(t *testing.T) {
		var b strings.Builder
		alpha := []rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .,;é✓日")
		for i := 0; i < 3000; i++ {
			b.WriteRune(alpha[(i*7+i/13)%len(alpha)])
		}
		typeAndCheck(t, d, r, b.String())
	})
}

func TestKeyChordsScrollDrag(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	r := recorder(t, d, 0, 0, testW, testH)
	t.Run("chord", func(t *testing.T) {
		r.Reset()
		act(t, d, aci.Action{Verb: aci.Key, Keys: "ctrl+shift+t"})
		ev, _ := r.Wait(5*time.Second, func(ev []xrec.Event) bool { return len(xrec.Of(ev, "keyup")) >= 3 })
		downs := xrec.Of(ev, "keydown")
		if len(downs) != 3 {
			t.Fatalf("got %d key presses; want 3", len(downs))
		}
		last := downs[2]
		if last.Keysym != 'T' && last.Keysym != 't' {
			t.Errorf("third key got keysym %#x; want t", last.Keysym)
		}
		if last.State&0x5 != 0x5 {
			t.Errorf("t pressed with state %#x; want ctrl+shift held", last.State)
		}
	})
	t.Run("named", func(t *testing.T) {
		r.Reset()
		act(t, d, aci.Action{Verb: aci.Key, Keys: "Return super F5"})
		ev, _ := r.Wait(5*time.Second, func(ev []xrec.Event) bool { return len(xrec.Of(ev, "keyup")) >= 3 })
		var got []uint32
		for _, e := range xrec.Of(ev, "keydown") {
			got = append(got, e.Keysym)
		}
		want := []uint32{0xff0d, 0xffeb, 0xffc2}
		if len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Errorf("keysyms got %#x; want %#x", got, want)
		}
	})
	t.Run("scroll", func(t *testing.T) {
		r.Reset()
		act(t, d, aci.Action{Verb: aci.Scroll, Target: aci.Px(100, 100), DY: 3, DX: -2})
		ps := waitPresses(t, r, 5)
		var down, left int
		for _, p := range ps {
			switch p.Button {
			case 5:
				down++
			case 6:
				left++
			}
			if p.X != 100 || p.Y != 100 {
				t.Errorf("wheel at (%d,%d); want (100,100)", p.X, p.Y)
			}
		}
		if down != 3 || left != 2 {
			t.Errorf("wheel got %d down, %d left; want 3, 2", down, left)
		}
	})
	t.Run("drag", func(t *testing.T) {
		r.Reset()
		act(t, d, aci.Action{Verb: aci.Drag, Target: aci.Px(10, 20), To: aci.Px(300, 220), DurationMS: 100})
		ev, err := r.Wait(5*time.Second, func(ev []xrec.Event) bool { return len(xrec.Of(ev, "release")) >= 1 })
		if err != nil {
			t.Fatal(err)
		}
		p, rel := xrec.Of(ev, "press")[0], xrec.Of(ev, "release")[0]
		if p.X != 10 || p.Y != 20 || rel.X != 300 || rel.Y != 220 {
			t.Errorf("drag got press (%d,%d) release (%d,%d); want (10,20) → (300,220)", p.X, p.Y, rel.X, rel.Y)
		}
		held := 0
		for _, m := range xrec.Of(ev, "motion") {
			if m.State&(1<<8) != 0 && m.X > 10 && m.X < 300 {
				held++
			}
		}
		if held < 3 {
			t.Errorf("got %d intermediate motions with button 1 held; want >= 3", held)
		}
	})
	t.Run("mouse-down-up", func(t *testing.T) {
		r.Reset()
		act(t, d, aci.Action{Verb: aci.MouseDown, Target: aci.Px(40, 41)})
		act(t, d, aci.Action{Verb: aci.MouseUp}) // at the current pointer
		ev, _ := r.Wait(5*time.Second, func(ev []xrec.Event) bool { return len(xrec.Of(ev, "release")) >= 1 })
		rel := xrec.Of(ev, "release")
		if len(rel) != 1 || rel[0].X != 40 || rel[0].Y != 41 {
			t.Errorf("release got %+v; want one at (40,41)", rel)
		}
	})
}

func pixel(shot *wire.Shot, x, y int) [3]byte {
	i := (y*shot.W + x) * 3
	return [3]byte{shot.Data[i], shot.Data[i+1], shot.Data[i+2]}
}

func TestCapturePixelsHashAndNotModified(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	r := recorder(t, d, 0, 0, testW, testH)
	if !d.cl.Welcome().SHM {
		t.Log("MIT-SHM unavailable: testing the GetImage path")
	}
	if err := r.Fill(0, 0, testW, testH, 0x000000); err != nil {
		t.Fatal(err)
	}
	r.Fill(10, 20, 30, 40, 0xff0000)
	r.Fill(100, 100, 50, 50, 0x00ff00)
	r.Fill(200, 300, 5, 5, 0x123456)
	ctx := ctxT(t)
	raw := wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw}}
	shot, err := d.cl.Screenshot(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if shot.W != testW || shot.H != testH || len(shot.Data) != testW*testH*3 {
		t.Fatalf("raw got %dx%d %d bytes; want %dx%d", shot.W, shot.H, len(shot.Data), testW, testH)
	}
	for _, c := range []struct {
		x, y int
		want [3]byte
	}{{15, 25, [3]byte{255, 0, 0}}, {39, 59, [3]byte{255, 0, 0}}, {40, 60, [3]byte{0, 0, 0}}, {120, 140, [3]byte{0, 255, 0}}, {202, 302, [3]byte{0x12, 0x34, 0x56}}, {0, 0, [3]byte{}}} {
		if got := pixel(shot, c.x, c.y); got != c.want {
			t.Errorf("pixel (%d,%d) got %v; want %v", c.x, c.y, got, c.want)
		}
	}
	if len(shot.Hash) != 32 || strings.ToLower(shot.Hash) != shot.Hash {
		t.Errorf("hash %q; want 32 lowercase hex chars", shot.Hash)
	}
	if want := guest.FrameHash(shot.Data, shot.W, shot.H); shot.Hash != want {
		t.Errorf("hash got %s; want FrameHash of the raw pixels %s", shot.Hash, want)
	}
	again, _ := d.cl.Screenshot(ctx, raw)
	if again.Hash != shot.Hash {
		t.Errorf("equal frames hashed %s then %s; want stable", shot.Hash, again.Hash)
	}
	// raws2, the host's form of a raw frame: the same pixels under the
	// same hash, S2-compressed.
	s2shot, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: wire.FormatRawS2}})
	if err != nil {
		t.Fatal(err)
	}
	if dec, err := s2.Decode(nil, s2shot.Data); err != nil || !bytes.Equal(dec, shot.Data) || s2shot.Hash != shot.Hash || s2shot.Format != wire.FormatRawS2 {
		t.Errorf("raws2: format %q, hash %s (raw %s), %d bytes decoding to the raw frame: %v (err %v)", s2shot.Format, s2shot.Hash, shot.Hash, len(s2shot.Data), bytes.Equal(dec, shot.Data), err)
	} else if len(s2shot.Data) >= len(shot.Data)/4 {
		t.Errorf("raws2 frame of %d bytes for %d raw; want it compressed", len(s2shot.Data), len(shot.Data))
	}
	nm, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG}, IfNoneMatch: []string{"00000000000000000000000000000000", shot.Hash}})
	if err != nil {
		t.Fatal(err)
	}
	if !nm.NotModified || nm.Data != nil || nm.Hash != shot.Hash {
		t.Errorf("if_none_match got not_modified=%v data=%d bytes hash=%s; want not_modified with no data", nm.NotModified, len(nm.Data), nm.Hash)
	}
	// One pixel changes the hash.
	r.Fill(600, 400, 1, 1, 0x010000)
	one, _ := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw}, IfNoneMatch: []string{shot.Hash}})
	if one.NotModified || one.Hash == shot.Hash {
		t.Errorf("after a one-pixel change got hash %s (not_modified=%v); want a new hash", one.Hash, one.NotModified)
	}
	if got := pixel(one, 600, 400); got != [3]byte{1, 0, 0} {
		t.Errorf("changed pixel got %v; want [1 0 0]", got)
	}
	// PNG decodes to the same pixels; JPEG close to them.
	p, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG}})
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(p.Data))
	if err != nil {
		t.Fatal(err)
	}
	if p.Hash != one.Hash {
		t.Errorf("png frame hash %s; want the raw frame's %s (hash is before encode)", p.Hash, one.Hash)
	}
	if rr, g, b, _ := img.At(15, 25).RGBA(); rr>>8 != 255 || g != 0 || b != 0 {
		t.Errorf("png pixel (15,25) got %d,%d,%d; want red", rr>>8, g>>8, b>>8)
	}
	j, _ := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatJPEG, Quality: 90}})
	jimg, err := jpeg.Decode(bytes.NewReader(j.Data))
	if err != nil {
		t.Fatal(err)
	}
	if g := jimg.Bounds(); g != image.Rect(0, 0, testW, testH) {
		t.Errorf("jpeg bounds %v", g)
	}
	if _, g, _, _ := jimg.At(125, 125).RGBA(); g>>8 < 200 {
		t.Errorf("jpeg pixel (125,125) green %d; want ~255", g>>8)
	}
	// Window scope.
	ws, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw, Scope: "window:" + formatInt(int(r.Win))}})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Display.SourceRect != (aci.Rect{W: testW, H: testH}) {
		t.Errorf("window scope source_rect %+v", ws.Display.SourceRect)
	}
	if _, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: "gif"}}); aci.CodeOf(err) != aci.CodeBadRequest {
		t.Errorf("format gif: got %v; want bad_request", err)
	}
}

func TestObserveAfterAct(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	recorder(t, d, 0, 0, testW, testH)
	ctx := ctxT(t)
	first, err := d.cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.Move, Target: aci.Px(5, 5)},
		Observe: &wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG, Settle: &aci.Settle{QuietMS: 20, MaxMS: 200}}}})
	if err != nil {
		t.Fatal(err)
	}
	if first.Obs == nil || first.Obs.Hash == "" || len(first.Obs.Data) == 0 || first.Obs.Pointer != [2]int{5, 5} {
		t.Fatalf("act+observe got %+v; want a png frame with pointer [5 5]", first.Obs)
	}
	res, err := d.cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.Move, Target: aci.Px(6, 5)},
		Observe: &wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG}, IfNoneMatch: []string{first.Obs.Hash}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Obs.NotModified || res.Obs.Pointer != [2]int{6, 5} {
		t.Errorf("got not_modified=%v pointer=%v; want not_modified (the cursor is not in the frame) at [6 5]", res.Obs.NotModified, res.Obs.Pointer)
	}
}

func TestDeadXServerIsTypedAndBounded(t *testing.T) {
	d := startDesk(t, 64, 64, "")
	ctx := ctxT(t)
	if _, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw}}); err != nil {
		t.Fatal(err)
	}
	t.Run("wedged", func(t *testing.T) {
		syscall.Kill(d.sess.XPid(), syscall.SIGSTOP)
		hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		h, herr := d.cl.Health(hctx)
		cancel()
		if herr != nil || h.X {
			t.Errorf("health of a stopped X server got %+v, %v; want x:false", h, herr)
		}
		start := time.Now()
		_, err := d.cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.Click, Target: aci.Px(1, 1)}})
		el := time.Since(start)
		syscall.Kill(d.sess.XPid(), syscall.SIGCONT)
		if aci.CodeOf(err) != aci.CodeDisplayError {
			t.Errorf("click on a stopped X server: got %v; want display_error", err)
		}
		if el > 8*time.Second {
			t.Errorf("display_error took %v; want a bounded wait", el)
		}
		// The guest reconnects once X answers again.
		if _, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw}}); err != nil {
			t.Errorf("after SIGCONT: %v", err)
		}
	})
	t.Run("busy-is-alive", func(t *testing.T) {
		done := make(chan error, 1)
		go func() {
			_, err := d.cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.Drag, Target: aci.Px(1, 1), To: aci.Px(60, 60), DurationMS: 1500}})
			done <- err
		}()
		time.Sleep(200 * time.Millisecond)
		start := time.Now()
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		h, err := d.cl.Health(hctx)
		cancel()
		if err != nil || !h.X {
			t.Errorf("health during a long drag got %+v, %v; want x:true", h, err)
		}
		if el := time.Since(start); el > 900*time.Millisecond {
			t.Errorf("health during a drag took %v; want it not to queue behind the drag", el)
		}
		if err := <-done; err != nil {
			t.Errorf("drag: %v", err)
		}
	})
	t.Run("killed", func(t *testing.T) {
		syscall.Kill(d.sess.XPid(), syscall.SIGKILL)
		start := time.Now()
		_, err := d.cl.Screenshot(ctx, wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw}})
		if aci.CodeOf(err) != aci.CodeDisplayError {
			t.Errorf("screenshot after Xvfb died: got %v; want display_error", err)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("display_error took %v; want a bounded wait", el)
		}
		h, err := d.cl.Health(ctx)
		if err != nil || h.X {
			t.Errorf("health got %+v, %v; want x:false from a responsive guest", h, err)
		}
		if res, err := d.cl.Exec(ctx, wire.ExecArgs{Argv: []string{"true"}}); err != nil || *res.ExitCode != 0 {
			t.Errorf("exec without X: got %v; want the guest still serving", err)
		}
	})
}

// TestSessionGLX starts a session each way: GLX is absent unless asked for,
// and present when it is (Xvfb loads Mesa only then).
func TestSessionGLX(t *testing.T) {
	needXvfb(t)
	for _, want := range []bool{false, true} {
		sess, err := guest.StartSession(ctxT(t), guest.SessionConfig{Screen: sizeSpec(64, 64), WM: "none", GLX: want})
		if err != nil {
			t.Fatalf("StartSession: %v", err)
		}
		c, err := xgb.NewConnDisplay(sess.Display())
		if err != nil {
			sess.Close()
			t.Fatal(err)
		}
		ext, err := xproto.QueryExtension(c, 3, "GLX").Reply()
		c.Close()
		sess.Close()
		if err != nil {
			t.Fatal(err)
		}
		if ext.Present != want {
			t.Errorf("SessionConfig.GLX %v: the X server offers GLX: %v", want, ext.Present)
		}
	}
}

func TestSessionWithWindowManager(t *testing.T) {
	if _, err := exec.LookPath("openbox"); err != nil {
		t.Skip("openbox not on PATH")
	}
	d := startDesk(t, testW, testH, "openbox")
	ctx := ctxT(t)
	h, err := d.cl.Health(ctx)
	if err != nil || !h.X || !h.WM {
		t.Fatalf("health got %+v, %v; want x and wm", h, err)
	}
	if w := d.cl.Welcome(); w.Screen != (wire.Size{W: testW, H: testH}) || !w.FrameDedup || !w.ObserveAfterAct {
		t.Errorf("welcome got %+v", w)
	}
	res := act(t, d, aci.Action{Verb: aci.LaunchApp, App: "xterm", Args: []string{"-title", "shinken-term"}})
	if res.PID <= 0 {
		t.Fatalf("launch_app pid %d", res.PID)
	}
	var found *wire.Window
	deadline := time.Now().Add(15 * time.Second)
	for found == nil && time.Now().Before(deadline) {
		ws, err := d.cl.ListWindows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ws.EWMH {
			t.Fatalf("list_windows under openbox: ewmh false")
		}
		for i, w := range ws.Windows {
			if w.Title == "shinken-term" {
				found = &ws.Windows[i]
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	if found == nil {
		t.Fatal("xterm's window never appeared in list_windows")
	}
	if found.PID != res.PID || found.Class != "XTerm" {
		t.Errorf("window got pid %d class %q; want pid %d class XTerm", found.PID, found.Class, res.PID)
	}
	got := act(t, d, aci.Action{Verb: aci.ActivateWindow, App: "xterm"})
	if got.WindowID != found.ID {
		t.Errorf("activate_window got %d; want %d", got.WindowID, found.ID)
	}
	if res.WindowID != found.ID {
		t.Errorf("launch_app window got %d; want %d (its window once mapped)", res.WindowID, found.ID)
	}
	if got := act(t, d, aci.Action{Verb: aci.ActivateWindow, App: "Shinken-Term"}); got.WindowID != found.ID {
		t.Errorf("activate_window by title got %d; want %d", got.WindowID, found.ID)
	}
	if _, err := d.cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.ActivateWindow, App: "no-such-app"}}); aci.CodeOf(err) != aci.CodeNotFound {
		t.Errorf("activate_window of no window: got %v; want not_found", err)
	}
	lw := act(t, d, aci.Action{Verb: aci.ListWindows})
	if len(lw.Windows) != 1 || lw.Windows[0].ID != found.ID || !lw.Windows[0].Focused || lw.Windows[0].Title != "shinken-term" {
		t.Errorf("list_windows verb got %+v; want the focused shinken-term", lw.Windows)
	}
	apps, err := guest.ReadApps(filepath.Join(filepath.Dir(d.sock), "state"))
	if err != nil || len(apps) != 1 || apps[0].App != "xterm" {
		t.Errorf("recorded apps got %+v, %v; want xterm", apps, err)
	}
	syscall.Kill(d.sess.WMPid(), syscall.SIGKILL)
	deadline = time.Now().Add(5 * time.Second)
	for {
		h, err := d.cl.Health(ctx)
		if err == nil && h.X && !h.WM {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health after killing the WM got %+v, %v; want x:true wm:false", h, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestClipboardAcrossClients(t *testing.T) {
	d := startDesk(t, 64, 64, "")
	other := serveOn(t, d.sess) // a second guest on the same display: a real ICCCM peer
	ctx := ctxT(t)
	for _, text := range []string{"héllo ✓ clipboard", strings.Repeat("0123456789abcdef", 40000)} {
		act(t, d, aci.Action{Verb: aci.ClipboardSet, Text: text})
		res := act(t, other, aci.Action{Verb: aci.ClipboardGet})
		if res.Clipboard != text {
			t.Errorf("clipboard across clients: got %d bytes; want %d", len(res.Clipboard), len(text))
		}
	}
	_, err := d.cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.ClipboardSet, Text: strings.Repeat("x", guest.MaxClipboard+1)}})
	if aci.CodeOf(err) != aci.CodeTooLarge {
		t.Errorf("oversize clipboard: got %v; want too_large", err)
	}
}

func TestProtocol(t *testing.T) {
	d := startDesk(t, 64, 64, "")
	// Several calls in flight on one connection.
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		go func() {
			_, err := d.cl.Exec(context.Background(), wire.ExecArgs{Argv: []string{"sleep", "0.2"}})
			errs <- err
		}()
	}
	start := time.Now()
	busy := 0
	for i := 0; i < 20; i++ {
		if err := <-errs; aci.CodeOf(err) == aci.CodeBusy {
			busy++
		} else if err != nil {
			t.Error(err)
		}
	}
	if busy != 4 {
		t.Errorf("got %d busy of 20 concurrent execs; want 4 (16 allowed)", busy)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("20 concurrent 0.2 s execs took %v; want them in parallel", el)
	}
	// A ctx deadline becomes a typed timeout.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := d.cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.Wait, MS: 5000}}); aci.CodeOf(err) != aci.CodeTimeout {
		t.Errorf("ctx deadline: got %v; want timeout", err)
	}
	// Junk on the socket drops that connection only.
	nc, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte{0, 0, 0, 3, 0xc1, 0xc1, 0xc1})
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Error("junk frame: connection still open")
	}
	nc.Close()
	if _, err := d.cl.Health(context.Background()); err != nil {
		t.Errorf("health after a junk connection: %v", err)
	}
	// A dead guest is sandbox_died.
	d.srv.Close()
	select {
	case <-d.cl.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("client not done after the server closed")
	}
	var ae *aci.Error
	if _, err := d.cl.Health(context.Background()); !errors.As(err, &ae) || ae.Code != aci.CodeSandboxDied {
		t.Errorf("call on a closed guest: got %v; want sandbox_died", err)
	}
}
