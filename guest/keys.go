package guest

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jezek/xgb/xproto"
)

// keymap is the server's core keyboard mapping plus a pool of spare keycodes
// (mapped to nothing) that typing borrows for characters the map lacks.
type keymap struct {
	min, max xproto.Keycode
	per      int                      // keysyms per keycode
	syms     []xproto.Keysym          // (kc-min)*per + level
	find     map[xproto.Keysym]keyLoc // keysym → where it is
	spare    []xproto.Keycode         // LRU order: least recently used first
}

type keyLoc struct {
	kc    xproto.Keycode
	shift bool // needs level 1
}

func (x *xconn) keymap() (*keymap, error) {
	if x.keys != nil {
		return x.keys, nil
	}
	s := xproto.Setup(x.c)
	n := byte(s.MaxKeycode - s.MinKeycode + 1)
	r, err := xproto.GetKeyboardMapping(x.c, s.MinKeycode, n).Reply()
	if err != nil {
		return nil, err
	}
	k := &keymap{min: s.MinKeycode, max: s.MaxKeycode, per: int(r.KeysymsPerKeycode), syms: r.Keysyms, find: map[xproto.Keysym]keyLoc{}}
	for i := 0; i < int(n); i++ {
		kc := xproto.Keycode(int(s.MinKeycode) + i)
		row := r.Keysyms[i*k.per : (i+1)*k.per]
		empty := true
		for _, ks := range row {
			if ks != 0 {
				empty = false
			}
		}
		if empty {
			k.spare = append(k.spare, kc)
			continue
		}
		for lvl := 0; lvl < min(2, k.per); lvl++ {
			ks := row[lvl]
			if ks == 0 {
				continue
			}
			if _, ok := k.find[ks]; !ok {
				k.find[ks] = keyLoc{kc: kc, shift: lvl == 1}
			}
		}
		// A keycode with one keysym at level 0 means it on both levels;
		// lowercase letters imply their uppercase at level 1.
		if k.per >= 2 && row[1] == 0 && row[0] >= 'a' && row[0] <= 'z' {
			if _, ok := k.find[row[0]-32]; !ok {
				k.find[row[0]-32] = keyLoc{kc: kc, shift: true}
			}
		}
	}
	x.keys = k
	return k, nil
}

// resolve finds a keycode for ks, borrowing a spare keycode (least recently
// used first, so a client still translating an earlier event sees it intact)
// when the map lacks it.
func (x *xconn) resolve(ks xproto.Keysym) (keyLoc, error) {
	k, err := x.keymap()
	if err != nil {
		return keyLoc{}, err
	}
	if c, ok := k.find[ks]; ok {
		if i := indexOf(k.spare, c.kc); i >= 0 { // borrowed: mark recently used
			k.spare = append(append(k.spare[:i:i], k.spare[i+1:]...), c.kc)
		}
		return c, nil
	}
	if len(k.spare) == 0 {
		return keyLoc{}, fmt.Errorf("no spare keycode to type keysym %#x", ks)
	}
	kc := k.spare[0]
	k.spare = append(k.spare[1:], kc)
	off := int(kc-k.min) * k.per
	if old := k.syms[off]; old != 0 {
		delete(k.find, old)
	}
	row := make([]xproto.Keysym, k.per)
	for i := range row {
		row[i] = ks
	}
	if err := xproto.ChangeKeyboardMappingChecked(x.c, 1, kc, byte(k.per), row).Check(); err != nil {
		return keyLoc{}, err
	}
	copy(k.syms[off:off+k.per], row)
	c := keyLoc{kc: kc}
	k.find[ks] = c
	return c, nil
}

// restoreSpares unmaps the keycodes typing borrowed.
func (x *xconn) restoreSpares() {
	k := x.keys
	if k == nil {
		return
	}
	for _, kc := range k.spare {
		off := int(kc-k.min) * k.per
		if k.syms[off] != 0 {
			xproto.ChangeKeyboardMapping(x.c, 1, kc, byte(k.per), make([]xproto.Keysym, k.per))
		}
	}
}

func indexOf(s []xproto.Keycode, kc xproto.Keycode) int {
	for i, v := range s {
		if v == kc {
			return i
		}
	}
	return -1
}

// Keysyms used directly.
const (
	ksShiftL   xproto.Keysym = 0xffe1
	ksControlL xproto.Keysym = 0xffe3
	ksAltL     xproto.Keysym = 0xffe9
	ksSuperL   xproto.Keysym = 0xffeb
	ksReturn   xproto.Keysym = 0xff0d
)

// runeKeysym maps a character to its keysym: Latin-1 directly, control
// characters to their keys, everything else to a Unicode keysym.
func runeKeysym(r rune) (xproto.Keysym, bool) {
	switch {
	case r == '\n' || r == '\r':
		return ksReturn, true
	case r == '\t':
		return 0xff09, true
	case r == '\b':
		return 0xff08, true
	case r == 0x1b:
		return 0xff1b, true
	case r >= 0x20 && r <= 0x7e, r >= 0xa0 && r <= 0xff:
		return xproto.Keysym(r), true
	case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r > utf8.MaxRune || r == utf8.RuneError:
		return 0, false
	default:
		return xproto.Keysym(0x01000000 | r), true
	}
}

// keyNames maps xdotool-style key names (lowercased) to keysyms.
var keyNames = map[string]xproto.Keysym{
	"ctrl": ksControlL, "control": ksControlL, "control_l": ksControlL, "control_r": 0xffe4, "ctrl_l": ksControlL, "ctrl_r": 0xffe4,
	"shift": ksShiftL, "shift_l": ksShiftL, "shift_r": 0xffe2,
	"alt": ksAltL, "alt_l": ksAltL, "alt_r": 0xffea, "meta": ksAltL,
	"super": ksSuperL, "super_l": ksSuperL, "super_r": 0xffec, "win": ksSuperL, "cmd": ksSuperL,
	"return": ksReturn, "enter": ksReturn, "kp_enter": 0xff8d,
	"tab": 0xff09, "escape": 0xff1b, "esc": 0xff1b, "backspace": 0xff08, "delete": 0xffff, "del": 0xffff,
	"insert": 0xff63, "home": 0xff50, "end": 0xff57,
	"page_up": 0xff55, "pageup": 0xff55, "prior": 0xff55, "page_down": 0xff56, "pagedown": 0xff56, "next": 0xff56,
	"left": 0xff51, "up": 0xff52, "right": 0xff53, "down": 0xff54,
	"space": 0x20, "minus": '-', "plus": '+', "equal": '=', "comma": ',', "period": '.', "slash": '/',
	"backslash": '\\', "semicolon": ';', "apostrophe": '\'', "grave": '`', "bracketleft": '[', "bracketright": ']',
	"menu": 0xff67, "print": 0xff61, "caps_lock": 0xffe5, "num_lock": 0xff7f, "scroll_lock": 0xff14, "pause": 0xff13,
}

func init() {
	for i := 1; i <= 24; i++ {
		keyNames[fmt.Sprintf("f%d", i)] = xproto.Keysym(0xffbe + i - 1)
	}
}

// parseKeys parses an xdotool-style key spec: chords joined by "+" such as
// "ctrl+shift+t", several chords separated by spaces.
func parseKeys(spec string) ([][]xproto.Keysym, error) {
	var chords [][]xproto.Keysym
	for _, chord := range strings.Fields(spec) {
		var parts []string
		if strings.HasSuffix(chord, "++") || chord == "+" { // "ctrl++" is ctrl + plus
			chord = strings.TrimSuffix(chord, "+")
			parts = append(strings.Split(strings.TrimSuffix(chord, "+"), "+"), "+")
			if chord == "" {
				parts = []string{"+"}
			}
		} else {
			parts = strings.Split(chord, "+")
		}
		var ks []xproto.Keysym
		for _, p := range parts {
			if p == "" {
				return nil, fmt.Errorf("empty key in %q", spec)
			}
			if s, ok := keyNames[strings.ToLower(p)]; ok {
				ks = append(ks, s)
				continue
			}
			if r, size := utf8.DecodeRuneInString(p); size == len(p) {
				if s, ok := runeKeysym(r); ok {
					ks = append(ks, s)
					continue
				}
			}
			return nil, fmt.Errorf("unknown key %q in %q", p, spec)
		}
		chords = append(chords, ks)
	}
	if len(chords) == 0 {
		return nil, fmt.Errorf("no keys in %q", spec)
	}
	return chords, nil
}
