package dialect

import (
	"math"
	"sort"
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

// parseOSWorld reads what OSWorld's agents write (xlang-ai/OSWorld,
// mm_agents/): the pyautogui action space (fenced or bare code, as
// parsePyautogui reads it), the bare codes WAIT, DONE and FAIL in any case
// ("Done"), the computer_13 JSON action space ({"action_type": "CLICK",
// "x": .., "y": ..}, flat or with "parameters", in ```json fences or bare),
// Set-of-Mark labels bound in the code (tag_3 = (120, 40) then
// pyautogui.click(tag_3) or click(*tag_3); an unbound label is a
// dialect_error, since the server draws no marks), and the OpenCUA control
// calls computer.wait(seconds=..) and computer.terminate(status=..,
// answer=..). Coordinates are screen pixels, or 0..1 fractions when the
// agent writes normalized pyautogui (see normPoints).
func parseOSWorld(text string) (parsed, error) {
	trimmed := strings.TrimSpace(text)
	if osworldWord.MatchString(trimmed) {
		word := strings.ToUpper(strings.Trim(trimmed, "`. \t\r\n"))
		p := &pyParser{}
		if err := p.special(pyCall{name: word, src: trimmed}); err != nil {
			return parsed{}, err
		}
		return parsed{acts: p.out}, nil
	}
	p := &pyParser{osworld: true, names: map[string]any{}}
	var err error
	if strings.Contains(text, `"action_type"`) {
		err = p.computer13(text)
	} else {
		_, err = p.parse(text)
	}
	if err != nil {
		return parsed{}, err
	}
	return parsed{acts: p.out, answer: p.answer}, normPoints(text, p.out)
}

// bindTag binds a Set-of-Mark label to the point written after its '='.
func (p *pyParser) bindTag(name string, toks []token, src string) error {
	v, j, err := value(toks, 0, src, p.names)
	if err != nil {
		return err
	}
	pt, ok := v.([]any)
	if j != len(toks) || !ok || len(pt) != 2 {
		return dialectErr(src, "%s must be bound to an (x, y) pair", name)
	}
	for _, c := range pt {
		if _, ok := c.(float64); !ok {
			return dialectErr(src, "%s must be bound to an (x, y) pair of numbers", name)
		}
	}
	p.names[name] = pt
	return nil
}

// computer runs OpenCUA's control calls.
func (p *pyParser) computer(c pyCall) error {
	kw := func(names ...string) (map[string]any, error) {
		args := map[string]any{}
		if len(c.pos) > len(names) {
			return nil, dialectErr(c.src, "%s() takes at most %d positional arguments", c.name, len(names))
		}
		for i, v := range c.pos {
			args[names[i]] = v
		}
		for k, v := range c.kw {
			if !contains(names, k) {
				return nil, dialectErr(c.src, "%s() has no argument %s", c.name, k)
			}
			if _, dup := args[k]; dup {
				return nil, dialectErr(c.src, "argument %s given twice", k)
			}
			args[k] = v
		}
		return args, nil
	}
	switch c.name {
	case "computer.wait":
		args, err := kw("seconds")
		if err != nil {
			return err
		}
		secs := 1.0
		if v, ok := args["seconds"]; ok {
			if secs, ok = v.(float64); !ok {
				return dialectErr(c.src, "seconds must be a number")
			}
		}
		acts, err := waitSeconds(c.src, secs)
		if err != nil {
			return err
		}
		return p.emit(c.src, acts)
	case "computer.terminate":
		args, err := kw("status", "answer")
		if err != nil {
			return err
		}
		if a, ok := args["answer"]; ok && a != nil {
			s, ok := a.(string)
			if !ok {
				return dialectErr(c.src, "answer must be a string")
			}
			p.answer = s
		}
		status, _ := args["status"].(string)
		switch strings.ToLower(status) {
		case "success", "":
			return p.emit(c.src, []aci.Action{{Verb: aci.Done}})
		case "failure", "fail":
			return p.emit(c.src, []aci.Action{{Verb: aci.Fail}})
		}
		return dialectErr(c.src, "unknown terminate status %q (want success or failure)", status)
	}
	return dialectErr(c.src, "unsupported call %s()", c.name)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// computer13 maps OSWorld's computer_13 action space onto the pyautogui
// calls it is defined by (desktop_env's controller runs it that way).
var computer13 = map[string]struct {
	fn     string
	params map[string]string // computer_13 parameter → pyautogui argument
}{
	"MOVE_TO":      {"moveTo", map[string]string{"x": "x", "y": "y"}},
	"CLICK":        {"click", map[string]string{"x": "x", "y": "y", "button": "button", "num_clicks": "clicks"}},
	"MOUSE_DOWN":   {"mouseDown", map[string]string{"x": "x", "y": "y", "button": "button"}},
	"MOUSE_UP":     {"mouseUp", map[string]string{"x": "x", "y": "y", "button": "button"}},
	"RIGHT_CLICK":  {"rightClick", map[string]string{"x": "x", "y": "y"}},
	"DOUBLE_CLICK": {"doubleClick", map[string]string{"x": "x", "y": "y"}},
	"DRAG_TO":      {"dragTo", map[string]string{"x": "x", "y": "y"}},
	"TYPING":       {"write", map[string]string{"text": "message"}},
	"PRESS":        {"press", map[string]string{"key": "keys"}},
	"KEY_DOWN":     {"keyDown", map[string]string{"key": "key"}},
	"KEY_UP":       {"keyUp", map[string]string{"key": "key"}},
}

// computer13 reads every computer_13 action in text: the objects in ```json
// (or bare ```) fences when there are any, else every JSON object in it.
// A fence holding only WAIT, DONE or FAIL is that code.
func (p *pyParser) computer13(text string) error {
	var chunks []string
	for _, f := range fences(text) {
		body := strings.TrimSpace(f.body)
		switch {
		case body == "WAIT" || body == "DONE" || body == "FAIL":
			chunks = append(chunks, `{"action_type": "`+body+`"}`)
		case f.lang == "json" || f.lang == "" && startsJSON(body):
			chunks = append(chunks, body)
		}
	}
	if len(chunks) == 0 {
		chunks = []string{text}
	}
	for _, chunk := range chunks {
		vals, err := scanJSON(chunk)
		if err != nil {
			return err
		}
		for _, v := range vals {
			objs := []any{v.val}
			if list, ok := v.val.([]any); ok {
				objs = list
			}
			for _, o := range objs {
				m, ok := o.(map[string]any)
				if !ok {
					return dialectErr(v.src, "want a computer_13 action object")
				}
				if err := p.computer13Action(m, v.src); err != nil {
					return err
				}
			}
		}
	}
	return p.finish()
}

func (p *pyParser) computer13Action(m map[string]any, src string) error {
	kind, _ := m["action_type"].(string)
	kind = strings.ToUpper(strings.TrimSpace(kind))
	params := map[string]any{}
	for k, v := range m {
		switch k {
		case "action_type":
		case "parameters":
			ps, ok := v.(map[string]any)
			if !ok && v != nil {
				return dialectErr(src, "parameters must be an object")
			}
			for pk, pv := range ps {
				params[pk] = pv
			}
		default:
			params[k] = v
		}
	}
	if kind == "" {
		return dialectErr(src, "computer_13 action without action_type")
	}
	switch kind {
	case "WAIT", "DONE", "FAIL":
		if len(params) > 0 {
			return dialectErr(src, "%s takes no parameters", kind)
		}
		return p.special(pyCall{name: kind, src: src})
	case "HOTKEY":
		keys, ok := params["keys"].([]any)
		if !ok || len(params) != 1 {
			return dialectErr(src, "HOTKEY needs exactly keys: [..]")
		}
		return p.hotkey(pyCall{name: "pyautogui.hotkey", pos: keys, kw: map[string]any{}, src: src})
	case "SCROLL":
		for k := range params {
			if k != "dx" && k != "dy" && k != "x" && k != "y" {
				return dialectErr(src, "SCROLL has no parameter %s", k)
			}
		}
		n := 0
		for _, axis := range []struct{ param, fn string }{{"dy", "vscroll"}, {"dx", "hscroll"}} {
			d, ok := params[axis.param].(float64)
			if !ok || d == 0 {
				continue
			}
			n++
			kw := map[string]any{"clicks": d}
			if x, ok := params["x"]; ok {
				kw["x"], kw["y"] = x, params["y"]
			}
			if err := p.call(pyCall{name: "pyautogui." + axis.fn, kw: kw, src: src}); err != nil {
				return err
			}
		}
		if n == 0 {
			return dialectErr(src, "SCROLL needs a non-zero dx or dy")
		}
		return nil
	}
	spec, ok := computer13[kind]
	if !ok {
		return dialectErr(src, "unknown computer_13 action_type %q", kind)
	}
	kw := map[string]any{}
	var unknown []string
	for k, v := range params {
		arg, ok := spec.params[k]
		if !ok {
			unknown = append(unknown, k)
			continue
		}
		kw[arg] = v
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return dialectErr(src, "%s has no parameter(s) %s", kind, strings.Join(unknown, ", "))
	}
	return p.call(pyCall{name: "pyautogui." + spec.fn, kw: kw, src: src})
}

// normPoints turns pixel points written as 0..1 fractions into point_norm
// targets. A point is a fraction when both its x and y lie in 0..1 and they
// are not both whole numbers (0 and 1 are pixels alone, fractions beside a
// fraction). Once one point of a text is a fraction every point must be:
// a text that mixes fractions and pixels is a dialect_error.
func normPoints(text string, acts []aci.Action) error {
	var pts []*aci.Target
	for i := range acts {
		for _, t := range []*aci.Target{acts[i].Target, acts[i].To} {
			if t != nil && (t.Kind == aci.PointPx || t.Kind == "") {
				pts = append(pts, t)
			}
		}
	}
	frac := func(t *aci.Target) bool { return t.X >= 0 && t.X <= 1 && t.Y >= 0 && t.Y <= 1 }
	norm := false
	for _, t := range pts {
		if frac(t) && !(t.X == math.Trunc(t.X) && t.Y == math.Trunc(t.Y)) {
			norm = true
		}
	}
	if !norm {
		return nil
	}
	for _, t := range pts {
		if !frac(t) {
			return dialectErr(text, "text mixes 0..1 fractions and pixel coordinates (%v, %v)", t.X, t.Y)
		}
	}
	for _, t := range pts {
		t.Kind = aci.PointNorm
	}
	return nil
}

// agentSParams are the positional parameters of Agent-S's grounding ACI
// (simular-ai/Agent-S, gui_agents grounding.py: its agent.* calls).
var agentSParams = map[string][]string{
	"click":               {"element_description", "num_clicks", "button_type", "hold_keys"},
	"type":                {"element_description", "text", "overwrite", "enter"},
	"scroll":              {"element_description", "clicks", "shift"},
	"drag_and_drop":       {"starting_description", "ending_description", "hold_keys"},
	"highlight_text_span": {"starting_phrase", "ending_phrase", "button"},
	"hotkey":              {"keys"},
	"hold_and_press":      {"hold_keys", "press_keys"},
	"wait":                {"time"},
	"done":                {"return_value"},
	"fail":                {},
	"switch_applications": {"app_code"},
	"open":                {"app_or_filename"},
	"save_to_knowledge":   {"text"},
	"set_cell_values":     {"cell_values", "app_name", "sheet_name"},
}

// agentS runs an Agent-S agent.* call. The calls that name their target by
// a description (click, type into an element, scroll, drag_and_drop,
// highlight_text_span; Agent-S1's integer element ids alike) need a
// grounding model to become points, which this server does not have: they
// are refused as unsupported with a message starting "needs_grounding:".
// The rest run: type without an element (overwrite selects all and
// deletes first; enter presses Return after), hotkey, hold_and_press,
// wait, done (return_value is the answer), fail. Switching or opening
// applications by name and the knowledge and spreadsheet helpers are
// refused as unsupported, naming them.
func (p *pyParser) agentS(c pyCall) error {
	fn := strings.TrimPrefix(c.name, "agent.")
	params, ok := agentSParams[fn]
	if !ok {
		return dialectErr(c.src, "unknown Agent-S call %s()", c.name)
	}
	args := map[string]any{}
	if len(c.pos) > len(params) {
		return dialectErr(c.src, "%s() takes at most %d positional arguments", c.name, len(params))
	}
	for i, v := range c.pos {
		args[params[i]] = v
	}
	for k, v := range c.kw {
		if !contains(params, k) {
			return dialectErr(c.src, "%s() has no argument %s", c.name, k)
		}
		if _, dup := args[k]; dup {
			return dialectErr(c.src, "argument %s given twice", k)
		}
		args[k] = v
	}
	grounding := func(key string) error {
		switch d := args[key].(type) {
		case float64:
			return unsupportedErr(c.src, "needs_grounding: %s() names element %v of Agent-S's own element list, not this server's (element refs are e<N>)", c.name, d)
		case string:
			return unsupportedErr(c.src, "needs_grounding: %s() names its target by description (%q); this server has no grounding model to turn a description into a point yet", c.name, d)
		}
		return dialectErr(c.src, "%s() needs %s", c.name, key)
	}
	keys := func(key string) ([]any, error) {
		switch v := args[key].(type) {
		case []any:
			return v, nil
		case string:
			return []any{v}, nil
		}
		return nil, dialectErr(c.src, "%s() needs %s: a list of keys", c.name, key)
	}
	var acts []aci.Action
	switch fn {
	case "click", "scroll":
		return grounding("element_description")
	case "drag_and_drop":
		return grounding("starting_description")
	case "highlight_text_span":
		return grounding("starting_phrase")
	case "type":
		if args["element_description"] != nil {
			return grounding("element_description")
		}
		text, ok := args["text"].(string)
		if !ok && args["text"] != nil {
			return dialectErr(c.src, "text must be a string")
		}
		if args["overwrite"] == true {
			acts = append(acts, aci.Action{Verb: aci.Key, Keys: "ctrl+a"}, aci.Action{Verb: aci.Key, Keys: "BackSpace"})
		}
		if text != "" {
			acts = append(acts, aci.Action{Verb: aci.TypeText, Text: text})
		}
		if args["enter"] == true {
			acts = append(acts, aci.Action{Verb: aci.Key, Keys: "Return"})
		}
		if len(acts) == 0 {
			return dialectErr(c.src, "%s() types nothing", c.name)
		}
	case "hotkey":
		ks, err := keys("keys")
		if err != nil {
			return err
		}
		return p.hotkey(pyCall{name: "pyautogui.hotkey", pos: ks, kw: map[string]any{}, src: c.src})
	case "hold_and_press":
		hold, err := keys("hold_keys")
		if err != nil {
			return err
		}
		press, err := keys("press_keys")
		if err != nil {
			return err
		}
		for _, k := range press {
			if err := p.hotkey(pyCall{name: "pyautogui.hotkey", pos: append(append([]any{}, hold...), k), kw: map[string]any{}, src: c.src}); err != nil {
				return err
			}
		}
		return nil
	case "wait":
		secs, ok := args["time"].(float64)
		if !ok {
			return dialectErr(c.src, "%s() needs time in seconds", c.name)
		}
		var err error
		if acts, err = waitSeconds(c.src, secs); err != nil {
			return err
		}
	case "done":
		if v := args["return_value"]; v != nil {
			s, ok := v.(string)
			if !ok {
				return dialectErr(c.src, "return_value must be a string")
			}
			p.answer = s
		}
		acts = []aci.Action{{Verb: aci.Done}}
	case "fail":
		acts = []aci.Action{{Verb: aci.Fail}}
	case "switch_applications", "open":
		return unsupportedErr(c.src, "%s() switches to or opens an application by name (%v): not mapped from model text", c.name, args[params[0]])
	default: // save_to_knowledge, set_cell_values
		return unsupportedErr(c.src, "%s() is an Agent-S helper with no desktop action", c.name)
	}
	return p.emit(c.src, acts)
}
