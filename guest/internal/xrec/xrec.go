// Package xrec is a small X client for tests: a window that records the
// input events it receives (translating keys through the live keyboard map)
// and draws solid rectangles, so tests can check what guestd did on a real X
// server.
package xrec

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// Event is one recorded input event.
type Event struct {
	Type   string // press, release (buttons), keydown, keyup, motion
	Button byte
	Keysym uint32
	Rune   rune
	X, Y   int // root coordinates
	State  uint16
}

// Recorder is a window that records events.
type Recorder struct {
	c    *xgb.Conn
	Win  xproto.Window
	gc   xproto.Gcontext
	root xproto.Window

	onEvent func(Event)

	mu     sync.Mutex
	events []Event
	min    xproto.Keycode
	per    int
	syms   []xproto.Keysym
	done   chan struct{}
}

// Options tune NewWith.
type Options struct {
	// Managed makes an ordinary top-level window that the window manager
	// manages (and activates), instead of an override-redirect one.
	Managed bool
	// OnEvent, when set, is called with each event as it is recorded.
	OnEvent func(Event)
}

// New opens display, creates a w×h override-redirect window at (x, y) named
// name, maps it, focuses it, and starts recording.
func New(display string, x, y, w, h int, name string) (*Recorder, error) {
	return NewWith(display, x, y, w, h, name, Options{})
}

// NewWith is New with options.
func NewWith(display string, x, y, w, h int, name string, o Options) (*Recorder, error) {
	c, err := xgb.NewConnDisplay(display)
	if err != nil {
		return nil, err
	}
	scr := xproto.Setup(c).DefaultScreen(c)
	r := &Recorder{c: c, root: scr.Root, done: make(chan struct{}), onEvent: o.OnEvent}
	override := uint32(1)
	if o.Managed {
		override = 0
	}
	if err := r.loadKeymap(); err != nil {
		c.Close()
		return nil, err
	}
	r.Win, _ = xproto.NewWindowId(c)
	mask := uint32(xproto.EventMaskButtonPress | xproto.EventMaskButtonRelease | xproto.EventMaskKeyPress |
		xproto.EventMaskKeyRelease | xproto.EventMaskPointerMotion | xproto.EventMaskStructureNotify)
	if err := xproto.CreateWindowChecked(c, scr.RootDepth, r.Win, scr.Root, int16(x), int16(y), uint16(w), uint16(h), 0,
		xproto.WindowClassInputOutput, scr.RootVisual, xproto.CwBackPixel|xproto.CwOverrideRedirect|xproto.CwEventMask,
		[]uint32{0, override, mask}).Check(); err != nil {
		c.Close()
		return nil, err
	}
	xproto.ChangeProperty(c, xproto.PropModeReplace, r.Win, xproto.AtomWmName, xproto.AtomString, 8, uint32(len(name)), []byte(name))
	class := name + "\x00" + name + "\x00"
	xproto.ChangeProperty(c, xproto.PropModeReplace, r.Win, xproto.AtomWmClass, xproto.AtomString, 8, uint32(len(class)), []byte(class))
	if a, err := xproto.InternAtom(c, false, uint16(len("_NET_WM_PID")), "_NET_WM_PID").Reply(); err == nil {
		pid := uint32(os.Getpid())
		xproto.ChangeProperty(c, xproto.PropModeReplace, r.Win, a.Atom, xproto.AtomCardinal, 32, 1,
			[]byte{byte(pid), byte(pid >> 8), byte(pid >> 16), byte(pid >> 24)})
	}
	r.gc, _ = xproto.NewGcontextId(c)
	xproto.CreateGC(c, r.gc, xproto.Drawable(r.Win), 0, nil)
	go r.loop()
	xproto.MapWindow(c, r.Win)
	xproto.SetInputFocus(c, xproto.InputFocusParent, r.Win, xproto.TimeCurrentTime)
	if _, err := xproto.GetInputFocus(c).Reply(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Close destroys the window and closes the connection.
func (r *Recorder) Close() {
	xproto.DestroyWindow(r.c, r.Win)
	r.c.Close()
	<-r.done
}

// Focus gives the window the input focus.
func (r *Recorder) Focus() error {
	xproto.SetInputFocus(r.c, xproto.InputFocusParent, r.Win, xproto.TimeCurrentTime)
	_, err := xproto.GetInputFocus(r.c).Reply()
	return err
}

// Fill paints a rectangle of the window with an 0xRRGGBB color and waits
// until the server has drawn it.
func (r *Recorder) Fill(x, y, w, h int, rgb uint32) error {
	xproto.ChangeGC(r.c, r.gc, xproto.GcForeground, []uint32{rgb})
	xproto.PolyFillRectangle(r.c, xproto.Drawable(r.Win), r.gc, []xproto.Rectangle{{X: int16(x), Y: int16(y), Width: uint16(w), Height: uint16(h)}})
	_, err := xproto.GetInputFocus(r.c).Reply()
	return err
}

func (r *Recorder) loadKeymap() error {
	s := xproto.Setup(r.c)
	km, err := xproto.GetKeyboardMapping(r.c, s.MinKeycode, byte(s.MaxKeycode-s.MinKeycode+1)).Reply()
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.min, r.per, r.syms = s.MinKeycode, int(km.KeysymsPerKeycode), km.Keysyms
	r.mu.Unlock()
	return nil
}

func (r *Recorder) keysym(kc xproto.Keycode, state uint16) xproto.Keysym {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := int(kc-r.min) * r.per
	if i < 0 || i+r.per > len(r.syms) {
		return 0
	}
	row := r.syms[i : i+r.per]
	if state&xproto.ModMaskShift != 0 && r.per > 1 && row[1] != 0 {
		return row[1]
	}
	if state&xproto.ModMaskShift != 0 && row[0] >= 'a' && row[0] <= 'z' {
		return row[0] - 32
	}
	return row[0]
}

// KeysymRune maps a keysym to the character it types (0 for none).
func KeysymRune(ks uint32) rune {
	switch {
	case ks == 0xff0d:
		return '\n'
	case ks == 0xff09:
		return '\t'
	case ks >= 0x20 && ks <= 0x7e, ks >= 0xa0 && ks <= 0xff:
		return rune(ks)
	case ks&0xff000000 == 0x01000000:
		return rune(ks & 0xffffff)
	}
	return 0
}

func (r *Recorder) loop() {
	defer close(r.done)
	for {
		ev, err := r.c.WaitForEvent()
		if ev == nil && err == nil {
			return
		}
		var e Event
		switch v := ev.(type) {
		case xproto.MappingNotifyEvent:
			if v.Request == xproto.MappingKeyboard {
				// Waiting on a reply here is safe: xgb buffers 5000 events.
				r.loadKeymap()
			}
			continue
		case xproto.ButtonPressEvent:
			e = Event{Type: "press", Button: byte(v.Detail), X: int(v.RootX), Y: int(v.RootY), State: v.State}
		case xproto.ButtonReleaseEvent:
			e = Event{Type: "release", Button: byte(v.Detail), X: int(v.RootX), Y: int(v.RootY), State: v.State}
		case xproto.MotionNotifyEvent:
			e = Event{Type: "motion", X: int(v.RootX), Y: int(v.RootY), State: v.State}
		case xproto.KeyPressEvent:
			ks := uint32(r.keysym(v.Detail, v.State))
			e = Event{Type: "keydown", Keysym: ks, Rune: KeysymRune(ks), State: v.State}
		case xproto.KeyReleaseEvent:
			ks := uint32(r.keysym(v.Detail, v.State))
			e = Event{Type: "keyup", Keysym: ks, State: v.State}
		default:
			continue
		}
		r.mu.Lock()
		r.events = append(r.events, e)
		r.mu.Unlock()
		if r.onEvent != nil {
			r.onEvent(e)
		}
	}
}

// Done is closed when the recorder's connection has ended.
func (r *Recorder) Done() <-chan struct{} { return r.done }

// Events returns a copy of what was recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Reset forgets recorded events.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.events = nil
	r.mu.Unlock()
}

// Wait polls until ok holds for the recorded events or timeout passes.
func (r *Recorder) Wait(timeout time.Duration, ok func([]Event) bool) ([]Event, error) {
	end := time.Now().Add(timeout)
	for {
		ev := r.Events()
		if ok(ev) {
			return ev, nil
		}
		if time.Now().After(end) {
			return ev, fmt.Errorf("xrec: condition not met within %v (%d events)", timeout, len(ev))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Text is the characters typed so far (key presses with a character).
func Text(ev []Event) string {
	var b strings.Builder
	for _, e := range ev {
		if e.Type == "keydown" && e.Rune != 0 {
			b.WriteRune(e.Rune)
		}
	}
	return b.String()
}

// Of filters events by type.
func Of(ev []Event, typ string) []Event {
	var out []Event
	for _, e := range ev {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}
