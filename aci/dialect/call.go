package dialect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

// call is one named tool call with named arguments, the shape the XML and
// JSON dialects normalize to before mapping onto aci actions.
type call struct {
	name    string
	args    map[string]any
	snippet string
}

// wrapperNames are tool names whose real action is in the "action" argument.
var wrapperNames = map[string]bool{
	"computer": true, "computer_use": true, "computer_20241022": true, "computer_20250124": true,
	"computer_20250429": true, "gui": true, "desktop": true, "mouse": true, "keyboard": true,
	"action": true, "tool": true, "pyautogui": true,
}

// ignoredArgs are commentary fields models attach to calls; they carry no action.
var ignoredArgs = map[string]bool{
	"thought": true, "thoughts": true, "reason": true, "reasoning": true, "description": true,
	"explanation": true, "id": true, "call_id": true, "note": true,
}

// actionNames maps every accepted action name to its builder.
var actionNames map[string]func(*argReader) ([]aci.Action, error)

func init() {
	click := func(verb aci.Verb) func(*argReader) ([]aci.Action, error) {
		return func(r *argReader) ([]aci.Action, error) { return r.click(verb) }
	}
	actionNames = map[string]func(*argReader) ([]aci.Action, error){
		"click": click(aci.Click), "left_click": click(aci.Click), "tap": click(aci.Click),
		"double_click": click(aci.DoubleClick), "doubleclick": click(aci.DoubleClick), "dblclick": click(aci.DoubleClick),
		"left_double_click": click(aci.DoubleClick),
		"right_click":       click(aci.RightClick), "rightclick": click(aci.RightClick),
		"middle_click": func(r *argReader) ([]aci.Action, error) { r.button = "middle"; return r.click(aci.Click) },
		"triple_click": func(r *argReader) ([]aci.Action, error) { r.clicks = 3; return r.click(aci.Click) },
		"move":         (*argReader).move, "mouse_move": (*argReader).move, "move_to": (*argReader).move,
		"moveto": (*argReader).move, "hover": (*argReader).move,
		"drag": (*argReader).drag, "left_click_drag": (*argReader).drag, "drag_to": (*argReader).drag,
		"dragto":     (*argReader).drag,
		"mouse_down": (*argReader).mouseDown, "left_mouse_down": (*argReader).mouseDown, "mousedown": (*argReader).mouseDown,
		"mouse_up": (*argReader).mouseUp, "left_mouse_up": (*argReader).mouseUp, "mouseup": (*argReader).mouseUp,
		"scroll": (*argReader).scroll,
		"type":   (*argReader).typeText, "type_text": (*argReader).typeText, "write": (*argReader).typeText,
		"typewrite": (*argReader).typeText, "input": (*argReader).typeText, "input_text": (*argReader).typeText,
		"key": (*argReader).key, "keypress": (*argReader).key, "key_press": (*argReader).key,
		"press": (*argReader).key, "hotkey": (*argReader).key,
		"wait": (*argReader).wait, "sleep": (*argReader).wait,
		"screenshot": simple(aci.Screenshot), "clipboard_get": simple(aci.ClipboardGet),
		"clipboard_set": (*argReader).clipboardSet,
		"launch_app":    (*argReader).launch, "launch": (*argReader).launch, "open_app": (*argReader).launch,
		"activate_window": (*argReader).activate, "focus_window": (*argReader).activate,
		"done": simple(aci.Done), "finish": simple(aci.Done), "success": simple(aci.Done),
		"fail": simple(aci.Fail), "failure": simple(aci.Fail), "infeasible": simple(aci.Fail),
		"terminate": (*argReader).terminate,
	}
	addElementActions(actionNames) // element.go
}

func simple(v aci.Verb) func(*argReader) ([]aci.Action, error) {
	return func(r *argReader) ([]aci.Action, error) { return []aci.Action{{Verb: v}}, nil }
}

// actions maps the call onto aci actions.
func (c call) actions() ([]aci.Action, error) {
	if c.args == nil {
		c.args = map[string]any{}
	}
	if _, ok := c.args["verb"]; ok {
		return c.native()
	}
	name := normName(c.name)
	if a, ok := c.args["action"].(string); ok && (name == "" || wrapperNames[name]) {
		name = normName(a)
		delete(c.args, "action")
	} else if t, ok := c.args["type"].(string); ok && name == "" {
		name = normName(t) // OpenAI computer-use action objects
		delete(c.args, "type")
	}
	if name == "" {
		return nil, dialectErr(c.snippet, "call names no action")
	}
	build, ok := actionNames[name]
	if !ok {
		return nil, dialectErr(c.snippet, "unknown action %q", name)
	}
	r := &argReader{c: c, used: map[string]bool{}}
	acts, err := build(r)
	if err != nil {
		return nil, err
	}
	if err := r.finish(); err != nil {
		return nil, err
	}
	return acts, nil
}

// native decodes aci's own action object ({"verb": ...}) strictly.
func (c call) native() ([]aci.Action, error) {
	b, err := json.Marshal(c.args)
	if err != nil {
		return nil, dialectErr(c.snippet, "action: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var a aci.Action
	if err := dec.Decode(&a); err != nil {
		return nil, dialectErr(c.snippet, "action: %v", err)
	}
	if !a.Verb.Known() {
		return nil, dialectErr(c.snippet, "unknown verb %q", a.Verb)
	}
	if a.Keys != "" {
		k, err := chord(a.Keys)
		if err != nil {
			return nil, dialectErr(c.snippet, "%s", aci.AsError(err).Message)
		}
		a.Keys = k
	}
	return []aci.Action{a}, nil
}

// argReader reads a call's arguments and remembers which it used, so that
// unknown arguments fail the call instead of being silently dropped.
type argReader struct {
	c      call
	used   map[string]bool
	button string // forced by the action name
	clicks int    // forced by the action name
}

func (r *argReader) errf(format string, args ...any) error {
	return dialectErr(r.c.snippet, format, args...)
}

// get returns the first present argument among keys.
func (r *argReader) get(keys ...string) (any, string, bool) {
	for _, k := range keys {
		if v, ok := r.c.args[k]; ok && v != nil {
			r.used[k] = true
			return v, k, true
		}
	}
	return nil, "", false
}

func (r *argReader) num(keys ...string) (float64, bool, error) {
	v, k, ok := r.get(keys...)
	if !ok {
		return 0, false, nil
	}
	f, err := toFloat(v)
	if err != nil {
		return 0, false, r.errf("argument %s: %v", k, err)
	}
	return f, true, nil
}

func (r *argReader) str(keys ...string) (string, bool, error) {
	v, k, ok := r.get(keys...)
	if !ok {
		return "", false, nil
	}
	switch s := v.(type) {
	case string:
		return s, true, nil
	case float64, int, int64, bool:
		return fmt.Sprint(s), true, nil
	}
	return "", false, r.errf("argument %s: want a string, got %T", k, v)
}

// point reads a target from a coordinate-like argument among keys, or from
// x/y when xy is true.
func (r *argReader) point(xy bool, keys ...string) (*aci.Target, error) {
	if t, err := r.ref(); t != nil || err != nil { // an element ref (element.go)
		return t, err
	}
	if v, k, ok := r.get(keys...); ok {
		if t, isRef, err := asRef(v); isRef {
			if err != nil {
				return nil, r.errf("argument %s: %s", k, aci.AsError(err).Message)
			}
			return t, nil
		}
		t, err := toTarget(v)
		if err != nil {
			return nil, r.errf("argument %s: %v", k, err)
		}
		return t, nil
	}
	if !xy {
		return nil, nil
	}
	x, okx, err := r.num("x")
	if err != nil {
		return nil, err
	}
	y, oky, err := r.num("y")
	if err != nil {
		return nil, err
	}
	if okx != oky {
		return nil, r.errf("point needs both x and y")
	}
	if !okx {
		return nil, nil
	}
	return aci.Px(x, y), nil
}

func (r *argReader) finish() error {
	var unknown []string
	for k := range r.c.args {
		if !r.used[k] && !ignoredArgs[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return r.errf("unknown argument(s) %s", strings.Join(unknown, ", "))
	}
	return nil
}

func (r *argReader) modifiers() ([]string, error) {
	v, k, ok := r.get("modifiers", "text", "hold_keys")
	if !ok {
		return nil, nil
	}
	var names []string
	switch m := v.(type) {
	case string:
		names = splitChord(m)
	case []any:
		for _, e := range m {
			s, ok := e.(string)
			if !ok {
				return nil, r.errf("argument %s: want key names", k)
			}
			names = append(names, s)
		}
	default:
		return nil, r.errf("argument %s: want key names", k)
	}
	var out []string
	for _, n := range names {
		ks, ok := keysym(n)
		if !ok {
			return nil, r.errf("argument %s: unknown key %q", k, n)
		}
		out = append(out, ks)
	}
	return out, nil
}

func (r *argReader) click(verb aci.Verb) ([]aci.Action, error) {
	t, err := r.point(true, "coordinate", "coordinates", "coords", "position", "point", "target", "start_box")
	if err != nil {
		return nil, err
	}
	button := r.button
	if b, ok, err := r.str("button"); err != nil {
		return nil, err
	} else if ok {
		button = strings.ToLower(b)
	}
	clicks := r.clicks
	if n, ok, err := r.num("clicks", "num_clicks", "click_count"); err != nil {
		return nil, err
	} else if ok {
		clicks = int(min(max(n, -1), 11)) // over 10 is refused by clickActions
	}
	mods, err := r.modifiers()
	if err != nil {
		return nil, err
	}
	return clickActions(r.c.snippet, verb, t, button, clicks, mods)
}

// clickActions builds a click of verb at t (nil = current pointer) with the
// given button and click count; a count of 3 or more becomes that many clicks.
func clickActions(snippet string, verb aci.Verb, t *aci.Target, button string, clicks int, mods []string) ([]aci.Action, error) {
	switch button {
	case "", "left", "primary":
		button = ""
	case "right", "secondary":
		if verb == aci.Click {
			verb, button = aci.RightClick, ""
		} else {
			button = "right"
		}
	case "middle", "wheel":
		button = "middle"
	default:
		return nil, dialectErr(snippet, "unknown button %q", button)
	}
	if clicks > 10 {
		return nil, dialectErr(snippet, "clicks=%d is too many", clicks)
	}
	if t == nil {
		return clickHere(snippet, verb, button, clicks, mods)
	}
	a := aci.Action{Verb: verb, Target: t, Button: button, Modifiers: mods}
	switch {
	case clicks <= 1:
		return []aci.Action{a}, nil
	case clicks == 2 && verb == aci.Click:
		a.Verb = aci.DoubleClick
		return []aci.Action{a}, nil
	case clicks > 10:
		return nil, dialectErr(snippet, "clicks=%d is too many", clicks)
	}
	out := make([]aci.Action, clicks)
	for i := range out {
		out[i] = a
	}
	return out, nil
}

// clickHere clicks where the pointer is: a click verb needs a point, so the
// presses are mouse_down/mouse_up pairs, which do not.
func clickHere(snippet string, verb aci.Verb, button string, clicks int, mods []string) ([]aci.Action, error) {
	if len(mods) > 0 {
		return nil, dialectErr(snippet, "a click holding %s needs a point", strings.Join(mods, "+"))
	}
	n := max(clicks, 1)
	switch verb {
	case aci.DoubleClick:
		n = max(n, 2)
	case aci.RightClick:
		button = "right"
	}
	out := make([]aci.Action, 0, 2*n)
	for range n {
		out = append(out, aci.Action{Verb: aci.MouseDown, Button: button}, aci.Action{Verb: aci.MouseUp, Button: button})
	}
	return out, nil
}

func (r *argReader) move() ([]aci.Action, error) {
	t, err := r.point(true, "coordinate", "coordinates", "coords", "position", "point", "target", "to")
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, r.errf("move needs a point")
	}
	return []aci.Action{{Verb: aci.Move, Target: t}}, nil
}

func (r *argReader) drag() ([]aci.Action, error) {
	var from, to *aci.Target
	if v, _, ok := r.get("path"); ok {
		pts, ok := v.([]any)
		if !ok || len(pts) < 2 {
			return nil, r.errf("drag path needs at least two points")
		}
		var err error
		if from, err = toTarget(pts[0]); err != nil {
			return nil, r.errf("drag path: %v", err)
		}
		if to, err = toTarget(pts[len(pts)-1]); err != nil {
			return nil, r.errf("drag path: %v", err)
		}
	} else {
		var err error
		if from, err = r.point(false, "start_coordinate", "from", "start", "start_box", "source"); err != nil {
			return nil, err
		}
		if to, err = r.point(true, "coordinate", "to", "end_coordinate", "end", "end_box", "destination", "target"); err != nil {
			return nil, err
		}
	}
	if to == nil {
		return nil, r.errf("drag needs a destination")
	}
	a := aci.Action{Verb: aci.Drag, Target: from, To: to}
	if b, ok, err := r.str("button"); err != nil {
		return nil, err
	} else if ok && b != "left" {
		a.Button = strings.ToLower(b)
	}
	if d, ok, err := r.num("duration_ms"); err != nil {
		return nil, err
	} else if ok {
		a.DurationMS = int(d)
	}
	return []aci.Action{a}, nil
}

func (r *argReader) mouseDown() ([]aci.Action, error) { return r.mouseButton(aci.MouseDown) }
func (r *argReader) mouseUp() ([]aci.Action, error)   { return r.mouseButton(aci.MouseUp) }

func (r *argReader) mouseButton(v aci.Verb) ([]aci.Action, error) {
	t, err := r.point(true, "coordinate", "coordinates", "position", "point", "target")
	if err != nil {
		return nil, err
	}
	a := aci.Action{Verb: v, Target: t}
	if b, ok, err := r.str("button"); err != nil {
		return nil, err
	} else if ok && b != "left" {
		a.Button = strings.ToLower(b)
	}
	return []aci.Action{a}, nil
}

// wheelSteps is a step count as an int, kept within ±(maxSteps+1) like
// pixelSteps.
func wheelSteps(f float64) int {
	switch {
	case math.IsNaN(f):
		return 0
	case f > maxSteps:
		return maxSteps + 1
	case f < -maxSteps:
		return -maxSteps - 1
	}
	return int(f)
}

// pixelsPerStep converts pixel scroll amounts (OpenAI scroll_x/scroll_y,
// Qwen "pixels") to wheel steps; any non-zero amount is at least one step.
const pixelsPerStep = 100

// maxSteps bounds the wheel steps a parsed scroll may ask for.
const maxSteps = 1000

// An amount over maxSteps wheel steps is kept at maxSteps+1, still over
// every limit the guest enforces (so it is refused there, not shortened),
// without overflowing an int.
func pixelSteps(p float64) int {
	if p == 0 || math.IsNaN(p) {
		return 0
	}
	n := maxSteps + 1
	if s := math.Ceil(math.Abs(p) / pixelsPerStep); s <= maxSteps {
		n = int(s)
	}
	if p < 0 {
		return -n
	}
	return n
}

func (r *argReader) scroll() ([]aci.Action, error) {
	t, err := r.point(true, "coordinate", "coordinates", "position", "point", "target")
	if err != nil {
		return nil, err
	}
	a := aci.Action{Verb: aci.Scroll, Target: t}
	if dx, ok, err := r.num("dx"); err != nil {
		return nil, err
	} else if ok {
		a.DX = wheelSteps(dx)
	}
	if dy, ok, err := r.num("dy"); err != nil {
		return nil, err
	} else if ok {
		a.DY = wheelSteps(dy)
	}
	// OpenAI: scroll_x/scroll_y in pixels, + right/down.
	if sx, ok, err := r.num("scroll_x"); err != nil {
		return nil, err
	} else if ok {
		a.DX = pixelSteps(sx)
	}
	if sy, ok, err := r.num("scroll_y"); err != nil {
		return nil, err
	} else if ok {
		a.DY = pixelSteps(sy)
	}
	// Qwen computer_use: pixels, + up.
	if p, ok, err := r.num("pixels"); err != nil {
		return nil, err
	} else if ok {
		a.DY = -pixelSteps(p)
	}
	// Anthropic: scroll_direction + scroll_amount (wheel steps).
	dir, hasDir, err := r.str("scroll_direction", "direction")
	if err != nil {
		return nil, err
	}
	amount, hasAmount, err := r.num("scroll_amount", "amount", "clicks", "steps")
	if err != nil {
		return nil, err
	}
	if hasDir {
		n := 3
		if hasAmount {
			n = wheelSteps(math.Abs(amount))
		}
		switch strings.ToLower(dir) {
		case "up":
			a.DY = -n
		case "down":
			a.DY = n
		case "left":
			a.DX = -n
		case "right":
			a.DX = n
		default:
			return nil, r.errf("unknown scroll direction %q", dir)
		}
	} else if hasAmount {
		a.DY = wheelSteps(amount) // bare amount: + down, like dy
	}
	if a.DX == 0 && a.DY == 0 {
		return nil, r.errf("scroll needs a direction or an amount")
	}
	return []aci.Action{a}, nil
}

func (r *argReader) typeText() ([]aci.Action, error) {
	s, ok, err := r.str("text", "content", "value", "message", "string")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, r.errf("type needs text")
	}
	return []aci.Action{{Verb: aci.TypeText, Text: s}}, nil
}

func (r *argReader) key() ([]aci.Action, error) {
	v, k, ok := r.get("keys", "key", "text", "combo", "hotkey")
	if !ok {
		return nil, r.errf("key needs keys")
	}
	var names []string
	switch kv := v.(type) {
	case string:
		names = []string{kv}
	case []any:
		for _, e := range kv {
			s, ok := e.(string)
			if !ok {
				return nil, r.errf("argument %s: want key names", k)
			}
			names = append(names, s)
		}
	default:
		return nil, r.errf("argument %s: want key names", k)
	}
	// A Qwen/OpenAI key list is one chord; an Anthropic "text" may hold
	// several space-separated chords ("ctrl+a Delete") – keep those apart.
	var acts []aci.Action
	if s, isStr := v.(string); isStr && strings.Contains(strings.TrimSpace(s), " ") && strings.ContainsAny(s, "+") {
		for _, part := range strings.Fields(s) {
			c, err := chord(part)
			if err != nil {
				return nil, r.errf("%s", aci.AsError(err).Message)
			}
			acts = append(acts, aci.Action{Verb: aci.Key, Keys: c})
		}
		return acts, nil
	}
	c, err := chord(names...)
	if err != nil {
		return nil, r.errf("%s", aci.AsError(err).Message)
	}
	return []aci.Action{{Verb: aci.Key, Keys: c}}, nil
}

func (r *argReader) wait() ([]aci.Action, error) {
	ms := 1000.0
	if v, ok, err := r.num("ms", "duration_ms", "milliseconds"); err != nil {
		return nil, err
	} else if ok {
		ms = v
	} else if v, ok, err := r.num("duration", "time", "seconds", "secs"); err != nil {
		return nil, err
	} else if ok {
		ms = v * 1000
	}
	if ms < 0 || ms > 600_000 {
		return nil, r.errf("wait of %vms is out of range", ms)
	}
	return []aci.Action{{Verb: aci.Wait, MS: int(ms)}}, nil
}

func (r *argReader) clipboardSet() ([]aci.Action, error) {
	s, ok, err := r.str("text", "content", "value")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, r.errf("clipboard_set needs text")
	}
	return []aci.Action{{Verb: aci.ClipboardSet, Text: s}}, nil
}

func (r *argReader) launch() ([]aci.Action, error) {
	app, ok, err := r.str("app", "name", "application", "command")
	if err != nil {
		return nil, err
	}
	if !ok || app == "" {
		return nil, r.errf("launch_app needs app")
	}
	a := aci.Action{Verb: aci.LaunchApp, App: app}
	if v, _, ok := r.get("args"); ok {
		list, ok := v.([]any)
		if !ok {
			return nil, r.errf("argument args: want a list of strings")
		}
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				return nil, r.errf("argument args: want a list of strings")
			}
			a.Args = append(a.Args, s)
		}
	}
	return []aci.Action{a}, nil
}

func (r *argReader) activate() ([]aci.Action, error) {
	id, ok, err := r.num("window_id", "window", "id")
	if err != nil {
		return nil, err
	}
	if !ok || id <= 0 || id > math.MaxUint32 {
		return nil, r.errf("activate_window needs a window_id")
	}
	return []aci.Action{{Verb: aci.ActivateWindow, WindowID: uint32(id)}}, nil
}

func (r *argReader) terminate() ([]aci.Action, error) {
	s, ok, err := r.str("status", "result")
	if err != nil {
		return nil, err
	}
	if !ok {
		return []aci.Action{{Verb: aci.Done}}, nil
	}
	switch strings.ToLower(s) {
	case "success", "done", "succeeded", "complete", "completed":
		return []aci.Action{{Verb: aci.Done}}, nil
	case "failure", "fail", "failed", "infeasible":
		return []aci.Action{{Verb: aci.Fail}}, nil
	}
	return nil, r.errf("unknown terminate status %q", s)
}

// toFloat accepts JSON numbers and numeric strings.
func toFloat(v any) (float64, error) {
	switch n := v.(type) {
	case float64:
		return n, nil
	case int:
		return float64(n), nil
	case int64:
		return float64(n), nil
	case json.Number:
		return n.Float64()
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		if err != nil {
			return 0, fmt.Errorf("want a number, got %q", n)
		}
		return f, nil
	}
	return 0, fmt.Errorf("want a number, got %T", v)
}

// toTarget accepts [x, y], "[x, y]", "(x, y)", "x, y", {"x":..,"y":..} and
// aci targets {"kind":..,"x":..,"y":..}. Untyped points are pixels.
func toTarget(v any) (*aci.Target, error) {
	switch p := v.(type) {
	case []any:
		if len(p) != 2 {
			if len(p) == 4 { // a box [x1, y1, x2, y2]: its centre
				var f [4]float64
				for i, e := range p {
					n, err := toFloat(e)
					if err != nil {
						return nil, err
					}
					f[i] = n
				}
				return aci.Px((f[0]+f[2])/2, (f[1]+f[3])/2), nil
			}
			return nil, fmt.Errorf("a point needs 2 numbers, got %d", len(p))
		}
		x, err := toFloat(p[0])
		if err != nil {
			return nil, err
		}
		y, err := toFloat(p[1])
		if err != nil {
			return nil, err
		}
		return aci.Px(x, y), nil
	case map[string]any:
		x, err := toFloat(p["x"])
		if err != nil {
			return nil, fmt.Errorf("point x: %v", err)
		}
		y, err := toFloat(p["y"])
		if err != nil {
			return nil, fmt.Errorf("point y: %v", err)
		}
		kind := aci.PointPx
		if k, ok := p["kind"].(string); ok {
			if k != aci.PointPx && k != aci.PointNorm {
				return nil, fmt.Errorf("unknown target kind %q", k)
			}
			kind = k
		}
		for k := range p {
			if k != "x" && k != "y" && k != "kind" {
				return nil, fmt.Errorf("unknown point field %q", k)
			}
		}
		return &aci.Target{Kind: kind, X: x, Y: y}, nil
	case string:
		s := strings.TrimSpace(p)
		s = strings.TrimPrefix(strings.TrimPrefix(s, "["), "(")
		s = strings.TrimSuffix(strings.TrimSuffix(s, "]"), ")")
		parts := strings.Split(s, ",")
		list := make([]any, len(parts))
		for i, e := range parts {
			list[i] = strings.TrimSpace(e)
		}
		if len(parts) != 2 && len(parts) != 4 {
			return nil, fmt.Errorf("cannot read a point from %q", p)
		}
		return toTarget(list)
	}
	return nil, fmt.Errorf("cannot read a point from %T", v)
}
