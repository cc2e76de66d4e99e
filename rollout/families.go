package rollout

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/aci/dialect"
)

// CoordsSmartResize is the coordinate mode of models whose processor
// resizes each screenshot before they see it (Qwen2.5-VL, UI-TARS-1.5):
// every step declares the image space {w, h} that SmartResize gives for the
// delivered frame.
const CoordsSmartResize = "smart-resize"

// coordsMode is how an OpenAI policy declares its coordinates each step.
type coordsMode struct {
	fixed *aci.Coords // a fixed space; nil with smart false: the dialect's default, not sent
	smart bool        // smart-resize
}

// CheckCoords reports whether s is a coordinate mode OpenAI.Coords accepts.
func CheckCoords(s string) error {
	_, err := parseCoordsMode(s)
	return err
}

// parseCoordsMode reads --coords: "" (the dialect's default), screen, frame,
// norm, norm1000, WxH (an image space) or smart-resize.
func parseCoordsMode(s string) (coordsMode, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "":
		return coordsMode{}, nil
	case CoordsSmartResize:
		return coordsMode{smart: true}, nil
	}
	if w, h, ok := strings.Cut(s, "x"); ok {
		wi, err1 := strconv.Atoi(w)
		hi, err2 := strconv.Atoi(h)
		if err1 != nil || err2 != nil {
			return coordsMode{}, fmt.Errorf("coords %q: want WxH with whole numbers", s)
		}
		c, err := aci.ImageCoords(wi, hi)
		if err != nil {
			return coordsMode{}, err
		}
		return coordsMode{fixed: &c}, nil
	}
	c, err := aci.ParseCoords(s)
	if err != nil {
		return coordsMode{}, fmt.Errorf("coords %q: want screen, frame, norm, norm1000, WxH or %s", s, CoordsSmartResize)
	}
	return coordsMode{fixed: &c}, nil
}

// space is the space of this turn's coordinates: the declared one, or the
// dialect's default when nothing is declared. send is false when the server
// applies the default itself.
func (m coordsMode) space(d string, obs *aci.Observation) (c aci.Coords, send bool, err error) {
	switch {
	case m.fixed != nil:
		return *m.fixed, true, nil
	case m.smart:
		if obs == nil || obs.Display.Delivered.W <= 0 || obs.Display.Delivered.H <= 0 {
			return aci.Coords{}, false, fmt.Errorf("coords %s: the observation has no delivered frame size", CoordsSmartResize)
		}
		h, w, err := SmartResize(obs.Display.Delivered.H, obs.Display.Delivered.W)
		if err != nil {
			return aci.Coords{}, false, err
		}
		c, err := aci.ImageCoords(w, h)
		return c, err == nil, err
	}
	return dialect.DefaultCoords(d), false, nil
}

// Qwen2.5-VL's image processor bounds (qwen-vl-utils): sides are multiples
// of 28 and the area lies within these pixel counts.
const (
	resizeFactor    = 28
	resizeMinPixels = 4 * 28 * 28
	resizeMaxPixels = 16384 * 28 * 28
	resizeMaxRatio  = 200
)

// SmartResize is the size a Qwen2.5-VL-style processor resizes an h x w
// image to: both sides multiples of 28, the area within the processor's
// bounds, the aspect ratio kept as closely as that allows.
func SmartResize(h, w int) (int, int, error) {
	if h <= 0 || w <= 0 || max(h, w)/min(h, w) > resizeMaxRatio {
		return 0, 0, fmt.Errorf("smart resize: %dx%d is not a screenshot size", w, h)
	}
	f := float64(resizeFactor)
	round := func(v float64) int { return int(math.RoundToEven(v/f)) * resizeFactor }
	hb, wb := max(resizeFactor, round(float64(h))), max(resizeFactor, round(float64(w)))
	switch area := float64(h) * float64(w); {
	case hb*wb > resizeMaxPixels:
		beta := math.Sqrt(area / resizeMaxPixels)
		hb = int(math.Floor(float64(h)/beta/f)) * resizeFactor
		wb = int(math.Floor(float64(w)/beta/f)) * resizeFactor
	case hb*wb < resizeMinPixels:
		beta := math.Sqrt(resizeMinPixels / area)
		hb = int(math.Ceil(float64(h)*beta/f)) * resizeFactor
		wb = int(math.Ceil(float64(w)*beta/f)) * resizeFactor
	}
	return hb, wb, nil
}

// coordsText tells the model this turn's coordinate space.
func coordsText(c aci.Coords, obs *aci.Observation) string {
	var sw, sh, fw, fh int
	if obs != nil {
		sw, sh = obs.Display.W, obs.Display.H
		fw, fh = obs.Display.Delivered.W, obs.Display.Delivered.H
	}
	switch c.Space {
	case aci.CoordsFrame:
		return fmt.Sprintf("Coordinates are pixels of this %dx%d screenshot.", fw, fh)
	case aci.CoordsNorm:
		return "Coordinates are fractions from 0 to 1 of the screenshot's width and height."
	case aci.CoordsNorm1000:
		return "Coordinates are relative, from 0 to 1000 across the screenshot's width and height."
	case aci.CoordsImage:
		return fmt.Sprintf("Coordinates are pixels of the screenshot resized to %dx%d.", c.W, c.H)
	}
	return fmt.Sprintf("Coordinates are pixels of the %dx%d screen.", sw, sh)
}

// SystemPrompt is the default system prompt for a dialect: its action
// space written the way that model family writes it. The coordinate space
// is stated in each turn's text.
func SystemPrompt(d string) string {
	base := "You control a Linux desktop through its screen. Each turn you get a screenshot; reply with the next action(s). "
	switch d {
	case dialect.XML:
		return base + `Write each action as a tool call: <tool_call>{"name": "computer", "arguments": {"action": "left_click", "coordinate": [x, y]}}</tool_call>. ` +
			`Actions: left_click, double_click, right_click, mouse_move, left_click_drag (start_coordinate, coordinate), scroll (coordinate, scroll_direction, scroll_amount), type (text), key (keys), wait (duration), terminate (status: success|failure).`
	case dialect.JSON:
		return base + `Write each action as a JSON object, e.g. {"action": "left_click", "coordinate": [x, y]}; a list for several. ` +
			`Actions: left_click, double_click, right_click, mouse_move, left_click_drag, scroll, type, key, wait, terminate (status).`
	case dialect.UITARS:
		return base + "Answer in this format:\nThought: what you see and what to do next\nAction: the action\n\n" +
			"## Action space\n" +
			"click(start_box='<|box_start|>(x1,y1)<|box_end|>')\n" +
			"left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')\n" +
			"right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')\n" +
			"drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')\n" +
			"hotkey(key='ctrl c') # keys separated by spaces, lowercase\n" +
			"type(content='text') # end the content with \\n to press Enter after it\n" +
			"scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')\n" +
			"wait() # wait 5 seconds and look again\n" +
			"finished(content='answer') # the task is done\n" +
			"call_user() # the task cannot be done without a person"
	case dialect.Qwen:
		return base + "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
			"<tools>\n" + qwenToolSchema + "\n</tools>\n\n" +
			"For each function call, return a JSON object with the function name and arguments within <tool_call></tool_call> tags:\n" +
			"<tool_call>\n{\"name\": \"computer_use\", \"arguments\": {\"action\": \"left_click\", \"coordinate\": [x, y]}}\n</tool_call>"
	case dialect.OpenAI:
		return base + `Reply with a JSON list of computer_call items, e.g. [{"type": "computer_call", "call_id": "c1", "action": {"type": "click", "button": "left", "x": 10, "y": 20}}]. ` +
			`Actions: click {button: left|right|wheel, x, y}, double_click {x, y}, move {x, y}, drag {path: [{x, y}, ...]}, ` +
			`scroll {x, y, scroll_x, scroll_y} (pixels), type {text}, keypress {keys: ["CTRL", "C"]}, wait, screenshot.`
	case dialect.Anthropic:
		return base + `Reply with a JSON list of computer tool_use blocks, e.g. [{"type": "tool_use", "id": "t1", "name": "computer", "input": {"action": "left_click", "coordinate": [x, y]}}]. ` +
			`Actions: key (text, xdotool syntax such as ctrl+s), type (text), mouse_move, left_click, right_click, middle_click, double_click, triple_click (coordinate), ` +
			`left_click_drag (start_coordinate, coordinate), left_mouse_down, left_mouse_up, scroll (coordinate, scroll_direction, scroll_amount), wait (duration), screenshot.`
	}
	return base + "Write Python code using pyautogui in a ```python block (pyautogui.click(x, y), pyautogui.write('text'), " +
		"pyautogui.press('enter'), pyautogui.hotkey('ctrl', 'c'), pyautogui.scroll(n), time.sleep(s)). " +
		"Reply ```WAIT``` to wait, ```DONE``` when the task is complete, ```FAIL``` if it cannot be done."
}

// qwenToolSchema describes the computer_use function to Qwen models.
const qwenToolSchema = `{"type": "function", "function": {"name": "computer_use", "description": "Use a mouse and keyboard to interact with a computer, and take screenshots.", ` +
	`"parameters": {"type": "object", "required": ["action"], "properties": {` +
	`"action": {"type": "string", "enum": ["key", "type", "mouse_move", "left_click", "left_click_drag", "right_click", "middle_click", "double_click", "triple_click", "scroll", "hscroll", "wait", "terminate", "answer"]}, ` +
	`"keys": {"type": "array", "description": "keys pressed together, for action=key"}, ` +
	`"text": {"type": "string", "description": "for action=type and action=answer"}, ` +
	`"coordinate": {"type": "array", "description": "(x, y) for the mouse actions"}, ` +
	`"pixels": {"type": "number", "description": "scroll amount; positive scrolls up (or right for hscroll)"}, ` +
	`"time": {"type": "number", "description": "seconds, for action=wait"}, ` +
	`"status": {"type": "string", "enum": ["success", "failure"], "description": "for action=terminate"}}}}}`
