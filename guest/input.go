package guest

import (
	"context"
	"math"
	"time"
	"unicode/utf8"

	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

const (
	dragStep      = 10 * time.Millisecond
	maxScroll     = 200
	maxTypeText   = 64 << 10
	typeSyncEvery = 128 // characters between round trips while typing
)

func (s *Server) verbNames() []string {
	out := make([]string, 0, len(aci.GuestVerbs)+len(aci.A11yVerbs))
	for _, v := range aci.GuestVerbs {
		out = append(out, string(v))
	}
	if s.a11y != nil {
		for _, v := range aci.A11yVerbs {
			out = append(out, string(v))
		}
	}
	return out
}

func invalid(format string, args ...any) error {
	return aci.Errorf(aci.CodeInvalidAction, format, args...)
}

// act runs one action and, when asked, observes afterwards.
func (s *Server) act(ctx context.Context, a wire.ActArgs) (*wire.ActResult, error) {
	if a.Observe != nil {
		if err := validateObserve(*a.Observe); err != nil {
			return nil, err
		}
	}
	res := &wire.ActResult{}
	// Settling starts from the damage seen before the action, so that the
	// action's own drawing is what the settle waits for.
	var m *damageMark
	if a.Observe != nil && a.Observe.Settle != nil && a.Observe.Settle.MaxMS > 0 {
		mk, err := s.x.mark(ctx)
		if err != nil {
			return nil, err
		}
		m = &mk
	}
	if err := s.resolveRefs(ctx, &a.Action); err != nil {
		return nil, err
	}
	if err := s.do(ctx, a.Action, res); err != nil {
		return nil, err
	}
	if m != nil {
		m.start = time.Now()
		m.pointer = pointerVerb(a.Action.Verb)
	}
	if a.Observe != nil {
		shot, err := s.observe(ctx, *a.Observe, m)
		if err != nil {
			return nil, err
		}
		res.Obs = shot
		res.Pointer = shot.Pointer
	}
	return res, nil
}

func (s *Server) do(ctx context.Context, a aci.Action, res *wire.ActResult) error {
	switch a.Verb {
	case aci.Wait:
		d, err := a.Duration() // range-checked against aci.Caps
		if err != nil {
			return err
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return aci.Errorf(aci.CodeTimeout, "wait: %v", ctx.Err())
		}
		return s.x.pointerInto(ctx, res)
	case aci.Screenshot:
		return s.x.pointerInto(ctx, res)
	case aci.LaunchApp:
		return s.launchApp(ctx, a, res)
	case aci.ActivateWindow:
		return s.activateWindow(ctx, a, res)
	case aci.ClipboardGet:
		return s.x.clipboardGet(ctx, res)
	case aci.ClipboardSet:
		return s.x.clipboardSet(ctx, a.Text)
	case aci.ListWindows:
		ws, err := s.x.listWindows(ctx)
		if err != nil {
			return err
		}
		res.Windows = ws.Windows
		return s.x.pointerInto(ctx, res)
	case aci.InvokeAction, aci.SetValue:
		return s.elementAct(ctx, a, res)
	case aci.Done, aci.Fail:
		return aci.Errorf(aci.CodeUnsupported, "%s is handled by the env server, not the guest", a.Verb)
	case aci.Click, aci.DoubleClick, aci.RightClick, aci.Move, aci.Scroll, aci.Drag, aci.MouseDown, aci.MouseUp,
		aci.TypeText, aci.Key:
		return s.x.input(ctx, a, res)
	case "":
		return invalid("missing verb")
	default:
		return aci.Errorf(aci.CodeUnknownVerb, "unknown verb %q", a.Verb)
	}
}

func (d *display) pointerInto(ctx context.Context, res *wire.ActResult) error {
	return d.run(ctx, 0, func(x *xconn) error {
		p, err := x.pointer()
		res.Pointer = p
		return err
	})
}

// point resolves a target to a screen pixel; off-screen or malformed targets
// are invalid_action.
func point(t aci.Target, w, h int) (int, int, error) {
	if math.IsNaN(t.X) || math.IsNaN(t.Y) || math.IsInf(t.X, 0) || math.IsInf(t.Y, 0) {
		return 0, 0, invalid("target (%v, %v) is not a number", t.X, t.Y)
	}
	switch t.Kind {
	case aci.PointPx, "":
		if t.X < 0 || t.Y < 0 || t.X >= float64(w) || t.Y >= float64(h) {
			return 0, 0, invalid("point_px (%v, %v) is off the %dx%d screen", t.X, t.Y, w, h)
		}
		return int(t.X), int(t.Y), nil
	case aci.PointNorm:
		if t.X < 0 || t.Y < 0 || t.X > 1 || t.Y > 1 {
			return 0, 0, invalid("point_norm (%v, %v) is outside 0..1", t.X, t.Y)
		}
		return int(math.Round(t.X * float64(w-1))), int(math.Round(t.Y * float64(h-1))), nil
	default:
		return 0, 0, invalid("unknown target kind %q", t.Kind)
	}
}

func buttonOf(name string, def byte) (byte, error) {
	switch name {
	case "":
		return def, nil
	case "left":
		return 1, nil
	case "middle":
		return 2, nil
	case "right":
		return 3, nil
	}
	return 0, invalid("unknown button %q (want left, middle or right)", name)
}

// input validates an input action, then runs it on the display.
func (d *display) input(ctx context.Context, a aci.Action, res *wire.ActResult) error {
	var mods []xproto.Keysym
	for _, m := range a.Modifiers {
		ks, ok := keyNames[lower(m)]
		if !ok || !isModifier(ks) {
			return invalid("unknown modifier %q", m)
		}
		mods = append(mods, ks)
	}
	t, hasPoint := a.Point()
	if !hasPoint && (a.X != nil || a.Y != nil) {
		return invalid("%s: x and y must come together", a.Verb)
	}
	var chords [][]xproto.Keysym
	var expect time.Duration
	def := byte(1)
	switch a.Verb {
	case aci.Click, aci.DoubleClick, aci.RightClick, aci.Move, aci.Drag:
		if !hasPoint {
			return invalid("%s needs a target", a.Verb)
		}
		if a.Verb == aci.RightClick {
			def = 3
		}
		if a.Verb == aci.Drag {
			if a.To == nil {
				return invalid("drag needs to")
			}
			var err error
			if expect, err = a.Duration(); err != nil { // range-checked against aci.Caps
				return err
			}
		}
	case aci.Scroll:
		if a.DX == 0 && a.DY == 0 {
			return invalid("scroll needs dx or dy")
		}
		if abs(a.DX) > maxScroll || abs(a.DY) > maxScroll {
			return invalid("scroll: at most %d steps per axis", maxScroll)
		}
	case aci.TypeText:
		if !utf8.ValidString(a.Text) {
			return invalid("type_text: text is not valid UTF-8")
		}
		if len(a.Text) > maxTypeText {
			return invalid("type_text: %d bytes exceeds %d", len(a.Text), maxTypeText)
		}
		for _, r := range a.Text {
			if _, ok := runeKeysym(r); !ok {
				return invalid("type_text: cannot type control character %U", r)
			}
		}
		expect = time.Duration(len(a.Text)) * 50 * time.Microsecond
	case aci.Key:
		var err error
		if chords, err = parseKeys(a.Keys); err != nil {
			return invalid("key: %v", err)
		}
	}
	button, err := buttonOf(a.Button, def)
	if err != nil {
		return err
	}
	return d.run(ctx, expect, func(x *xconn) error {
		var px, py int
		if hasPoint {
			if px, py, err = point(t, x.w, x.h); err != nil {
				return err
			}
		}
		var err error
		switch a.Verb {
		case aci.Move:
			x.motion(px, py)
		case aci.Click, aci.DoubleClick, aci.RightClick:
			n := 1
			if a.Verb == aci.DoubleClick {
				n = 2
			}
			err = x.withKeys(mods, func() error {
				x.motion(px, py)
				for i := 0; i < n; i++ {
					x.button(button, true)
					x.button(button, false)
				}
				return nil
			})
		case aci.MouseDown, aci.MouseUp:
			if hasPoint {
				x.motion(px, py)
			}
			x.button(button, a.Verb == aci.MouseDown)
		case aci.Scroll:
			if hasPoint {
				x.motion(px, py)
			}
			err = x.withKeys(mods, func() error {
				x.wheel(a.DY, 5, 4)
				x.wheel(a.DX, 7, 6)
				return nil
			})
		case aci.Drag:
			var tx, ty int
			if tx, ty, err = point(*a.To, x.w, x.h); err != nil {
				return err
			}
			err = x.withKeys(mods, func() error { return x.drag(ctx, px, py, tx, ty, button, expect) })
		case aci.TypeText:
			err = x.typeText(a.Text)
		case aci.Key:
			for _, ch := range chords {
				if err = x.chord(ch); err != nil {
					break
				}
			}
		}
		if err != nil {
			return err
		}
		p, err := x.pointer() // also the round trip that proves the input was processed
		res.Pointer = p
		return err
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
	return string(b)
}

func isModifier(ks xproto.Keysym) bool { return ks >= 0xffe1 && ks <= 0xffee }

func (x *xconn) motion(px, py int) {
	xtest.FakeInput(x.c, xproto.MotionNotify, 0, 0, x.root, int16(px), int16(py), 0)
}

func (x *xconn) button(b byte, down bool) {
	typ := byte(xproto.ButtonRelease)
	if down {
		typ = xproto.ButtonPress
	}
	xtest.FakeInput(x.c, typ, b, 0, x.root, 0, 0, 0)
}

func (x *xconn) key(kc xproto.Keycode, down bool) {
	typ := byte(xproto.KeyRelease)
	if down {
		typ = xproto.KeyPress
	}
	xtest.FakeInput(x.c, typ, byte(kc), 0, x.root, 0, 0, 0)
}

// wheel clicks button pos (n > 0) or neg (n < 0) |n| times.
func (x *xconn) wheel(n int, pos, neg byte) {
	b := pos
	if n < 0 {
		b, n = neg, -n
	}
	for i := 0; i < n; i++ {
		x.button(b, true)
		x.button(b, false)
	}
}

func (x *xconn) drag(ctx context.Context, fx, fy, tx, ty int, b byte, d time.Duration) error {
	x.motion(fx, fy)
	x.button(b, true)
	defer x.button(b, false) // never leave a button held
	steps := max(2, int(d/dragStep))
	for i := 1; i <= steps; i++ {
		select {
		case <-ctx.Done():
			return aci.Errorf(aci.CodeTimeout, "drag: %v", ctx.Err())
		case <-time.After(d / time.Duration(steps)):
		}
		x.motion(fx+(tx-fx)*i/steps, fy+(ty-fy)*i/steps)
		if err := x.sync(); err != nil {
			return err
		}
	}
	return nil
}

// withKeys holds the given keys down around fn.
func (x *xconn) withKeys(keys []xproto.Keysym, fn func() error) error {
	var held []xproto.Keycode
	defer func() {
		for i := len(held) - 1; i >= 0; i-- {
			x.key(held[i], false)
		}
	}()
	for _, ks := range keys {
		c, err := x.resolve(ks)
		if err != nil {
			return err
		}
		x.key(c.kc, true)
		held = append(held, c.kc)
	}
	return fn()
}

// chord presses keys in order and releases them in reverse; a key that lives
// at the shifted level gets Shift added.
func (x *xconn) chord(keys []xproto.Keysym) error {
	var all []xproto.Keysym
	shift := false
	for _, ks := range keys {
		if ks == ksShiftL || ks == 0xffe2 {
			shift = true
		}
	}
	for _, ks := range keys {
		c, err := x.resolve(ks)
		if err != nil {
			return err
		}
		if c.shift && !shift {
			all = append(all, ksShiftL)
			shift = true
		}
	}
	all = append(all, keys...)
	// Shift (when added) goes before the non-modifiers; modifiers keep order.
	return x.withKeys(all[:len(all)-1], func() error {
		c, err := x.resolve(all[len(all)-1])
		if err != nil {
			return err
		}
		x.key(c.kc, true)
		x.key(c.kc, false)
		return nil
	})
}

// typeText types each character, with Shift for shifted levels and a
// borrowed keycode for characters the map lacks. A round trip every few
// characters keeps the request queue short, so long strings never stall.
func (x *xconn) typeText(text string) error {
	shiftKC := xproto.Keycode(0)
	i := 0
	for _, r := range text {
		ks, _ := runeKeysym(r)
		c, err := x.resolve(ks)
		if err != nil {
			return err
		}
		if c.shift && shiftKC == 0 {
			sc, err := x.resolve(ksShiftL)
			if err != nil {
				return err
			}
			shiftKC = sc.kc
		}
		if c.shift {
			x.key(shiftKC, true)
		}
		x.key(c.kc, true)
		x.key(c.kc, false)
		if c.shift {
			x.key(shiftKC, false)
		}
		if i++; i%typeSyncEvery == 0 {
			if err := x.sync(); err != nil {
				return err
			}
		}
	}
	return nil
}
