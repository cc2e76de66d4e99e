package guest_test

import (
	"testing"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/internal/xrec"
	"github.com/shinken-rl/shinken/guest/wire"
)

// stepShot runs a, observing afterwards with the shipped default settle, as
// the env server does for a step; have is the frame the caller holds.
func stepShot(t testing.TB, d *desk, a aci.Action, have string) *wire.Shot {
	t.Helper()
	res, err := d.cl.Act(ctxT(t), wire.ActArgs{Action: a, Observe: &wire.ObserveArgs{
		Observe: aci.Observe{Format: aci.FormatRaw, Settle: defaultSettle()}, IfNoneMatch: []string{have}}})
	if err != nil {
		t.Fatalf("act %s: %v", a.Verb, err)
	}
	if res.Obs == nil || res.Obs.Settle == nil {
		t.Fatalf("act %s: got obs %+v; want a settled observation", a.Verb, res.Obs)
	}
	return res.Obs
}

// TestStepFrameShowsTheAction drives each shipped app with click, type, key,
// scroll and a menu: whenever the app redraws, the step's own observation
// differs from the frame before the action and already is the frame the
// screen settles on; when nothing was drawn the step says so and answers
// not_modified. The test never waits on its own: the step's settle is all.
// It runs with the damage windows alone and with the idle settle, which must
// end early on most steps and still return the frame the screen settles on;
// in Chromium most steps must end on the browser's frames.
func TestStepFrameShowsTheAction(t *testing.T) {
	for _, mode := range []string{"damage", "idle"} {
		t.Run(mode, func(t *testing.T) { stepFrameShowsTheAction(t, mode == "idle") })
	}
}

func stepFrameShowsTheAction(t *testing.T, idle bool) {
	for _, app := range shippedApps() {
		t.Run(app.app, func(t *testing.T) {
			d := appDeskIdle(t, idle)
			win := launchApp(t, d, app)
			drew, idled, framed := 0, 0, 0
			for _, aa := range app.acts {
				t.Run(aa.name, func(t *testing.T) {
					// The frame before the action: quiet long enough that an
					// app's own late redraw (pcmanfm closing its type-ahead
					// search on a timer) is not mistaken for the action's.
					pre := settled(t, d, &aci.Settle{QuietMS: 800, MaxMS: 5000})
					got := stepShot(t, d, aa.act(win), pre.Hash)
					// What the screen settles on, long after the step.
					final := settled(t, d, &aci.Settle{FirstMS: 500, QuietMS: 500, MaxMS: 5000})
					st := got.Settle
					t.Logf("settle %+v", st)
					if st.Idle {
						idled++
					}
					if st.Frame {
						framed++
					}
					if st.Frame && !app.frames {
						t.Errorf("settle got %+v; ended on frames, yet %s answers for none", st, app.app)
					}
					if st.Idle && !idle {
						t.Errorf("settle got %+v; idle without SettleIdle", st)
					}
					switch {
					case st.TimedOut:
						t.Errorf("settle timed out (%+v); want the app to settle within the ceiling", st)
					case final.Hash != pre.Hash:
						drew++
						if got.Hash == pre.Hash || got.NotModified {
							t.Errorf("the app redrew, but the step returned the pre-action frame (settle %+v)", st)
						} else if got.Hash != final.Hash {
							t.Errorf("the step's frame is not the settled one: the app kept drawing after the step returned (settle %+v)", st)
						}
						if !st.Damaged {
							t.Errorf("settle got %+v; want damaged: the screen changed (pre %s step %s final %s)", st, pre.Hash, got.Hash, final.Hash)
						}
					case !st.Damaged:
						if !got.NotModified || got.Hash != pre.Hash {
							t.Errorf("nothing was damaged, yet got not_modified=%v hash %s; want not_modified %s", got.NotModified, got.Hash, pre.Hash)
						}
					}
					if aa.undo != nil {
						act(t, d, *aa.undo)
					}
				})
			}
			if drew == 0 {
				t.Errorf("no action made %s redraw; the test drives nothing", app.app)
			}
			if app.frames && framed*2 < len(app.acts) {
				t.Errorf("%d of %d steps ended on the app's frames; want most", framed, len(app.acts))
			}
			if idle && !app.busy && idled*2 < len(app.acts) {
				t.Errorf("%d of %d steps settled idle; want most: the idle settle does not see the desktop go quiet", idled, len(app.acts))
			}
		})
	}
}

// TestNoChangeIsNotModified: an action that draws nothing answers
// not_modified after the first-damage window, without reaching the ceiling,
// and an observe with no damage since the last capture is not_modified.
func TestNoChangeIsNotModified(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	recorder(t, d, 0, 0, testW, testH)
	pre := settled(t, d, &aci.Settle{QuietMS: 100, MaxMS: 3000})
	got := stepShot(t, d, aci.Action{Verb: aci.Move, Target: aci.Px(300, 200)}, pre.Hash)
	st, def := got.Settle, defaultSettle()
	if !got.NotModified || got.Hash != pre.Hash {
		t.Errorf("pointer move: got not_modified=%v; want not_modified (the cursor is not in the frame)", got.NotModified)
	}
	if st.Damaged || st.TimedOut || st.WaitedMS >= int64(def.MaxMS) {
		t.Errorf("settle got %+v; want undamaged, ended by the %d ms first-damage window, not the %d ms ceiling", st, def.FirstMS, def.MaxMS)
	}
	again, err := d.cl.Screenshot(ctxT(t), wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG, Settle: def}, IfNoneMatch: []string{pre.Hash}})
	if err != nil {
		t.Fatal(err)
	}
	if !again.NotModified || again.Data != nil || again.Settle == nil || again.Settle.Damaged {
		t.Errorf("observe with no damage got not_modified=%v settle %+v; want not_modified, undamaged", again.NotModified, again.Settle)
	}
}

// TestDamageSettlesOnTheDrawing: a window that draws a while after the input
// is waited for; the frame shows the drawing and settle says damaged.
func TestDamageSettlesOnTheDrawing(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	r := recorder(t, d, 0, 0, testW, testH)
	r.Fill(0, 0, testW, testH, 0)
	pre := settled(t, d, &aci.Settle{QuietMS: 100, MaxMS: 3000})
	// The recorder draws when it sees the click: an app answering input.
	go func() {
		if _, err := r.Wait(5*time.Second, func(ev []xrec.Event) bool { return len(presses(ev)) > 0 }); err == nil {
			r.Fill(10, 10, 50, 50, 0xff0000)
		}
	}()
	got := stepShot(t, d, aci.Action{Verb: aci.Click, Target: aci.Px(20, 20)}, pre.Hash)
	if got.NotModified || pixel(got, 15, 15) != [3]byte{255, 0, 0} {
		t.Errorf("got not_modified=%v; want the red square the click caused", got.NotModified)
	}
	if !got.Settle.Damaged || got.Settle.TimedOut {
		t.Errorf("settle got %+v; want damaged, not timed out", got.Settle)
	}
}

// TestAnimationHitsTheCeiling: a window that redraws on a timer never goes
// quiet; the step settles at the ceiling and says timed_out.
func TestAnimationHitsTheCeiling(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	stop := animate(t, d.sess.Display(), 10*time.Millisecond)
	defer stop()
	s := &aci.Settle{FirstMS: 100, QuietMS: 50, MaxMS: 400}
	res, err := d.cl.Act(ctxT(t), wire.ActArgs{Action: aci.Action{Verb: aci.Move, Target: aci.Px(5, 5)},
		Observe: &wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw, Settle: s}}})
	if err != nil {
		t.Fatal(err)
	}
	st := res.Obs.Settle
	if st == nil || !st.TimedOut || !st.Damaged || st.WaitedMS < int64(s.MaxMS) {
		t.Errorf("settle got %+v; want timed_out and damaged after at least %d ms", st, s.MaxMS)
	}
}

// animate maps a small window that repaints itself every period until stop.
func animate(t testing.TB, display string, period time.Duration) (stop func()) {
	t.Helper()
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		t.Fatal(err)
	}
	scr := xproto.Setup(c).DefaultScreen(c)
	win, _ := xproto.NewWindowId(c)
	xproto.CreateWindow(c, scr.RootDepth, win, scr.Root, 400, 300, 64, 64, 0, xproto.WindowClassInputOutput, scr.RootVisual,
		xproto.CwBackPixel|xproto.CwOverrideRedirect, []uint32{0, 1})
	gc, _ := xproto.NewGcontextId(c)
	xproto.CreateGC(c, gc, xproto.Drawable(win), 0, nil)
	xproto.MapWindow(c, win)
	if _, err := xproto.GetInputFocus(c).Reply(); err != nil {
		t.Fatal(err)
	}
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for i := uint32(0); ; i++ {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			xproto.ChangeGC(c, gc, xproto.GcForeground, []uint32{i * 0x10203 & 0xffffff})
			xproto.PolyFillRectangle(c, xproto.Drawable(win), gc, []xproto.Rectangle{{Width: 64, Height: 64}})
			if _, err := xproto.GetInputFocus(c).Reply(); err != nil {
				return
			}
		}
	}()
	return func() { close(quit); <-done; c.Close() }
}
