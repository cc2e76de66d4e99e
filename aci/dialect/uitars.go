package dialect

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/shinken-rl/shinken/aci"
)

// parseUITARS reads UI-TARS output (bytedance/UI-TARS, codes/ui_tars/
// action_parser.py and prompt.py; UI-TARS-desktop's action-parser): an
// optional Thought:, Reflection: or Action_Summary: section, then
// "Action:" (a full-width colon too) and one or more calls, e.g.
//
//	Thought: The search box is at the top.
//	Action: click(start_box='<|box_start|>(235,512)<|box_end|>')
//
// A text without an Action: label must be calls only. <think> blocks and
// leaked end tokens are dropped. Points are written '(x,y)',
// '<|box_start|>(x,y)<|box_end|>', '<point>x y</point>' or
// '<bbox>x1 y1 x2 y2</bbox>' / '(x1,y1,x2,y2)' (a box's centre), under
// start_box/end_box or point/start_point/end_point.
//
// Calls: click / left_single, left_double, right_single, hover, drag /
// select (start, end), hotkey(key='ctrl c') (space-separated keys, or
// ctrl+c), press(key), keydown/keyup/release(key) (held keys chord what is
// pressed meanwhile, as in pyautogui), type(content='...') (a trailing
// newline, written \n or as a line break, presses Enter after typing the
// rest), scroll(point, direction) (5 wheel steps, as UI-TARS's own
// converter scrolls), wait() (5 s), finished(content=..) (done, content
// recorded as the answer), call_user(content=..) (fail: the model gives
// up and asks for a person; content recorded). Mobile calls (long_press,
// open_app, press_home, press_back) are dialect_errors naming them.
//
// Seed's native tool-call form is read too (see parseSeed):
// <seed:tool_call><function name="click"><parameter name="point"><point>x
// y</point></parameter></function></seed:tool_call>, also with the tag
// names suffixed by an unused special token (<seed:tool_call_never_used_
// 51bce0c7…>, see unsuffixTags).
//
// Reasoning in <think>, <seed:think>, <thinkt> or <thinking> blocks
// (suffixed too) is dropped; the Action label may be Chinese (动作：,
// 操作：); a text without one may open with a labelled thought (Thought:,
// 思考：, …) before its call lines. A Qwen2-VL grounding answer alone —
// <|object_ref_start|>the button<|object_ref_end|><|box_start|>(x1,y1),
// (x2,y2)<|box_end|> — clicks the box's centre.
func parseUITARS(text string) (parsed, error) {
	body := stripThink(unsuffixTags(text))
	for _, tok := range []string{"<|im_end|>", "<|endoftext|>", "[EOS]"} {
		body = strings.ReplaceAll(body, tok, "")
	}
	if strings.Contains(body, seedOpen) {
		return parseSeed(body)
	}
	if loc := uitarsAction.FindStringIndex(body); loc != nil {
		body = body[loc[1]:]
	} else if m := groundingOnly.FindStringSubmatch(strings.TrimSpace(body)); m != nil {
		return groundingClick(m[1], body)
	} else if strings.Count(body, "<|box_start|>") > 1 && !uitarsArgName.MatchString(body) {
		return parsed{}, dialectErr(body, "several grounding boxes and no action: which one to click is not said")
	} else if uitarsThought.MatchString(body) {
		body = afterThought(body)
	}
	u := &uitarsParser{s: body, p: &pyParser{}}
	if err := u.run(); err != nil {
		return parsed{}, err
	}
	if err := u.p.finish(); err != nil {
		return parsed{}, err
	}
	return parsed{acts: u.p.out, answer: u.answer}, nil
}

var (
	// uitarsAction is the Action label: English (a full-width colon too) or
	// Chinese (动作, 操作), as models prompted in Chinese write it.
	uitarsAction = regexp.MustCompile(`(?m)^[ \t]*(?:Action|动作|操作)[ \t]*[:：][ \t]*`)
	// uitarsThought is a labelled reasoning section that opens a text
	// without an Action label: Thought, Reflection, Action_Summary, or
	// their Chinese labels (思考, 反思, 总结).
	uitarsThought = regexp.MustCompile(`^\s*(?:Thought|Reflection|Action_Summary|思考|反思|总结)[ \t]*[:：]`)
	// thinkBlock is a reasoning block: <think>, Seed's <seed:think>, the
	// <thinkt> of UI-TARS-desktop's T5 format, or <thinking>; or a
	// reasoning prefix whose opening tag the chat template already sent.
	thinkBlock = regexp.MustCompile(`(?s)<(?:seed:)?think(?:t|ing)?>.*?</(?:seed:)?think(?:t|ing)?>|^.*?</(?:seed:)?think(?:t|ing)?>`)
	// unusedSuffix is the "_never_used_<hex>" suffix that Seed-1.5-VL and
	// UI-TARS-2 style prompts put on their tag names (one of the model's
	// unused special tokens): <think_never_used_51bce0c7…>,
	// <seed:tool_call_never_used_…>, <function_never_used_…=click>.
	unusedSuffix = regexp.MustCompile(`(</?[A-Za-z][A-Za-z:_]*?)_never_used_[0-9A-Fa-f]{6,64}`)
	// groundingOnly is a Qwen2-VL grounding answer: an optional
	// <|object_ref_start|>…<|object_ref_end|> then one box or point.
	groundingOnly = regexp.MustCompile(`(?s)^(?:<\|object_ref_start\|>[^<]*<\|object_ref_end\|>\s*)?(<\|box_start\|>[^<]*<\|box_end\|>)$`)
	uitarsArgName = regexp.MustCompile(`\b(?:start_box|end_box|start_point|end_point|point)\s*=`)
)

// unsuffixTags drops the "_never_used_<hex>" suffix from tag names, so the
// suffixed tags read as <think>, <seed:tool_call>, <function=…> and
// <parameter=…>.
func unsuffixTags(s string) string {
	if !strings.Contains(s, "_never_used_") {
		return s
	}
	return unusedSuffix.ReplaceAllString(s, "$1")
}

// stripThink drops reasoning blocks (see thinkBlock).
func stripThink(s string) string {
	if !strings.Contains(s, "think") {
		return s
	}
	return thinkBlock.ReplaceAllString(s, "")
}

// afterThought skips the labelled reasoning that opens a text without an
// Action label: the calls start at the first line that is one (a text with
// none is left whole, for the parser to refuse).
func afterThought(body string) string {
	off := 0
	for line := range strings.Lines(body) {
		if uitarsCallLine.MatchString(strings.TrimLeft(line, " \t")) {
			return body[off:]
		}
		off += len(line)
	}
	return body
}

// groundingClick clicks the centre of a Qwen2-VL grounding box (or at its
// point), read like every UI-TARS point (0..1000 by default).
func groundingClick(box, src string) (parsed, error) {
	t, err := uitarsPoint(box, src)
	if err != nil {
		return parsed{}, err
	}
	return parsed{acts: []aci.Action{{Verb: aci.Click, Target: t}}}, nil
}

type uitarsParser struct {
	s      string
	pos    int
	p      *pyParser
	answer string
	ended  bool
}

// uitarsCall is one call: its name, arguments and source.
type uitarsCall struct {
	name string
	args map[string]string
	src  string
}

func (u *uitarsParser) run() error {
	for {
		u.skipSpace()
		if u.pos >= len(u.s) {
			return nil
		}
		if loc := uitarsAction.FindStringIndex(u.s[u.pos:]); loc != nil && loc[0] == 0 {
			u.pos += loc[1] // a repeated Action: label
			continue
		}
		c, err := u.call()
		if err != nil {
			return err
		}
		if u.ended {
			return dialectErr(c.src, "%s after the episode's end", c.name)
		}
		if err := u.apply(c); err != nil {
			return err
		}
	}
}

func (u *uitarsParser) skipSpace() {
	for u.pos < len(u.s) {
		r, n := utf8.DecodeRuneInString(u.s[u.pos:])
		if r != ' ' && r != '\t' && r != '\r' && r != '\n' && r != '\u3000' && r != ';' {
			return
		}
		u.pos += n
	}
}

func (u *uitarsParser) ident() string {
	st := u.pos
	for u.pos < len(u.s) && isWordByte(u.s[u.pos]) {
		u.pos++
	}
	return u.s[st:u.pos]
}

// call reads name(arg=value, ...).
func (u *uitarsParser) call() (uitarsCall, error) {
	st := u.pos
	name := u.ident()
	u.skipBlank()
	if name == "" || u.pos >= len(u.s) || u.s[u.pos] != '(' {
		return uitarsCall{}, dialectErr(lineAround(u.s, st), "want a UI-TARS call such as click(start_box='(x,y)')")
	}
	u.pos++
	c := uitarsCall{name: strings.ToLower(name), args: map[string]string{}}
	for npos := 0; ; npos++ {
		u.skipBlank()
		if u.pos >= len(u.s) {
			return c, dialectErr(u.s[st:], "unclosed call %s(", name)
		}
		if u.s[u.pos] == ')' {
			u.pos++
			break
		}
		key := ""
		save := u.pos
		if k := u.ident(); k != "" {
			u.skipBlank()
			if u.pos < len(u.s) && u.s[u.pos] == '=' {
				key = k
				u.pos++
				u.skipBlank()
			} else {
				u.pos = save
			}
		}
		if key == "" {
			key = "#" + strconv.Itoa(npos) // positional
		}
		v, err := u.value()
		if err != nil {
			return c, err
		}
		if _, dup := c.args[key]; dup {
			return c, dialectErr(u.s[st:u.pos], "argument %s given twice", key)
		}
		c.args[key] = v
		u.skipBlank()
		if u.pos < len(u.s) && u.s[u.pos] == ',' {
			u.pos++
		}
	}
	c.src = u.s[st:u.pos]
	return c, nil
}

func (u *uitarsParser) skipBlank() {
	for u.pos < len(u.s) && (u.s[u.pos] == ' ' || u.s[u.pos] == '\t') {
		u.pos++
	}
}

// value reads a quoted string (escapes decoded; a quote that does not end
// the argument is kept as text, since models leave apostrophes in typed
// content unescaped) or a bare value up to the next top-level , or ).
func (u *uitarsParser) value() (string, error) {
	if u.pos >= len(u.s) {
		return "", dialectErr(u.s, "missing value")
	}
	st := u.pos
	q := u.s[u.pos]
	if q != '\'' && q != '"' {
		depth := 0
		for u.pos < len(u.s) {
			c := u.s[u.pos]
			switch {
			case c == '(' || c == '[':
				depth++
			case (c == ')' || c == ']') && depth > 0:
				depth--
			case (c == ',' || c == ')') && depth == 0:
				return strings.TrimSpace(u.s[st:u.pos]), nil
			case c == '\n':
				return "", dialectErr(lineAround(u.s, st), "unclosed call")
			}
			u.pos++
		}
		return "", dialectErr(u.s[st:], "unclosed call")
	}
	u.pos++
	var b strings.Builder
	for u.pos < len(u.s) {
		c := u.s[u.pos]
		switch {
		case c == '\\' && u.pos+1 < len(u.s):
			e := u.s[u.pos+1]
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case '\\', '\'', '"':
				b.WriteByte(e)
			default:
				b.WriteByte('\\')
				b.WriteByte(e)
			}
			u.pos += 2
			continue
		case c == q && u.endsArg(u.pos+1):
			u.pos++
			return b.String(), nil
		}
		b.WriteByte(c)
		u.pos++
	}
	return "", dialectErr(lineAround(u.s, st), "unterminated string")
}

// endsArg reports whether a quote whose next byte is at i closes its
// argument: what follows is ", name=", or ")" and then the end, a line
// break or the next call.
func (u *uitarsParser) endsArg(i int) bool {
	for i < len(u.s) && (u.s[i] == ' ' || u.s[i] == '\t') {
		i++
	}
	if i >= len(u.s) {
		return true // let the caller report the unclosed call
	}
	switch u.s[i] {
	case ',':
		return uitarsNextArg.MatchString(u.s[i+1:])
	case ')':
		rest := strings.TrimLeft(u.s[i+1:], " \t;")
		return rest == "" || rest[0] == '\n' || rest[0] == '\r' || uitarsNextCall.MatchString(rest)
	}
	return false
}

var (
	uitarsNextArg  = regexp.MustCompile(`^\s*(?:[A-Za-z_]\w*\s*=|['"(\[<]|-?[0-9])`)
	uitarsNextCall = regexp.MustCompile(`^[A-Za-z_]\w*\s*\(`)
)

// uitarsParams are each call's argument names; the first takes a
// positional argument.
var uitarsParams = map[string][]string{
	"click": {"start_box", "point"}, "left_single": {"start_box", "point"},
	"left_double": {"start_box", "point"}, "double_click": {"start_box", "point"},
	"right_single": {"start_box", "point"}, "right_click": {"start_box", "point"},
	"hover": {"start_box", "point"}, "mouse_move": {"start_box", "point"}, "move_to": {"start_box", "point"},
	"drag": {"start_box", "end_box", "start_point", "end_point"}, "select": {"start_box", "end_box", "start_point", "end_point"},
	"hotkey": {"key", "hotkey"}, "press": {"key", "press"},
	"keydown": {"key", "press"}, "keyup": {"key", "press"}, "release": {"key", "press"},
	"type":   {"content"},
	"scroll": {"start_box", "point", "direction"},
	"wait":   {}, "finished": {"content"}, "call_user": {"content"},
}

// uitarsMobile are UI-TARS's phone actions.
var uitarsMobile = map[string]bool{"long_press": true, "open_app": true, "press_home": true, "press_back": true, "swipe": true}

func (u *uitarsParser) apply(c uitarsCall) error {
	if uitarsMobile[c.name] {
		return dialectErr(c.src, "UI-TARS mobile action %s is not supported on a desktop", c.name)
	}
	params, ok := uitarsParams[c.name]
	if !ok {
		return dialectErr(c.src, "unknown UI-TARS action %s", c.name)
	}
	args := map[string]string{}
	for k, v := range c.args {
		if strings.HasPrefix(k, "#") {
			if k != "#0" || len(params) == 0 {
				return dialectErr(c.src, "%s() takes at most one positional argument", c.name)
			}
			k = params[0]
		}
		if !contains(params, k) {
			return dialectErr(c.src, "%s() has no argument %s", c.name, k)
		}
		if _, dup := args[k]; dup {
			return dialectErr(c.src, "argument %s given twice", k)
		}
		args[k] = v
	}
	pt := func(keys ...string) (*aci.Target, error) {
		for _, k := range keys {
			if v, ok := args[k]; ok && strings.TrimSpace(v) != "" {
				return uitarsPoint(v, c.src)
			}
		}
		return nil, nil
	}
	var acts []aci.Action
	switch c.name {
	case "click", "left_single", "left_double", "double_click", "right_single", "right_click":
		t, err := pt("start_box", "point")
		if err != nil {
			return err
		}
		verb := map[string]aci.Verb{"click": aci.Click, "left_single": aci.Click, "left_double": aci.DoubleClick,
			"double_click": aci.DoubleClick, "right_single": aci.RightClick, "right_click": aci.RightClick}[c.name]
		if acts, err = clickActions(c.src, verb, t, "", 1, u.p.heldKeys()); err != nil {
			return err
		}
	case "hover", "mouse_move", "move_to":
		t, err := pt("start_box", "point")
		if err != nil {
			return err
		}
		if t == nil {
			return dialectErr(c.src, "%s needs a point", c.name)
		}
		acts = []aci.Action{{Verb: aci.Move, Target: t}}
	case "drag", "select":
		from, err := pt("start_box", "start_point")
		if err != nil {
			return err
		}
		to, err := pt("end_box", "end_point")
		if err != nil {
			return err
		}
		if from == nil || to == nil {
			return dialectErr(c.src, "%s needs a start and an end point", c.name)
		}
		acts = []aci.Action{{Verb: aci.Drag, Target: from, To: to}}
	case "hotkey", "press":
		k := args["key"] + args["hotkey"] + args["press"]
		chordStr, err := uitarsChord(k, c.src)
		if err != nil {
			return err
		}
		acts = []aci.Action{{Verb: aci.Key, Keys: strings.Join(append(u.p.heldKeys(), chordStr), "+")}}
	case "keydown":
		return u.p.keyDown(&pyArgs{args: map[string]any{"key": strings.TrimSpace(args["key"] + args["press"])}, src: c.src})
	case "keyup", "release":
		return u.p.keyUp(&pyArgs{args: map[string]any{"key": strings.TrimSpace(args["key"] + args["press"])}, src: c.src})
	case "type":
		content, ok := args["content"]
		if !ok {
			return dialectErr(c.src, "type needs content")
		}
		text, enter := strings.CutSuffix(content, "\n")
		if text != "" {
			acts = append(acts, aci.Action{Verb: aci.TypeText, Text: text})
		}
		if enter {
			acts = append(acts, aci.Action{Verb: aci.Key, Keys: "Return"})
		}
		if len(acts) == 0 {
			return nil
		}
	case "scroll":
		t, err := pt("start_box", "point")
		if err != nil {
			return err
		}
		a := aci.Action{Verb: aci.Scroll, Target: t}
		switch dir := strings.ToLower(strings.TrimSpace(args["direction"])); {
		case strings.Contains(dir, "up"):
			a.DY = -uitarsScrollSteps
		case strings.Contains(dir, "down"):
			a.DY = uitarsScrollSteps
		case strings.Contains(dir, "left"):
			a.DX = -uitarsScrollSteps
		case strings.Contains(dir, "right"):
			a.DX = uitarsScrollSteps
		default:
			return dialectErr(c.src, "scroll needs direction up, down, left or right")
		}
		acts = []aci.Action{a}
	case "wait":
		acts = []aci.Action{{Verb: aci.Wait, MS: 5000}}
	case "finished", "call_user":
		u.answer, u.ended = args["content"], true
		v := aci.Done
		if c.name == "call_user" {
			v = aci.Fail
		}
		acts = []aci.Action{{Verb: v}}
	}
	return u.p.emit(c.src, acts)
}

// uitarsScrollSteps is how far one UI-TARS scroll goes: its own converter
// writes pyautogui.scroll(±5).
const uitarsScrollSteps = 5

// uitarsChord reads a UI-TARS key combination: space-separated keys
// ("ctrl c"), or one xdotool-style chord ("ctrl+c").
func uitarsChord(k, src string) (string, error) {
	f := strings.Fields(k)
	if len(f) == 0 {
		if k != "" { // hotkey(key=' ') is the space bar
			return "space", nil
		}
		return "", dialectErr(src, "no key given")
	}
	c, err := chord(f...)
	if err != nil {
		return "", dialectErr(src, "%s", aci.AsError(err).Message)
	}
	return c, nil
}

var boxTokens = strings.NewReplacer("<|box_start|>", " ", "<|box_end|>", " ", "<point>", " ", "</point>", " ",
	"<bbox>", " ", "</bbox>", " ", "(", " ", ")", " ", "[", " ", "]", " ", ",", " ")

// uitarsPoint reads a UI-TARS point or box; a box is its centre.
func uitarsPoint(v, src string) (*aci.Target, error) {
	f := strings.Fields(boxTokens.Replace(v))
	if len(f) != 2 && len(f) != 4 {
		return nil, dialectErr(src, "cannot read a point from %q", v)
	}
	n := make([]float64, len(f))
	for i, s := range f {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, dialectErr(src, "cannot read a point from %q", v)
		}
		n[i] = x
	}
	if len(n) == 4 {
		return aci.Px((n[0]+n[2])/2, (n[1]+n[3])/2), nil
	}
	return aci.Px(n[0], n[1]), nil
}
