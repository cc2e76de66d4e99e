package dialect

import (
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

// parseQwen reads the computer_use tool of Qwen2.5-VL and Qwen3-VL
// (QwenLM/Qwen2.5-VL and Qwen3-VL cookbooks, computer_use; qwen-agent's
// function-calling template): one or more
//
//	<tool_call>
//	{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [x, y]}}
//	</tool_call>
//
// blocks (the last may be left open), or the same objects as JSON — alone,
// in a list, or as an OpenAI-compatible server's tool_calls
// ({"tool_calls": [{"function": {"name": .., "arguments": "<json>"}}]}).
// Text around them and <think> blocks are ignored.
//
// Actions: key (keys: a list pressed as one chord), type (text),
// mouse_move, left_click, right_click, middle_click, double_click,
// triple_click (coordinate; without one, where the pointer is),
// left_click_drag (drags from the pointer to coordinate: mouse_down,
// move, mouse_up), scroll / hscroll (pixels, + is up / right, 100 pixels a
// wheel step; coordinate optional), wait (time, seconds), terminate
// (status success → done, failure → fail), answer (text: recorded as the
// episode's answer; it ends the episode with done unless a terminate
// follows; nothing else may).
//
// The mobile_use tool (Qwen2.5-VL/Qwen3-VL mobile agent) runs what a desktop
// can do, see (*qwenParser).mobile.
func parseQwen(text string) (parsed, error) {
	body := stripThink(text)
	chunks := taggedBlocks(body, "<tool_call>", "</tool_call>")
	if len(chunks) == 0 {
		chunks = []string{body}
	}
	q := &qwenParser{}
	for _, chunk := range chunks {
		vals, err := scanJSON(chunk)
		if err != nil {
			return parsed{}, err
		}
		if len(vals) == 0 && strings.TrimSpace(chunk) != "" && len(chunks) > 0 && chunk != body {
			return parsed{}, dialectErr(chunk, "tool_call holds no JSON object")
		}
		for _, v := range vals {
			if err := q.value(v.val, v.src); err != nil {
				return parsed{}, err
			}
		}
	}
	if q.answered && !q.ended {
		q.out = append(q.out, aci.Action{Verb: aci.Done})
	}
	return parsed{acts: q.out, answer: q.answer}, nil
}

type qwenParser struct {
	out      []aci.Action
	answer   string
	answered bool // an answer was given: only terminate may follow
	ended    bool // a terminate was given: only an answer may follow
}

// value walks one decoded JSON value down to its tool calls.
func (q *qwenParser) value(v any, src string) error {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if err := q.value(e, src); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if list, ok := x["tool_calls"]; ok && len(x) == 1 {
			return q.value(list, src)
		}
		if fn, ok := x["function"].(map[string]any); ok {
			x = fn
		}
		name, _ := x["name"].(string)
		raw, ok := x["arguments"]
		if !ok {
			raw = x["parameters"]
		}
		args, err := argsOf(raw, src)
		if err != nil {
			return err
		}
		return q.call(name, args, src)
	}
	return dialectErr(src, "want a tool call object, got %T", v)
}

func (q *qwenParser) call(name string, args map[string]any, src string) error {
	switch name {
	case "computer_use", "computer":
	case "mobile_use":
	case "":
		return dialectErr(src, "tool call without a name")
	default:
		return dialectErr(src, "unknown tool %q (want computer_use)", name)
	}
	action, _ := args["action"].(string)
	if action == "" {
		return dialectErr(src, "computer_use call without an action")
	}
	if q.ended && action != "answer" || q.answered && action != "terminate" {
		return dialectErr(src, "%s after the episode's end", action)
	}
	r := &argReader{c: call{name: name, args: args, snippet: src}, used: map[string]bool{"action": true}}
	act := q.action
	if name == "mobile_use" {
		act = q.mobile
	}
	acts, err := act(strings.ToLower(action), r)
	if err != nil {
		return err
	}
	if err := r.finish(); err != nil {
		return err
	}
	q.out = append(q.out, acts...)
	return nil
}

func (q *qwenParser) action(action string, r *argReader) ([]aci.Action, error) {
	point := func() (*aci.Target, error) { return r.point(false, "coordinate") }
	switch action {
	case "left_click", "right_click", "middle_click", "double_click", "triple_click":
		t, err := point()
		if err != nil {
			return nil, err
		}
		verb, button, clicks := clickKind(action)
		return clickActions(r.c.snippet, verb, t, button, clicks, nil)
	case "mouse_move":
		t, err := point()
		if err != nil {
			return nil, err
		}
		if t == nil {
			return nil, r.errf("mouse_move needs a coordinate")
		}
		return []aci.Action{{Verb: aci.Move, Target: t}}, nil
	case "left_click_drag":
		t, err := point()
		if err != nil {
			return nil, err
		}
		if t == nil {
			return nil, r.errf("left_click_drag needs a coordinate")
		}
		return dragFromPointer(t), nil
	case "key":
		return r.key()
	case "type":
		s, ok, err := r.str("text")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, r.errf("type needs text")
		}
		return []aci.Action{{Verb: aci.TypeText, Text: s}}, nil
	case "scroll", "hscroll":
		t, err := point()
		if err != nil {
			return nil, err
		}
		px, ok, err := r.num("pixels")
		if err != nil {
			return nil, err
		}
		if !ok || px == 0 {
			return nil, r.errf("%s needs non-zero pixels", action)
		}
		a := aci.Action{Verb: aci.Scroll, Target: t}
		if action == "hscroll" {
			a.DX = pixelSteps(px)
		} else {
			a.DY = -pixelSteps(px)
		}
		return []aci.Action{a}, nil
	case "wait":
		return r.wait()
	case "terminate":
		acts, err := r.terminate()
		q.ended = err == nil
		return acts, err
	case "answer":
		s, ok, err := r.str("text")
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, r.errf("answer needs text")
		}
		q.answer, q.answered = s, true
		return nil, nil
	}
	return nil, r.errf("unknown computer_use action %q", action)
}

// dragFromPointer drags from wherever the pointer is to t.
func dragFromPointer(t *aci.Target) []aci.Action {
	return []aci.Action{{Verb: aci.MouseDown}, {Verb: aci.Move, Target: t}, {Verb: aci.MouseUp}}
}

// clickKind reads the computer-use click actions that Qwen's computer_use
// and Claude's computer tool share (left_click, right_click, middle_click,
// double_click, triple_click).
func clickKind(action string) (verb aci.Verb, button string, clicks int) {
	verb, clicks = aci.Click, 1
	switch action {
	case "right_click":
		verb = aci.RightClick
	case "middle_click":
		button = "middle"
	case "double_click":
		verb = aci.DoubleClick
	case "triple_click":
		clicks = 3
	}
	return verb, button, clicks
}

// mobile runs a Qwen mobile_use action (QwenLM/Qwen2.5-VL cookbooks
// mobile_agent and Qwen-Agent's mobile_use tool) on a desktop: click,
// long_press (coordinate, time seconds: a held click, mouse_down there,
// wait, mouse_up; 2 s when time is missing), swipe (a drag from coordinate
// to coordinate2), type (text), key (text: a key name), wait (time),
// terminate (status), answer (text, as computer_use's), and
// system_button Enter (the Return key). The phone's own buttons
// (system_button Back, Home, Menu) and open (an app by name) are refused
// as unsupported, naming them; so is interact (Qwen3-VL's question to the
// user).
func (q *qwenParser) mobile(action string, r *argReader) ([]aci.Action, error) {
	point := func(k string) (*aci.Target, error) {
		t, err := r.point(false, k)
		if err == nil && t == nil {
			err = r.errf("mobile_use %s needs %s", action, k)
		}
		return t, err
	}
	switch action {
	case "click":
		t, err := point("coordinate")
		if err != nil {
			return nil, err
		}
		return []aci.Action{{Verb: aci.Click, Target: t}}, nil
	case "long_press":
		t, err := point("coordinate")
		if err != nil {
			return nil, err
		}
		secs, ok, err := r.num("time")
		if err != nil {
			return nil, err
		}
		if !ok {
			secs = 2
		}
		if secs <= 0 || secs > 60 {
			return nil, r.errf("long_press time %vs is out of range (0..60]", secs)
		}
		return []aci.Action{{Verb: aci.MouseDown, Target: t}, {Verb: aci.Wait, MS: int(secs * 1000)}, {Verb: aci.MouseUp}}, nil
	case "swipe":
		from, err := point("coordinate")
		if err != nil {
			return nil, err
		}
		to, err := point("coordinate2")
		if err != nil {
			return nil, err
		}
		return []aci.Action{{Verb: aci.Drag, Target: from, To: to}}, nil
	case "type", "key", "wait", "terminate", "answer":
		return q.action(action, r)
	case "system_button":
		b, _, err := r.str("button")
		if err != nil {
			return nil, err
		}
		switch strings.ToLower(strings.TrimSpace(b)) {
		case "enter":
			return []aci.Action{{Verb: aci.Key, Keys: "Return"}}, nil
		case "back", "home", "menu":
			return nil, unsupportedErr(r.c.snippet, "mobile_use system_button %s is a phone button: this server drives a desktop, which has none", b)
		}
		return nil, r.errf("system_button needs button Back, Home, Menu or Enter")
	case "open":
		app, _, err := r.str("text")
		if err != nil {
			return nil, err
		}
		return nil, unsupportedErr(r.c.snippet, "mobile_use open %q opens a phone app by name: this server drives a desktop, where a phone app's name starts nothing", app)
	case "interact":
		return nil, unsupportedErr(r.c.snippet, "mobile_use interact asks the user: there is no user in an episode")
	}
	return nil, r.errf("unknown mobile_use action %q", action)
}
