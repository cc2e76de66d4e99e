package dialect

import (
	"sort"
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

// parseOpenAI reads OpenAI computer use (the Responses API's
// computer-use-preview tool; OpenAI's computer-use guide and
// openai-cua-sample-app): a whole response ({"output": [...]}), its output
// list, or single items, as JSON anywhere in the text. reasoning and
// message items carry no action and are skipped; each computer_call item
// runs its action (or its actions list). Chat Completions has no computer
// tool, so there is no tool-call shape to read. The shell-style items
// (local_shell_call, shell_call, apply_patch_call, and a function_call
// named shell) are refused as unsupported, naming them: no shell route
// runs model text yet.
//
// Actions: click {button: left|right|wheel, x, y} (back and forward are
// dialect_errors: the desktop has no such buttons), double_click {x, y},
// move {x, y}, drag {path: [{x, y}, ...]} (two points: a drag; more: a
// mouse_down at the first, moves through the rest, mouse_up at the last),
// scroll {x, y, scroll_x, scroll_y} (pixels, + right / down, 100 pixels a
// wheel step), type {text}, keypress {keys: ["CTRL", "C"]} (one chord),
// wait (1 s), screenshot. Coordinates are pixels of the screenshot as
// sent (coords frame).
func parseOpenAI(text string) (parsed, error) {
	vals, err := scanJSON(text)
	if err != nil {
		return parsed{}, err
	}
	var out []aci.Action
	for _, v := range vals {
		acts, err := openaiValue(v.val, v.src, 0)
		if err != nil {
			return parsed{}, err
		}
		out = append(out, acts...)
	}
	return parsed{acts: out}, nil
}

func openaiValue(v any, src string, depth int) ([]aci.Action, error) {
	if depth > 4 {
		return nil, dialectErr(src, "response nested too deep")
	}
	switch x := v.(type) {
	case []any:
		var out []aci.Action
		for _, e := range x {
			acts, err := openaiValue(e, src, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, acts...)
		}
		return out, nil
	case map[string]any:
		if list, ok := x["output"].([]any); ok {
			return openaiValue(list, src, depth+1)
		}
		typ, _ := x["type"].(string)
		switch typ {
		case "reasoning", "message":
			return nil, nil
		case "computer_call":
			if list, ok := x["actions"].([]any); ok {
				return openaiValue(list, src, depth+1)
			}
			a, ok := x["action"].(map[string]any)
			if !ok {
				return nil, dialectErr(src, "computer_call without an action")
			}
			return openaiAction(a, src)
		case "":
			if a, ok := x["action"].(map[string]any); ok {
				return openaiAction(a, src)
			}
			return nil, dialectErr(src, "object has no type")
		}
		if _, ok := openaiFields[typ]; ok {
			return openaiAction(x, src)
		}
		if what, ok := openaiShellItems[typ]; ok {
			return nil, unsupportedErr(src, "OpenAI %s item (%s) is not run: the task has no shell route for model text yet (only computer_call)", typ, what)
		}
		if typ == "function_call" {
			if name, _ := x["name"].(string); openaiShellFunctions[name] {
				return nil, unsupportedErr(src, "function_call %q is a shell command: the task has no shell route for model text yet (only computer_call)", name)
			}
		}
		return nil, dialectErr(src, "output item of type %q is not a computer_call", typ)
	}
	return nil, dialectErr(src, "want a response output item, got %T", v)
}

// openaiShellItems are the Responses output items of OpenAI's shell-style
// tools (local_shell, shell, apply_patch): refused as unsupported, naming
// them.
var openaiShellItems = map[string]string{
	"local_shell_call": "a local_shell command",
	"shell_call":       "a shell command",
	"apply_patch_call": "a file patch",
}

// openaiShellFunctions are function tools that agents built on OpenAI
// models (Codex's shell function) name for a shell command.
var openaiShellFunctions = map[string]bool{"shell": true, "bash": true, "exec_command": true, "container.exec": true}

// openaiFields are each action's fields besides type.
var openaiFields = map[string][]string{
	"click": {"button", "x", "y"}, "double_click": {"x", "y"}, "move": {"x", "y"},
	"drag": {"path"}, "scroll": {"x", "y", "scroll_x", "scroll_y"}, "type": {"text"},
	"keypress": {"keys"}, "wait": {}, "screenshot": {},
}

func openaiAction(a map[string]any, src string) ([]aci.Action, error) {
	typ, _ := a["type"].(string)
	fields, ok := openaiFields[typ]
	if !ok {
		return nil, dialectErr(src, "unknown computer action type %q", typ)
	}
	var unknown []string
	for k := range a {
		if k != "type" && !contains(fields, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, dialectErr(src, "%s has no field(s) %s", typ, strings.Join(unknown, ", "))
	}
	xy := func() (*aci.Target, error) {
		x, err := toFloat(a["x"])
		if err != nil {
			return nil, dialectErr(src, "%s x: %v", typ, err)
		}
		y, err := toFloat(a["y"])
		if err != nil {
			return nil, dialectErr(src, "%s y: %v", typ, err)
		}
		return aci.Px(x, y), nil
	}
	switch typ {
	case "click", "double_click":
		t, err := xy()
		if err != nil {
			return nil, err
		}
		verb, button := aci.Click, ""
		if typ == "double_click" {
			verb = aci.DoubleClick
		}
		if b, ok := a["button"]; ok {
			s, _ := b.(string)
			switch strings.ToLower(s) {
			case "left":
			case "right":
				button = "right"
			case "wheel", "middle":
				button = "middle"
			case "back", "forward":
				return nil, dialectErr(src, "the %s mouse button is not supported", s)
			default:
				return nil, dialectErr(src, "unknown button %v", b)
			}
		}
		return clickActions(src, verb, t, button, 1, nil)
	case "move":
		t, err := xy()
		if err != nil {
			return nil, err
		}
		return []aci.Action{{Verb: aci.Move, Target: t}}, nil
	case "drag":
		path, ok := a["path"].([]any)
		if !ok || len(path) < 2 {
			return nil, dialectErr(src, "drag path needs at least two points")
		}
		if len(path) > maxPath {
			return nil, dialectErr(src, "drag path of %d points is over %d", len(path), maxPath)
		}
		pts := make([]*aci.Target, len(path))
		for i, p := range path {
			t, err := toTarget(p)
			if err != nil {
				return nil, dialectErr(src, "drag path: %v", err)
			}
			pts[i] = t
		}
		return pathDrag(pts), nil
	case "scroll":
		t, err := xy()
		if err != nil {
			return nil, err
		}
		sx, err := optFloat(a, "scroll_x")
		if err != nil {
			return nil, dialectErr(src, "scroll_x: %v", err)
		}
		sy, err := optFloat(a, "scroll_y")
		if err != nil {
			return nil, dialectErr(src, "scroll_y: %v", err)
		}
		act := aci.Action{Verb: aci.Scroll, Target: t, DX: pixelSteps(sx), DY: pixelSteps(sy)}
		if act.DX == 0 && act.DY == 0 {
			return nil, dialectErr(src, "scroll needs a non-zero scroll_x or scroll_y")
		}
		return []aci.Action{act}, nil
	case "type":
		s, ok := a["text"].(string)
		if !ok {
			return nil, dialectErr(src, "type needs text")
		}
		return []aci.Action{{Verb: aci.TypeText, Text: s}}, nil
	case "keypress":
		list, ok := a["keys"].([]any)
		if !ok || len(list) == 0 {
			return nil, dialectErr(src, "keypress needs keys")
		}
		names := make([]string, len(list))
		for i, k := range list {
			if names[i], ok = k.(string); !ok {
				return nil, dialectErr(src, "keypress keys must be strings")
			}
		}
		c, err := chord(names...)
		if err != nil {
			return nil, dialectErr(src, "%s", aci.AsError(err).Message)
		}
		return []aci.Action{{Verb: aci.Key, Keys: c}}, nil
	case "wait":
		return []aci.Action{{Verb: aci.Wait, MS: 1000}}, nil
	}
	return []aci.Action{{Verb: aci.Screenshot}}, nil
}

// maxPath bounds the points of a drag path.
const maxPath = 1000

// pathDrag drags along pts: a drag for two points; for more, the button
// goes down at the first, the pointer moves through the others and the
// button comes up at the last, so no point of the path is lost.
func pathDrag(pts []*aci.Target) []aci.Action {
	if len(pts) == 2 {
		return []aci.Action{{Verb: aci.Drag, Target: pts[0], To: pts[1]}}
	}
	out := []aci.Action{{Verb: aci.MouseDown, Target: pts[0]}}
	for _, p := range pts[1 : len(pts)-1] {
		out = append(out, aci.Action{Verb: aci.Move, Target: p})
	}
	return append(out, aci.Action{Verb: aci.MouseUp, Target: pts[len(pts)-1]})
}

func optFloat(m map[string]any, k string) (float64, error) {
	v, ok := m[k]
	if !ok || v == nil {
		return 0, nil
	}
	return toFloat(v)
}
