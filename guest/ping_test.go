package guest_test

import (
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

// busyApp maps a window that answers _NET_WM_PING and, on a button press,
// works for busy (an app on a loaded host) before it draws red; it reads
// its next event, a ping among them, only after drawing. With closes, the
// press destroys the window instead and the app reads nothing more.
func busyApp(t *testing.T, display string, busy time.Duration, closes bool) {
	t.Helper()
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	atom := func(name string) xproto.Atom {
		r, err := xproto.InternAtom(c, false, uint16(len(name)), name).Reply()
		if err != nil {
			t.Fatal(err)
		}
		return r.Atom
	}
	protocols, ping := atom("WM_PROTOCOLS"), atom("_NET_WM_PING")
	scr := xproto.Setup(c).DefaultScreen(c)
	win, _ := xproto.NewWindowId(c)
	xproto.CreateWindow(c, scr.RootDepth, win, scr.Root, 0, 0, testW, testH, 0, xproto.WindowClassInputOutput, scr.RootVisual,
		xproto.CwBackPixel|xproto.CwEventMask, []uint32{0, xproto.EventMaskButtonPress})
	xproto.ChangeProperty(c, xproto.PropModeReplace, win, protocols, xproto.AtomAtom, 32, 1,
		[]byte{byte(ping), byte(ping >> 8), byte(ping >> 16), byte(ping >> 24)})
	gc, _ := xproto.NewGcontextId(c)
	xproto.CreateGC(c, gc, xproto.Drawable(win), xproto.GcForeground, []uint32{0xff0000})
	xproto.MapWindow(c, win)
	if _, err := xproto.GetInputFocus(c).Reply(); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			ev, err := c.WaitForEvent()
			if ev == nil && err == nil {
				return
			}
			switch e := ev.(type) {
			case xproto.ButtonPressEvent:
				time.Sleep(busy) // the app's own work, not the test waiting
				if closes {
					xproto.DestroyWindow(c, win)
					xproto.GetInputFocus(c).Reply()
					return
				}
				xproto.PolyFillRectangle(c, xproto.Drawable(win), gc, []xproto.Rectangle{{Width: 100, Height: 100}})
				xproto.GetInputFocus(c).Reply()
			case xproto.ClientMessageEvent:
				if e.Type == protocols && xproto.Atom(e.Data.Data32[0]) == ping {
					e.Window = scr.Root
					xproto.SendEvent(c, false, scr.Root, xproto.EventMaskSubstructureNotify|xproto.EventMaskSubstructureRedirect, string(e.Bytes()))
					xproto.GetInputFocus(c).Reply()
				}
			}
		}
	}()
}

// TestSettleWaitsForTheAppToTakeTheInput: an app that reads its input late
// (busy when it came) is pinged after the action, and the settle's first
// window counts from its answer, so the step's frame shows what the click
// drew; the first window alone (200 ms from the input) would have closed on
// the frame before it.
func TestSettleWaitsForTheAppToTakeTheInput(t *testing.T) {
	const busy = 700 * time.Millisecond
	got := clickBusyApp(t, busy, false)
	if got.NotModified || pixel(got, 15, 15) != [3]byte{255, 0, 0} {
		t.Errorf("got not_modified=%v, pixel %v (settle %+v); want the red square the click drew", got.NotModified, pixel(got, 15, 15), got.Settle)
	}
	if st := got.Settle; st == nil || st.TimedOut || st.InputMS < busy.Milliseconds()/2 {
		t.Errorf("settle got %+v; want input_ms of at least half the app's %v of work (it counts from after the click), not timed out", st, busy)
	}
}

// TestSettlePingOfAClosedWindow: a click that closes the app's window (the
// app reads no ping after it) ends the wait for its answer when the window
// goes, not at the ceiling.
func TestSettlePingOfAClosedWindow(t *testing.T) {
	if st := clickBusyApp(t, 100*time.Millisecond, true).Settle; st == nil || st.TimedOut || st.InputMS == 0 {
		t.Errorf("settle got %+v; want the window's end taken as the answer (input_ms set), not the ceiling", st)
	}
}

// clickBusyApp clicks a busyApp on a desktop of its own and returns the
// step's observation, settled as a script's step is (an 8 s ceiling).
func clickBusyApp(t *testing.T, busy time.Duration, closes bool) *wire.Shot {
	t.Helper()
	d := startDesk(t, testW, testH, "")
	busyApp(t, d.sess.Display(), busy, closes)
	pre := settled(t, d, &aci.Settle{QuietMS: 100, MaxMS: 3000})
	s := &aci.Settle{FirstMS: 200, QuietMS: 300, MaxMS: 8000}
	res, err := d.cl.Act(ctxT(t), wire.ActArgs{Action: aci.Action{Verb: aci.Click, Target: aci.Px(20, 20)},
		Observe: &wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw, Settle: s}, IfNoneMatch: []string{pre.Hash}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Obs
}
