package guest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jezek/xgb/res"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
)

// The X server's side of a reset in place (docs/architecture.md, "Sandbox
// lifecycle and reset in place"): the state guestd first found it in
// (xInitial, recorded on the display's first connection) and the return to
// it (resetX).

// xInitial is the X server's state as guestd first found it (the desktop
// just started): what an in-place reset returns the server to.
type xInitial struct {
	minKC     xproto.Keycode
	per       byte
	syms      []xproto.Keysym
	modPer    byte
	modCodes  []xproto.Keycode
	rootProps map[xproto.Atom]bool
	rootVals  map[xproto.Atom]propVal // the root's properties as the fresh desktop had them
	kbd       *xproto.GetKeyboardControlReply
	ptr       *xproto.GetPointerControlReply
	saver     *xproto.GetScreenSaverReply
	fontPath  []xproto.Str
	ptrMap    []byte      // the pointer's button mapping
	xkb       *xkbInitial // locks, latches and controls (xkbstate.go); nil without XKB
}

// captureInitial records the keyboard and modifier mappings, the root
// window's properties, keyboard and pointer control, the screen saver and
// the font path, once per display (on its first connection, which
// the provider's readiness hello makes before any agent acts).
func (x *xconn) captureInitial() error {
	if x.d.initial != nil {
		return nil
	}
	s := xproto.Setup(x.c)
	n := byte(s.MaxKeycode - s.MinKeycode + 1)
	km, err := xproto.GetKeyboardMapping(x.c, s.MinKeycode, n).Reply()
	if err != nil {
		return err
	}
	mm, err := xproto.GetModifierMapping(x.c).Reply()
	if err != nil {
		return err
	}
	pl, err := xproto.ListProperties(x.c, x.root).Reply()
	if err != nil {
		return err
	}
	kbd, err := xproto.GetKeyboardControl(x.c).Reply()
	if err != nil {
		return err
	}
	ptr, err := xproto.GetPointerControl(x.c).Reply()
	if err != nil {
		return err
	}
	saver, err := xproto.GetScreenSaver(x.c).Reply()
	if err != nil {
		return err
	}
	fp, err := xproto.GetFontPath(x.c).Reply()
	if err != nil {
		return err
	}
	pm, err := xproto.GetPointerMapping(x.c).Reply()
	if err != nil {
		return err
	}
	xkb, err := x.captureXKB()
	if err != nil {
		return err
	}
	in := &xInitial{minKC: s.MinKeycode, per: km.KeysymsPerKeycode, syms: km.Keysyms,
		modPer: mm.KeycodesPerModifier, modCodes: mm.Keycodes, rootProps: map[xproto.Atom]bool{},
		kbd: kbd, ptr: ptr, saver: saver, fontPath: fp.Path, ptrMap: pm.Map, xkb: xkb}
	if err := x.recordRoot(in, pl.Atoms); err != nil {
		return err
	}
	x.d.initial = in
	return nil
}

// recordRoot records the root's properties atoms, and their values, as the
// fresh desktop's.
func (x *xconn) recordRoot(in *xInitial, atoms []xproto.Atom) error {
	in.rootProps = map[xproto.Atom]bool{}
	in.rootVals = map[xproto.Atom]propVal{}
	for _, a := range atoms {
		in.rootProps[a] = true
		v, err := x.rootProp(a)
		if err != nil {
			return err
		}
		in.rootVals[a] = v
	}
	return nil
}

// recordFreshWM records the root's properties again once a reset started
// the window manager afresh: its pid, its check window and the rest are the
// fresh desktop's now.
func (x *xconn) recordFreshWM() error {
	pl, err := xproto.ListProperties(x.c, x.root).Reply()
	if err != nil {
		return err
	}
	return x.recordRoot(x.d.initial, pl.Atoms)
}

// propVal is one property's type, format and bytes.
type propVal struct {
	typ    xproto.Atom
	format byte
	value  string
}

// rootProp reads a root window property whole (at most 256 KiB).
func (x *xconn) rootProp(a xproto.Atom) (propVal, error) {
	r, err := xproto.GetProperty(x.c, false, x.root, a, xproto.AtomAny, 0, 1<<16).Reply()
	if err != nil {
		return propVal{}, err
	}
	return propVal{typ: r.Type, format: r.Format, value: string(r.Value)}, nil
}

// wmVolatile are root properties that describe the episode's windows, not
// the window manager's own state; with every window gone the window
// manager publishes them empty again.
var wmVolatile = []string{"_NET_ACTIVE_WINDOW", "_NET_CLIENT_LIST", "_NET_CLIENT_LIST_STACKING"}

// wmDesktop are the window manager's desktop settings, which any client
// may change with an EWMH message to the root, and which a message puts
// back (cheaper than starting the window manager afresh).
var wmDesktop = []string{"_NET_NUMBER_OF_DESKTOPS", "_NET_CURRENT_DESKTOP", "_NET_SHOWING_DESKTOP"}

// rootDiff lists the root properties the fresh desktop had whose value
// differs now, volatile ones left out.
func (x *xconn) rootDiff() ([]xproto.Atom, error) {
	skip := map[xproto.Atom]bool{}
	for _, n := range wmVolatile {
		a, err := x.atom(n)
		if err != nil {
			return nil, err
		}
		skip[a] = true
	}
	var out []xproto.Atom
	for a, want := range x.d.initial.rootVals {
		if skip[a] {
			continue
		}
		got, err := x.rootProp(a)
		if err != nil {
			return nil, err
		}
		if got != want {
			out = append(out, a)
		}
	}
	return out, nil
}

// rootChanged reports whether the episode changed the window manager's
// state as the root's properties show it (desktops, names, work area, its
// check window). Desktop settings are asked back with EWMH messages and
// waited for (at most wmRepair); whatever still differs is put back on the
// root and reported: the reset then starts the window manager afresh (it
// reads the restored properties at start-up). Call it once the window
// manager has let go of the episode's windows (awaitNoClients).
func (x *xconn) rootChanged(ctx context.Context) (bool, error) {
	diff, err := x.rootDiff()
	if err != nil || len(diff) == 0 {
		return false, err
	}
	desk := map[xproto.Atom]bool{}
	for _, n := range wmDesktop {
		a, err := x.atom(n)
		if err != nil {
			return false, err
		}
		desk[a] = true
	}
	asked := false
	for _, a := range diff {
		want := x.d.initial.rootVals[a]
		if !desk[a] || want.format != 32 || len(want.value) != 4 {
			asked = false
			break
		}
		v := uint32(want.value[0]) | uint32(want.value[1])<<8 | uint32(want.value[2])<<16 | uint32(want.value[3])<<24
		ev := xproto.ClientMessageEvent{Format: 32, Window: x.root, Type: a,
			Data: xproto.ClientMessageDataUnionData32New([]uint32{v, 0, 0, 0, 0})}
		xproto.SendEvent(x.c, false, x.root, xproto.EventMaskSubstructureNotify|xproto.EventMaskSubstructureRedirect, string(ev.Bytes()))
		asked = true
	}
	if asked {
		deadline := time.Now().Add(wmRepair)
		for len(diff) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
			if err := x.sync(); err != nil {
				return false, err
			}
			if diff, err = x.rootDiff(); err != nil {
				return false, err
			}
		}
		if len(diff) == 0 {
			return false, nil
		}
	}
	for _, a := range diff {
		want := x.d.initial.rootVals[a]
		if want.typ == 0 {
			xproto.DeleteProperty(x.c, x.root, a)
			continue
		}
		unit := max(int(want.format)/8, 1)
		xproto.ChangeProperty(x.c, xproto.PropModeReplace, x.root, a, want.typ, want.format, uint32(len(want.value)/unit), []byte(want.value))
	}
	return true, x.sync()
}

// wmRepair bounds the wait for the window manager to apply the desktop
// settings a reset asks back.
const wmRepair = 500 * time.Millisecond

// resetX returns the X server to its initial state over guestd's own
// connection: held keys and buttons released, the keyboard and modifier
// mappings, the keyboard's XKB locks, latches and controls, the pointer's
// button mapping, keyboard and pointer control (auto-repeat, bell, acceleration),
// the screen saver (reset to inactive) and the font path restored, the selections guestd owns given up, cut buffers and
// wallpaper removed, the root redrawn with its default background, the
// resources of departed clients freed, the pointer centred (where a fresh
// X server puts it) and focus returned to the pointer root. The episode's
// clients are gone already (quiesce kills them first), so their windows
// and selections went with them.
func (x *xconn) resetX(keep map[int]bool) error {
	in := x.d.initial
	if in == nil {
		return errors.New("reset: the initial X state was never recorded")
	}
	if km, err := xproto.QueryKeymap(x.c).Reply(); err == nil {
		for i, b := range km.Keys {
			for bit := 0; bit < 8; bit++ {
				if b&(1<<bit) != 0 {
					xtest.FakeInput(x.c, xproto.KeyRelease, byte(i*8+bit), 0, x.root, 0, 0, 0)
				}
			}
		}
	}
	if qp, err := xproto.QueryPointer(x.c, x.root).Reply(); err == nil {
		for b := byte(1); b <= 5; b++ {
			if qp.Mask&(uint16(xproto.ButtonMask1)<<(b-1)) != 0 {
				xtest.FakeInput(x.c, xproto.ButtonRelease, b, 0, x.root, 0, 0, 0)
			}
		}
	}
	// Only the keycodes that changed are mapped back, one by one as typing
	// borrows them: a whole-map change makes the server rebuild its XKB
	// keymap, which clients then see differently from a fresh server's.
	count := byte(len(in.syms) / int(in.per))
	cur, err := xproto.GetKeyboardMapping(x.c, in.minKC, count).Reply()
	if err != nil {
		return fmt.Errorf("reset: keyboard mapping: %w", err)
	}
	per := int(in.per)
	for i := 0; i < int(count); i++ {
		want := in.syms[i*per : (i+1)*per]
		if cur.KeysymsPerKeycode == in.per && slices.Equal(cur.Keysyms[i*per:(i+1)*per], want) {
			continue
		}
		if err := xproto.ChangeKeyboardMappingChecked(x.c, 1, in.minKC+xproto.Keycode(i), in.per, want).Check(); err != nil {
			return fmt.Errorf("reset: keyboard mapping: %w", err)
		}
	}
	x.keys = nil // re-read on next use
	// The modifier mapping may be refused (Busy) while a modifier is down;
	// the releases above came first.
	if r, err := xproto.SetModifierMapping(x.c, in.modPer, in.modCodes).Reply(); err != nil || r.Status != xproto.MappingStatusSuccess {
		return fmt.Errorf("reset: modifier mapping: %v (status %v)", err, r)
	}
	// The keyboard's locks, latches and XKB controls, and the buttons'
	// mapping (refused, Busy, while a button is down: released above).
	if err := x.resetXKB(in.xkb); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	if r, err := xproto.SetPointerMapping(x.c, byte(len(in.ptrMap)), in.ptrMap).Reply(); err != nil || r.Status != xproto.MappingStatusSuccess {
		return fmt.Errorf("reset: pointer mapping: %v (status %v)", err, r)
	}
	if err := x.dropSelections(); err != nil {
		return err
	}
	// Every root property the fresh desktop lacked goes: cut buffers,
	// resources, wallpaper, and whatever else a client of the episode set
	// there for the next one to read.
	pl, err := xproto.ListProperties(x.c, x.root).Reply()
	if err != nil {
		return fmt.Errorf("reset: root properties: %w", err)
	}
	for _, a := range pl.Atoms {
		if !in.rootProps[a] {
			xproto.DeleteProperty(x.c, x.root, a)
		}
	}
	k := in.kbd
	xproto.ChangeKeyboardControl(x.c, xproto.KbKeyClickPercent|xproto.KbBellPercent|xproto.KbBellPitch|xproto.KbBellDuration|xproto.KbAutoRepeatMode,
		[]uint32{uint32(k.KeyClickPercent), uint32(k.BellPercent), uint32(k.BellPitch), uint32(k.BellDuration), uint32(k.GlobalAutoRepeat)})
	xproto.ChangePointerControl(x.c, int16(in.ptr.AccelerationNumerator), int16(in.ptr.AccelerationDenominator), int16(in.ptr.Threshold), true, true)
	xproto.SetScreenSaver(x.c, int16(in.saver.Timeout), int16(in.saver.Interval), in.saver.PreferBlanking, in.saver.AllowExposures)
	xproto.ForceScreenSaver(x.c, xproto.ScreenSaverReset)
	xproto.SetFontPath(x.c, uint16(len(in.fontPath)), in.fontPath)
	xproto.KillClient(x.c, uint32(xproto.KillAllTemporary))
	if err := x.killRetained(keep); err != nil {
		return fmt.Errorf("reset: %w", err)
	}
	xproto.ChangeWindowAttributes(x.c, x.root, xproto.CwBackPixmap, []uint32{xproto.BackPixmapNone})
	xproto.ClearArea(x.c, false, x.root, 0, 0, 0, 0)
	xproto.WarpPointer(x.c, 0, x.root, 0, 0, 0, 0, int16(x.w/2), int16(x.h/2))
	xproto.SetInputFocus(x.c, xproto.InputFocusPointerRoot, xproto.InputFocusPointerRoot, xproto.TimeCurrentTime)
	return x.sync()
}

// killRetained frees the resources of every client of the episode that
// is gone but set its close-down mode to RetainPermanent: its windows
// (mapped or not, with their names and properties), pixmaps and the rest
// stay in the server after it disconnects, for the next episode to see,
// and KillAllTemporary frees only RetainTemporary ones. The X-Resource
// extension lists every client, gone or not, with the process id it
// connected from (kept after it is gone); the episode's processes have all
// ended, so a client whose process is not kept (guestd, the X server, the
// window manager) is the episode's. Only where the X server shares
// guestd's pid namespace (guestd's own connections are listed under its
// pid), and without the extension there is nothing to ask.
func (x *xconn) killRetained(keep map[int]bool) error {
	if res.Init(x.c) != nil {
		return nil
	}
	cl, err := res.QueryClients(x.c).Reply()
	if err != nil {
		return fmt.Errorf("x-resource clients: %w", err)
	}
	ids, err := res.QueryClientIds(x.c, 1, []res.ClientIdSpec{{Client: 0, Mask: res.ClientIdMaskLocalClientPID}}).Reply()
	if err != nil {
		return fmt.Errorf("x-resource client ids: %w", err)
	}
	pid := map[uint32]int{}
	self := false
	for _, id := range ids.Ids {
		if len(id.Value) == 1 {
			pid[id.Spec.Client] = int(id.Value[0])
			self = self || int(id.Value[0]) == os.Getpid()
		}
	}
	if !self {
		return nil
	}
	for _, c := range cl.Clients {
		if p, ok := pid[c.ResourceBase]; c.ResourceBase != 0 && !(ok && keep[p]) {
			xproto.KillClient(x.c, c.ResourceBase)
		}
	}
	return nil
}
