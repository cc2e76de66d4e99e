package dialect

import (
	"strings"
)

// keysyms maps the key names models write (pyautogui's, browsers', xdotool's
// own, lowercased) to xdotool keysym names. Single printable characters are
// handled by charKey.
var keysyms = map[string]string{
	"enter": "Return", "return": "Return", "ret": "Return",
	"tab": "Tab", "esc": "Escape", "escape": "Escape",
	"backspace": "BackSpace", "back_space": "BackSpace",
	"delete": "Delete", "del": "Delete", "insert": "Insert", "ins": "Insert",
	"space": "space", "spacebar": "space",
	"up": "Up", "down": "Down", "left": "Left", "right": "Right",
	"arrowup": "Up", "arrowdown": "Down", "arrowleft": "Left", "arrowright": "Right",
	"pageup": "Page_Up", "pgup": "Page_Up", "page_up": "Page_Up", "prior": "Page_Up",
	"pagedown": "Page_Down", "pgdn": "Page_Down", "page_down": "Page_Down", "next": "Page_Down",
	"home": "Home", "end": "End",
	"ctrl": "ctrl", "control": "ctrl", "ctrlleft": "ctrl", "ctrlright": "ctrl",
	"control_l": "ctrl", "control_r": "ctrl",
	"shift": "shift", "shiftleft": "shift", "shiftright": "shift", "shift_l": "shift", "shift_r": "shift",
	"alt": "alt", "altleft": "alt", "altright": "alt", "option": "alt", "alt_l": "alt", "alt_r": "alt",
	"super": "super", "win": "super", "winleft": "super", "winright": "super", "meta": "super",
	"command": "super", "cmd": "super", "super_l": "super", "super_r": "super",
	"capslock": "Caps_Lock", "caps_lock": "Caps_Lock", "numlock": "Num_Lock", "num_lock": "Num_Lock",
	"scrolllock": "Scroll_Lock", "scroll_lock": "Scroll_Lock",
	"printscreen": "Print", "prtsc": "Print", "prtscr": "Print", "print": "Print",
	"pause": "Pause", "menu": "Menu", "apps": "Menu",
	"plus": "plus", "minus": "minus", "equal": "equal", "comma": "comma", "period": "period",
	"slash": "slash", "backslash": "backslash", "semicolon": "semicolon",
	"apostrophe": "apostrophe", "grave": "grave", "bracketleft": "bracketleft",
	"bracketright": "bracketright",
}

// charKeys names the printable characters that are not their own keysym.
var charKeys = map[rune]string{
	' ': "space", '+': "plus", '-': "minus", '=': "equal", ',': "comma", '.': "period",
	'/': "slash", '\\': "backslash", ';': "semicolon", '\'': "apostrophe", '`': "grave",
	'[': "bracketleft", ']': "bracketright", '!': "exclam", '"': "quotedbl", '#': "numbersign",
	'$': "dollar", '%': "percent", '&': "ampersand", '(': "parenleft", ')': "parenright",
	'*': "asterisk", ':': "colon", '<': "less", '>': "greater", '?': "question", '@': "at",
	'^': "asciicircum", '_': "underscore", '{': "braceleft", '|': "bar", '}': "braceright",
	'~': "asciitilde", '\n': "Return", '\t': "Tab",
}

// keysym maps one key name to its xdotool keysym; ok is false for a name it
// does not know.
func keysym(name string) (string, bool) {
	if r := []rune(name); len(r) == 1 {
		if k, ok := charKeys[r[0]]; ok {
			return k, true
		}
		if r[0] > ' ' && r[0] < 0x7f {
			return name, true
		}
		return "", false
	}
	low := strings.ToLower(strings.TrimSpace(name))
	if k, ok := keysyms[low]; ok {
		return k, true
	}
	if len(low) >= 2 && len(low) <= 3 && low[0] == 'f' {
		n := 0
		for _, c := range low[1:] {
			if c < '0' || c > '9' {
				return "", false
			}
			n = n*10 + int(c-'0')
		}
		if n >= 1 && n <= 24 {
			return "F" + low[1:], true
		}
	}
	return "", false
}

// chord maps key names to one xdotool chord ("ctrl+c"). Each name may itself
// be a chord written with '+' or '-' between keys ("ctrl+shift+t", "Ctrl-C").
func chord(names ...string) (string, error) {
	var out []string
	for _, n := range names {
		for _, part := range splitChord(n) {
			k, ok := keysym(part)
			if !ok {
				return "", dialectErr(n, "unknown key %q", part)
			}
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return "", dialectErr(strings.Join(names, ","), "no key given")
	}
	if len(out) > 1 { // "CTRL"+"C" names the c key, not a shifted C
		for i, k := range out {
			if len(k) == 1 && k[0] >= 'A' && k[0] <= 'Z' {
				out[i] = strings.ToLower(k)
			}
		}
	}
	return strings.Join(out, "+"), nil
}

// splitChord splits "ctrl+c" or "ctrl-c" but keeps a lone "+" or "-" whole,
// and a trailing separator key ("ctrl++") as the key itself.
func splitChord(s string) []string {
	s = strings.TrimSpace(s)
	if len([]rune(s)) <= 1 {
		return []string{s}
	}
	sep := ""
	switch {
	case strings.Contains(s, "+"):
		sep = "+"
	case strings.Contains(s, "-") && !strings.HasPrefix(s, "-"):
		sep = "-"
	case strings.Contains(s, " "):
		sep = " "
	default:
		return []string{s}
	}
	parts := strings.Split(s, sep)
	var out []string
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if p == "" {
			// "ctrl++" → ctrl, "+": an empty part followed by the end is the separator key.
			if i == len(parts)-1 && i > 0 && parts[i-1] == "" {
				out = append(out, sep)
			}
			continue
		}
		out = append(out, p)
	}
	return out
}
