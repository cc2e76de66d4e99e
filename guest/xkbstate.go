package guest

import (
	"errors"
	"fmt"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
)

// The keyboard's XKB state, which an in-place reset returns to the fresh
// desktop's (docs/architecture.md, "Sandbox lifecycle and reset in
// place"): the locked and latched modifiers and group (Caps Lock left on,
// Control locked, a second layout's group locked) and the XKB controls
// (AccessX's slow, bounce and sticky keys, the auto-repeat delay and rate,
// per-key auto-repeat). Each of these outlived the episode that set it and
// made a later episode's typing fail. xgb has no XKB binding, so these are
// the extension's requests by hand (XKBproto.h: UseExtension 0, GetState
// 4, LatchLockState 5, GetControls 6, SetControls 7), little-endian as xgb
// speaks.

const xkbUseCoreKbd = 0x100

// xkbInitial is the core keyboard's XKB state as guestd first found it.
type xkbInitial struct {
	lockedMods, lockedGroup byte
	controls                []byte // the GetControls reply, whole
}

// xkbOpcode enables XKB on x's connection (a client must ask before any
// other XKB request) and returns its major opcode; 0 without XKB.
func (x *xconn) xkbOpcode() (byte, error) {
	if x.xkbOp != 0 {
		return x.xkbOp, nil
	}
	e, err := xproto.QueryExtension(x.c, 9, "XKEYBOARD").Reply()
	if err != nil {
		return 0, err
	}
	if !e.Present {
		return 0, nil
	}
	r, err := x.xkbCall(e.MajorOpcode, 0, []byte{1, 0, 0, 0}) // wanted 1.0
	if err != nil {
		return 0, fmt.Errorf("xkb: use extension: %w", err)
	}
	if r[1] == 0 {
		return 0, errors.New("xkb: the server refused version 1.0")
	}
	x.xkbOp = e.MajorOpcode
	return x.xkbOp, nil
}

// xkbRequest sends XKB request minor with body (a multiple of 4 bytes).
func xkbRequest(op, minor byte, body []byte) []byte {
	b := make([]byte, 4+len(body))
	b[0], b[1] = op, minor
	xgb.Put16(b[2:], uint16(len(b)/4))
	copy(b[4:], body)
	return b
}

// xkbCall sends a request that has a reply and returns the reply's bytes.
func (x *xconn) xkbCall(op, minor byte, body []byte) ([]byte, error) {
	ck := x.c.NewCookie(true, true)
	x.c.NewRequest(xkbRequest(op, minor, body), ck)
	return ck.Reply()
}

// xkbDo sends a request without a reply and waits for its error, if any.
func (x *xconn) xkbDo(op, minor byte, body []byte) error {
	ck := x.c.NewCookie(true, false)
	x.c.NewRequest(xkbRequest(op, minor, body), ck)
	return ck.Check()
}

// deviceBody is a request body that names the core keyboard and pads.
var deviceBody = []byte{xkbUseCoreKbd & 0xff, xkbUseCoreKbd >> 8, 0, 0}

// captureXKB reads the core keyboard's XKB state; nil without XKB.
func (x *xconn) captureXKB() (*xkbInitial, error) {
	op, err := x.xkbOpcode()
	if err != nil || op == 0 {
		return nil, err
	}
	st, err := x.xkbCall(op, 4, deviceBody)
	if err != nil {
		return nil, fmt.Errorf("xkb: get state: %w", err)
	}
	ctl, err := x.xkbCall(op, 6, deviceBody)
	if err != nil {
		return nil, fmt.Errorf("xkb: get controls: %w", err)
	}
	if len(st) < 32 || len(ctl) < 92 {
		return nil, fmt.Errorf("xkb: short replies (%d, %d bytes)", len(st), len(ctl))
	}
	return &xkbInitial{lockedMods: st[11], lockedGroup: st[13], controls: ctl[:92]}, nil
}

// resetXKB puts the controls back as captured, then the locks, and clears
// every latch.
func (x *xconn) resetXKB(in *xkbInitial) error {
	if in == nil {
		return nil
	}
	op, err := x.xkbOpcode()
	if err != nil || op == 0 {
		return fmt.Errorf("xkb: %v (the extension was there when the desktop started)", err)
	}
	g := in.controls // a GetControls reply
	b := make([]byte, 96)
	xgb.Put16(b[0:], xkbUseCoreKbd)
	b[2], b[3] = 0xff, g[13] // internal real modifiers
	b[4], b[5] = 0xff, g[14] // ignore-lock real modifiers
	xgb.Put16(b[6:], 0xffff)
	copy(b[8:10], g[16:18]) // internal virtual modifiers
	xgb.Put16(b[10:], 0xffff)
	copy(b[12:14], g[18:20])   // ignore-lock virtual modifiers
	b[14], b[15] = g[8], g[10] // mouse keys' default button, groups wrap
	copy(b[16:18], g[38:40])   // AccessX options
	xgb.Put32(b[20:], 0x1fff)  // every boolean control...
	copy(b[24:28], g[56:60])   // ...enabled as it was
	xgb.Put32(b[28:], 0xf8001fff)
	copy(b[32:48], g[20:36]) // repeat, slow keys, debounce, mouse keys
	copy(b[48:50], g[36:38]) // mouse keys' curve
	copy(b[50:52], g[40:42]) // AccessX timeout
	copy(b[52:60], g[48:56]) // its controls mask and values
	copy(b[60:64], g[42:46]) // its options mask and values
	copy(b[64:96], g[60:92]) // per-key auto-repeat
	if err := x.xkbDo(op, 7, b); err != nil {
		return fmt.Errorf("xkb: set controls: %w", err)
	}
	// Every modifier lock and latch, and the group's, to the fresh state.
	ll := make([]byte, 12)
	xgb.Put16(ll[0:], xkbUseCoreKbd)
	ll[2], ll[3] = 0xff, in.lockedMods
	ll[4], ll[5] = 1, in.lockedGroup
	ll[6], ll[7] = 0xff, 0
	ll[9] = 1 // latch group, to 0
	if err := x.xkbDo(op, 5, ll); err != nil {
		return fmt.Errorf("xkb: latch and lock state: %w", err)
	}
	return nil
}
