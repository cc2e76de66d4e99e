package dialect

import (
	"math"
	"regexp"
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

// parsePyautogui reads OSWorld-style code. When the text has ``` fences
// (untagged or python), only their bodies are code; otherwise code lines are
// picked out of the prose: lines starting with pyautogui., time.sleep,
// import/from, or a bare WAIT/DONE/FAIL. Inside code every statement must map
// onto actions (imports and pyautogui.SETTING = ... assignments are
// accepted and do nothing); outside it, a pyautogui call in mid-sentence is
// refused rather than guessed at.
//
// Calls: click, doubleClick, tripleClick, rightClick, middleClick, moveTo,
// dragTo, mouseDown, mouseUp, scroll/vscroll (clicks > 0 is up, so dy =
// -clicks), hscroll (dx = clicks), write/typewrite (a string types it, a list
// presses each key), press (a key or a list; presses=N repeats), hotkey,
// keyDown/keyUp, sleep, screenshot; time.sleep(s); WAIT (1000 ms, or
// WAIT(seconds)), DONE, FAIL.
//
// keyDown/keyUp have no verb of their own: keys held by keyDown modify what
// happens until their keyUp – a press, hotkey or single-character write
// becomes a chord (keyDown('ctrl'); press('c'); keyUp('ctrl') → key
// "ctrl+c"), a click carries them as Modifiers – and a keyDown/keyUp pair
// with nothing between presses the held chord itself. A keyUp without its
// keyDown, a keyDown never released, or any other action while keys are held
// is a dialect_error.
//
// A click without a point clicks where the pointer is (mouse_down/mouse_up
// pairs). Points whose x and y are both 0..1 fractions, not both whole, are
// normalized coordinates (OpenCUA, Aguvis: pyautogui.click(x=0.43, y=0.26))
// and become point_norm targets; see normPoints.
func parsePyautogui(text string) ([]aci.Action, error) {
	return (&pyParser{}).parse(text)
}

// parse reads code from text as parsePyautogui describes.
func (p *pyParser) parse(text string) ([]aci.Action, error) {
	var code []string
	for _, f := range fences(text) {
		switch f.lang {
		case "", "python", "py", "python3", "pyautogui", "code":
			code = append(code, f.body)
		}
	}
	if len(code) > 0 {
		for _, c := range code {
			if err := p.block(c); err != nil {
				return nil, err
			}
		}
	} else if err := p.prose(text); err != nil {
		return nil, err
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.out, normPoints(text, p.out)
}

// finish checks that no key is left held.
func (p *pyParser) finish() error {
	if len(p.held) > 0 {
		return dialectErr(p.held[0].src, "keyDown(%q) without keyUp", p.held[0].key)
	}
	return nil
}

var (
	codeLine   = regexp.MustCompile(`^\s*(pyautogui\s*\.|time\s*\.\s*sleep\b|computer\s*\.\s*(wait|terminate)\b|agent\s*\.\s*[a-z_]+\s*\(|tag_[0-9]+\s*=|import\s|from\s+\w+\s+import\b|(WAIT|DONE|FAIL)\s*(\(.*\))?\s*;?\s*$)`)
	inlineCall = regexp.MustCompile(`pyautogui\s*\.\s*[A-Za-z_]\w*\s*\(`)
)

// prose runs the code lines of unfenced text.
func (p *pyParser) prose(text string) error {
	off := 0
	for off < len(text) {
		end := strings.IndexByte(text[off:], '\n')
		line := text[off:]
		if end >= 0 {
			line = text[off : off+end]
		}
		if codeLine.MatchString(line) {
			lx := &lexer{s: text, pos: off}
			toks, err := lx.statement()
			if err != nil {
				return err
			}
			if err := p.statement(toks, text[off:lx.pos]); err != nil {
				return err
			}
			off = lx.pos
			continue
		}
		if loc := inlineCall.FindStringIndex(line); loc != nil {
			return dialectErr(line, "pyautogui call outside code; put code in ``` fences or on its own line")
		}
		if end < 0 {
			break
		}
		off += end + 1
	}
	return nil
}

// block runs every statement of a code block.
func (p *pyParser) block(code string) error {
	lx := &lexer{s: code}
	for lx.pos < len(code) {
		start := lx.pos
		toks, err := lx.statement()
		if err != nil {
			return err
		}
		if err := p.statement(toks, code[start:lx.pos]); err != nil {
			return err
		}
	}
	return nil
}

// heldKey is one key pressed by keyDown and not yet released.
type heldKey struct {
	key  string // keysym
	used bool   // something ran while it was held
	src  string
}

// pyParser turns statements into actions, tracking keys held by keyDown.
type pyParser struct {
	out  []aci.Action
	held []heldKey
	// osworld enables the OSWorld agents' extras: Set-of-Mark labels bound
	// by tag_N = (x, y), and the computer.wait / computer.terminate calls.
	osworld bool
	names   map[string]any // tag_N bindings
	answer  string         // computer.terminate(answer=...)
}

// pyCall is a parsed call: dotted name, positional and keyword arguments.
type pyCall struct {
	name string
	pos  []any
	kw   map[string]any
	src  string
}

func (p *pyParser) statement(toks []token, src string) error {
	src = strings.TrimSpace(src)
	if len(toks) == 0 {
		return nil
	}
	if toks[0].kind == tName && (toks[0].s == "import" || toks[0].s == "from" || toks[0].s == "pass") {
		return nil
	}
	// dotted name
	i := 0
	name, i, ok := dotted(toks, i)
	if !ok {
		return dialectErr(src, "unsupported statement")
	}
	if i == len(toks) {
		switch name {
		case "WAIT", "DONE", "FAIL":
			return p.special(pyCall{name: name, src: src})
		}
		return dialectErr(src, "unsupported statement")
	}
	if toks[i].kind == tOp && toks[i].s == "=" {
		if setting, ok := strings.CutPrefix(name, "pyautogui."); ok && strings.ToUpper(setting) == setting {
			return nil // pyautogui.FAILSAFE = False, pyautogui.PAUSE = 0.5
		}
		if p.osworld && somTag.MatchString(name) {
			return p.bindTag(name, toks[i+1:], src)
		}
		return dialectErr(src, "assignments are not supported; write literal arguments")
	}
	if toks[i].kind != tOp || toks[i].s != "(" {
		return dialectErr(src, "unsupported statement")
	}
	c := pyCall{name: name, kw: map[string]any{}, src: src}
	i++
	for {
		if i >= len(toks) {
			return dialectErr(src, "unclosed call")
		}
		if toks[i].kind == tOp && toks[i].s == ")" {
			i++
			break
		}
		if toks[i].kind == tName && i+1 < len(toks) && toks[i+1].kind == tOp && toks[i+1].s == "=" {
			key := toks[i].s
			v, j, err := value(toks, i+2, src, p.names)
			if err != nil {
				return err
			}
			if _, dup := c.kw[key]; dup {
				return dialectErr(src, "argument %s given twice", key)
			}
			c.kw[key] = v
			i = j
		} else {
			if len(c.kw) > 0 {
				return dialectErr(src, "positional argument after keyword argument")
			}
			star := toks[i].kind == tOp && toks[i].s == "*"
			if star {
				i++
			}
			v, j, err := value(toks, i, src, p.names)
			if err != nil {
				return err
			}
			if list, ok := v.([]any); star && ok {
				c.pos = append(c.pos, list...)
			} else if _, mark := v.(markLabel); star && mark {
				c.pos = append(c.pos, v) // click(*tag_3): the mark stands for x, y
			} else if star {
				return dialectErr(src, "* needs a tuple or list")
			} else {
				c.pos = append(c.pos, v)
			}
			i = j
		}
		if i < len(toks) && toks[i].kind == tOp && toks[i].s == "," {
			i++
		} else if !(i < len(toks) && toks[i].kind == tOp && toks[i].s == ")") {
			return dialectErr(src, "expected , or ) in call")
		}
	}
	if i != len(toks) {
		return dialectErr(src, "unexpected code after call")
	}
	return p.call(c)
}

// pySigs are the positional parameter names of the calls we map.
var pySigs = map[string][]string{
	"click":       {"x", "y", "clicks", "interval", "button", "duration", "tween"},
	"doubleClick": {"x", "y", "interval", "button", "duration", "tween"},
	"tripleClick": {"x", "y", "interval", "button", "duration", "tween"},
	"rightClick":  {"x", "y", "duration", "tween"},
	"middleClick": {"x", "y", "duration", "tween"},
	"moveTo":      {"x", "y", "duration", "tween"},
	"dragTo":      {"x", "y", "duration", "tween", "button", "mouseDownUp"},
	"mouseDown":   {"x", "y", "button", "duration", "tween"},
	"mouseUp":     {"x", "y", "button", "duration", "tween"},
	"scroll":      {"clicks", "x", "y"},
	"vscroll":     {"clicks", "x", "y"},
	"hscroll":     {"clicks", "x", "y"},
	"write":       {"message", "interval"},
	"typewrite":   {"message", "interval"},
	"press":       {"keys", "presses", "interval"},
	"keyDown":     {"key"},
	"keyUp":       {"key"},
	"sleep":       {"seconds"},
	"screenshot":  {},
	// Element extensions (element.go).
	"invokeAction": {"element", "action"},
	"setValue":     {"element", "value"},
}

// pyPointCalls take element= (an element ref) where they take a point
// (element.go).
var pyPointCalls = map[string]bool{"click": true, "doubleClick": true, "tripleClick": true, "rightClick": true,
	"middleClick": true, "moveTo": true, "dragTo": true, "mouseDown": true, "mouseUp": true, "scroll": true, "vscroll": true, "hscroll": true}

// pyIgnored are keyword arguments that tune timing only.
var pyIgnored = map[string]bool{"interval": true, "tween": true, "logScreenshot": true, "_pause": true}

func (p *pyParser) call(c pyCall) error {
	switch c.name {
	case "time.sleep":
		c.name = "pyautogui.sleep"
	case "WAIT", "DONE", "FAIL":
		return p.special(c)
	}
	if p.osworld && strings.HasPrefix(c.name, "computer.") {
		return p.computer(c)
	}
	if p.osworld && strings.HasPrefix(c.name, "agent.") {
		return p.agentS(c)
	}
	fn, ok := strings.CutPrefix(c.name, "pyautogui.")
	if !ok {
		return dialectErr(c.src, "unsupported call %s()", c.name)
	}
	if fn == "hotkey" {
		return p.hotkey(c)
	}
	sig, ok := pySigs[fn]
	if !ok {
		return dialectErr(c.src, "unsupported pyautogui call %s()", fn)
	}
	args := map[string]any{}
	if len(c.pos) > len(sig) {
		return dialectErr(c.src, "%s() takes at most %d positional arguments", fn, len(sig))
	}
	for i, v := range c.pos {
		args[sig[i]] = v
	}
	for k, v := range c.kw {
		if _, dup := args[k]; dup {
			return dialectErr(c.src, "argument %s given twice", k)
		}
		known := k == "element" && pyPointCalls[fn]
		for _, s := range sig {
			known = known || s == k
		}
		if !known && !pyIgnored[k] {
			return dialectErr(c.src, "%s() has no argument %s", fn, k)
		}
		args[k] = v
	}
	a := &pyArgs{args: args, src: c.src}
	var acts []aci.Action
	var err error
	switch fn {
	case "click", "doubleClick", "tripleClick", "rightClick", "middleClick":
		acts, err = p.click(fn, a)
	case "moveTo":
		acts, err = a.pointAction(aci.Move, true)
	case "dragTo":
		acts, err = a.drag()
	case "mouseDown":
		acts, err = a.pointAction(aci.MouseDown, false)
	case "mouseUp":
		acts, err = a.pointAction(aci.MouseUp, false)
	case "scroll", "vscroll", "hscroll":
		acts, err = a.scroll(fn == "hscroll")
	case "write", "typewrite":
		acts, err = p.write(a)
	case "press":
		acts, err = p.press(a)
	case "keyDown":
		return p.keyDown(a)
	case "keyUp":
		return p.keyUp(a)
	case "sleep":
		s, err := a.num("seconds", -1)
		if err != nil {
			return err
		}
		acts, err = waitSeconds(c.src, s)
		if err != nil {
			return err
		}
	case "screenshot":
		acts = []aci.Action{{Verb: aci.Screenshot}}
	case "invokeAction", "setValue":
		acts, err = p.pyElementCall(fn, a)
	}
	if err != nil {
		return err
	}
	return p.emit(c.src, acts)
}

// emit appends actions, refusing anything but keys and clicks while keys
// are held (those are rewritten by their callers).
func (p *pyParser) emit(src string, acts []aci.Action) error {
	if len(p.held) > 0 {
		for _, a := range acts {
			switch a.Verb {
			case aci.Key, aci.Click, aci.DoubleClick, aci.RightClick:
			default:
				return dialectErr(src, "%s while keyDown(%q) is held is not supported", a.Verb, p.held[0].key)
			}
		}
		for i := range p.held {
			p.held[i].used = true
		}
	}
	p.out = append(p.out, acts...)
	return nil
}

func (p *pyParser) special(c pyCall) error {
	switch c.name {
	case "DONE":
		return p.emit(c.src, []aci.Action{{Verb: aci.Done}})
	case "FAIL":
		return p.emit(c.src, []aci.Action{{Verb: aci.Fail}})
	}
	secs := 1.0
	if len(c.pos) > 1 || len(c.kw) > 0 {
		return dialectErr(c.src, "WAIT takes at most one argument (seconds)")
	}
	if len(c.pos) == 1 {
		f, ok := c.pos[0].(float64)
		if !ok {
			return dialectErr(c.src, "WAIT wants seconds")
		}
		secs = f
	}
	acts, err := waitSeconds(c.src, secs)
	if err != nil {
		return err
	}
	return p.emit(c.src, acts)
}

func waitSeconds(src string, s float64) ([]aci.Action, error) {
	if s < 0 || s > 600 || math.IsNaN(s) {
		return nil, dialectErr(src, "sleep of %vs is out of range", s)
	}
	return []aci.Action{{Verb: aci.Wait, MS: int(math.Round(s * 1000))}}, nil
}

func (p *pyParser) heldKeys() []string {
	if len(p.held) == 0 {
		return nil
	}
	ks := make([]string, len(p.held))
	for i, h := range p.held {
		ks[i] = h.key
	}
	return ks
}

func (p *pyParser) click(fn string, a *pyArgs) ([]aci.Action, error) {
	t, err := a.point()
	if err != nil {
		return nil, err
	}
	verb, clicks := aci.Click, 1
	button := ""
	switch fn {
	case "doubleClick":
		verb = aci.DoubleClick
	case "tripleClick":
		clicks = 3
	case "rightClick":
		verb = aci.RightClick
	case "middleClick":
		button = "middle"
	}
	if b, ok := a.args["button"]; ok && b != nil {
		s, ok := b.(string)
		if !ok {
			return nil, dialectErr(a.src, "button must be a string")
		}
		button = strings.ToLower(s)
	}
	if n, ok := a.args["clicks"]; ok {
		f, ok := n.(float64)
		if !ok || f < 1 {
			return nil, dialectErr(a.src, "clicks must be a positive number")
		}
		clicks = int(min(f, 11)) // over 10 is refused by clickActions
	}
	return clickActions(a.src, verb, t, button, clicks, p.heldKeys())
}

func (p *pyParser) write(a *pyArgs) ([]aci.Action, error) {
	switch m := a.args["message"].(type) {
	case string:
		if len(p.held) == 0 {
			if m == "" {
				return nil, nil
			}
			return []aci.Action{{Verb: aci.TypeText, Text: m}}, nil
		}
		var acts []aci.Action
		for _, r := range m {
			k, err := p.chord(a.src, string(r))
			if err != nil {
				return nil, err
			}
			acts = append(acts, aci.Action{Verb: aci.Key, Keys: k})
		}
		return acts, nil
	case []any:
		return p.keyList(a.src, m, 1)
	}
	return nil, dialectErr(a.src, "write() needs a string or a list of keys")
}

func (p *pyParser) press(a *pyArgs) ([]aci.Action, error) {
	n := 1
	if v, ok := a.args["presses"]; ok {
		f, ok := v.(float64)
		if !ok || f < 1 || f > 100 {
			return nil, dialectErr(a.src, "presses must be a number from 1 to 100")
		}
		n = int(f)
	}
	switch k := a.args["keys"].(type) {
	case string:
		return p.keyList(a.src, []any{k}, n)
	case []any:
		return p.keyList(a.src, k, n)
	}
	return nil, dialectErr(a.src, "press() needs a key or a list of keys")
}

// keyList presses each key in turn, times repeats, under any held keys.
func (p *pyParser) keyList(src string, keys []any, times int) ([]aci.Action, error) {
	var acts []aci.Action
	for range times {
		for _, k := range keys {
			s, ok := k.(string)
			if !ok {
				return nil, dialectErr(src, "key names must be strings")
			}
			c, err := p.chord(src, s)
			if err != nil {
				return nil, err
			}
			acts = append(acts, aci.Action{Verb: aci.Key, Keys: c})
		}
	}
	return acts, nil
}

// chord maps one pyautogui key name, prefixed by any held keys. A name is
// looked up whole ("pageup", "+"); pyautogui has no chord syntax.
func (p *pyParser) chord(src, name string) (string, error) {
	k, ok := keysym(name)
	if !ok {
		return "", dialectErr(src, "unknown key %q", name)
	}
	return strings.Join(append(p.heldKeys(), k), "+"), nil
}

func (p *pyParser) hotkey(c pyCall) error {
	for k := range c.kw {
		if !pyIgnored[k] {
			return dialectErr(c.src, "hotkey() has no argument %s", k)
		}
	}
	names := c.pos
	if len(names) == 1 {
		if list, ok := names[0].([]any); ok {
			names = list
		}
	}
	if len(names) == 0 {
		return dialectErr(c.src, "hotkey() needs keys")
	}
	keys := p.heldKeys()
	for _, n := range names {
		s, ok := n.(string)
		if !ok {
			return dialectErr(c.src, "key names must be strings")
		}
		k, ok := keysym(s)
		if !ok {
			return dialectErr(c.src, "unknown key %q", s)
		}
		keys = append(keys, k)
	}
	return p.emit(c.src, []aci.Action{{Verb: aci.Key, Keys: strings.Join(keys, "+")}})
}

func (p *pyParser) keyDown(a *pyArgs) error {
	s, ok := a.args["key"].(string)
	if !ok {
		return dialectErr(a.src, "keyDown() needs a key name")
	}
	k, ok := keysym(s)
	if !ok {
		return dialectErr(a.src, "unknown key %q", s)
	}
	for _, h := range p.held {
		if h.key == k {
			return dialectErr(a.src, "keyDown(%q) while it is already down", s)
		}
	}
	p.held = append(p.held, heldKey{key: k, src: a.src})
	return nil
}

func (p *pyParser) keyUp(a *pyArgs) error {
	s, ok := a.args["key"].(string)
	if !ok {
		return dialectErr(a.src, "keyUp() needs a key name")
	}
	k, ok := keysym(s)
	if !ok {
		return dialectErr(a.src, "unknown key %q", s)
	}
	for i, h := range p.held {
		if h.key != k {
			continue
		}
		if !h.used { // nothing happened under it: press the held chord itself
			chord := strings.Join(p.heldKeys(), "+")
			p.out = append(p.out, aci.Action{Verb: aci.Key, Keys: chord})
			for j := range p.held {
				p.held[j].used = true
			}
		}
		p.held = append(p.held[:i], p.held[i+1:]...)
		return nil
	}
	return dialectErr(a.src, "keyUp(%q) without keyDown", s)
}

// pyArgs holds a call's arguments bound to parameter names.
