package dialect

import (
	"math"
	"sort"
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

// parseAnthropic reads Claude computer use (Anthropic's computer-use tool
// documentation and the computer-use demo's tools/computer.py, tool
// versions computer_20241022, computer_20250124 and computer_20251124): a
// whole message ({"content": [...]}), its content list, or single
// tool_use blocks ({"type": "tool_use", "name": "computer", "input":
// {"action": .., ...}}), or bare inputs ({"action": .., ...}), as JSON
// anywhere in the text. text and thinking blocks are skipped; a tool_use
// of another tool (bash, the text editor) is a dialect_error naming it.
//
// Actions: key (text in xdotool syntax; space-separated chords are
// pressed in turn), type (text), mouse_move, left_click, right_click,
// middle_click, double_click, triple_click (coordinate; without one, where
// the pointer is; text holds modifier keys during the click),
// left_click_drag (start_coordinate, or the pointer, to coordinate),
// left_mouse_down / left_mouse_up, scroll (coordinate, scroll_direction,
// scroll_amount wheel steps, default 3; text holds modifiers), wait
// (duration, seconds), screenshot, cursor_position (a screenshot: the
// observation carries the pointer). hold_key and zoom are dialect_errors:
// the server has no timed key hold and no zoomed view. The bash and text
// editor tools (bash, str_replace_editor, str_replace_based_edit_tool) are
// refused as unsupported, naming the tool: no shell route runs them yet. Coordinates are
// pixels of the screenshot as sent (coords frame).
func parseAnthropic(text string) (parsed, error) {
	vals, err := scanJSON(text)
	if err != nil {
		return parsed{}, err
	}
	var out []aci.Action
	for _, v := range vals {
		acts, err := anthropicValue(v.val, v.src, 0)
		if err != nil {
			return parsed{}, err
		}
		out = append(out, acts...)
	}
	return parsed{acts: out}, nil
}

func anthropicValue(v any, src string, depth int) ([]aci.Action, error) {
	if depth > 4 {
		return nil, dialectErr(src, "message nested too deep")
	}
	switch x := v.(type) {
	case []any:
		var out []aci.Action
		for _, e := range x {
			acts, err := anthropicValue(e, src, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, acts...)
		}
		return out, nil
	case map[string]any:
		if list, ok := x["content"].([]any); ok {
			return anthropicValue(list, src, depth+1)
		}
		switch typ, _ := x["type"].(string); typ {
		case "text", "thinking", "redacted_thinking":
			return nil, nil
		case "tool_use":
			name, _ := x["name"].(string)
			if name != "computer" {
				if t, ok := anthropicTools[name]; ok {
					return nil, unsupportedErr(src, "Claude's %s tool (%s) is not run: the task has no shell route for model text yet (only the computer tool)", name, t)
				}
				return nil, dialectErr(src, "tool %q is not supported (only computer)", name)
			}
			in, ok := x["input"].(map[string]any)
			if !ok {
				return nil, dialectErr(src, "tool_use without an input object")
			}
			return anthropicAction(in, src)
		case "":
			if _, ok := x["action"]; ok {
				return anthropicAction(x, src)
			}
			return nil, dialectErr(src, "object is neither a content block nor a computer input")
		default:
			return nil, dialectErr(src, "content block of type %q is not supported", typ)
		}
	}
	return nil, dialectErr(src, "want a content block, got %T", v)
}

// anthropicTools are Claude's other built-in tools: read, and refused as
// unsupported naming them (running them as agent actions is a later step).
var anthropicTools = map[string]string{
	"bash":                        "a shell command",
	"str_replace_editor":          "the text editor",
	"str_replace_based_edit_tool": "the text editor",
	"text_editor":                 "the text editor",
}

// anthropicParams are each action's input fields besides action.
var anthropicParams = map[string][]string{
	"key": {"text"}, "type": {"text"}, "mouse_move": {"coordinate", "text"},
	"left_click": {"coordinate", "text"}, "right_click": {"coordinate", "text"},
	"middle_click": {"coordinate", "text"}, "double_click": {"coordinate", "text"},
	"triple_click": {"coordinate", "text"}, "left_click_drag": {"start_coordinate", "coordinate", "text"},
	"left_mouse_down": {"coordinate", "text"}, "left_mouse_up": {"coordinate", "text"},
	"scroll": {"coordinate", "scroll_direction", "scroll_amount", "text"},
	"wait":   {"duration"}, "screenshot": {}, "cursor_position": {},
	"hold_key": {"text", "duration"}, "zoom": {"region"},
}

func anthropicAction(in map[string]any, src string) ([]aci.Action, error) {
	action, _ := in["action"].(string)
	params, ok := anthropicParams[action]
	if !ok {
		return nil, dialectErr(src, "unknown computer action %q", action)
	}
	var unknown []string
	for k, v := range in {
		if k != "action" && v != nil && !contains(params, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, dialectErr(src, "%s has no input(s) %s", action, strings.Join(unknown, ", "))
	}
	pt := func(k string) (*aci.Target, error) {
		v, ok := in[k]
		if !ok || v == nil {
			return nil, nil
		}
		t, err := toTarget(v)
		if err != nil {
			return nil, dialectErr(src, "%s: %v", k, err)
		}
		return t, nil
	}
	text, hasText := in["text"].(string)
	if v, ok := in["text"]; ok && v != nil && !hasText {
		return nil, dialectErr(src, "text must be a string")
	}
	mods := func() ([]string, error) {
		if !hasText || strings.TrimSpace(text) == "" {
			return nil, nil
		}
		var out []string
		for _, n := range splitChord(text) {
			k, ok := keysym(n)
			if !ok || !isModifierName(k) {
				return nil, dialectErr(src, "%q is not a modifier key", n)
			}
			out = append(out, k)
		}
		return out, nil
	}
	t, err := pt("coordinate")
	if err != nil {
		return nil, err
	}
	switch action {
	case "key":
		if strings.TrimSpace(text) == "" {
			return nil, dialectErr(src, "key needs text")
		}
		var out []aci.Action
		for _, part := range strings.Fields(text) {
			c, err := chord(part)
			if err != nil {
				return nil, dialectErr(src, "%s", aci.AsError(err).Message)
			}
			out = append(out, aci.Action{Verb: aci.Key, Keys: c})
		}
		return out, nil
	case "type":
		if !hasText {
			return nil, dialectErr(src, "type needs text")
		}
		return []aci.Action{{Verb: aci.TypeText, Text: text}}, nil
	case "mouse_move":
		if t == nil {
			return nil, dialectErr(src, "mouse_move needs a coordinate")
		}
		return []aci.Action{{Verb: aci.Move, Target: t}}, nil
	case "left_click", "right_click", "middle_click", "double_click", "triple_click":
		m, err := mods()
		if err != nil {
			return nil, err
		}
		verb, button, clicks := clickKind(action)
		return clickActions(src, verb, t, button, clicks, m)
	case "left_click_drag":
		if t == nil {
			return nil, dialectErr(src, "left_click_drag needs a coordinate")
		}
		from, err := pt("start_coordinate")
		if err != nil {
			return nil, err
		}
		m, err := mods()
		if err != nil {
			return nil, err
		}
		if from == nil {
			if len(m) > 0 {
				return nil, dialectErr(src, "a drag holding keys needs a start_coordinate")
			}
			return dragFromPointer(t), nil
		}
		return []aci.Action{{Verb: aci.Drag, Target: from, To: t, Modifiers: m}}, nil
	case "left_mouse_down", "left_mouse_up":
		if hasText {
			return nil, dialectErr(src, "%s takes no text", action)
		}
		v := aci.MouseDown
		if action == "left_mouse_up" {
			v = aci.MouseUp
		}
		return []aci.Action{{Verb: v, Target: t}}, nil
	case "scroll":
		m, err := mods()
		if err != nil {
			return nil, err
		}
		n := 3.0
		if v, ok := in["scroll_amount"]; ok && v != nil {
			if n, err = toFloat(v); err != nil || n < 0 || n != math.Trunc(n) || n > maxSteps {
				return nil, dialectErr(src, "scroll_amount must be a whole number of wheel steps up to %d", maxSteps)
			}
		}
		dir, _ := in["scroll_direction"].(string)
		a := aci.Action{Verb: aci.Scroll, Target: t, Modifiers: m}
		switch dir {
		case "up":
			a.DY = -int(n)
		case "down":
			a.DY = int(n)
		case "left":
			a.DX = -int(n)
		case "right":
			a.DX = int(n)
		default:
			return nil, dialectErr(src, "scroll_direction must be up, down, left or right")
		}
		if n == 0 {
			return nil, dialectErr(src, "scroll_amount must be at least 1")
		}
		return []aci.Action{a}, nil
	case "wait":
		secs := 1.0
		if v, ok := in["duration"]; ok && v != nil {
			if secs, err = toFloat(v); err != nil {
				return nil, dialectErr(src, "duration: %v", err)
			}
		}
		return waitSeconds(src, secs)
	case "screenshot", "cursor_position":
		return []aci.Action{{Verb: aci.Screenshot}}, nil
	case "hold_key":
		return nil, dialectErr(src, "hold_key is not supported: the server has no timed key hold")
	}
	return nil, dialectErr(src, "zoom is not supported: the server has no zoomed view (observe with a larger max_long_edge instead)")
}

// isModifierName reports whether a keysym from keysym is a modifier.
func isModifierName(k string) bool {
	switch k {
	case "ctrl", "shift", "alt", "super":
		return true
	}
	return false
}
