package dialect

import (
	"regexp"
	"strings"
)

// Markers of the model families' own forms. Each is specific to its family:
// a text that shows two of them is ambiguous and auto refuses it.
var (
	uitarsMarker = regexp.MustCompile(`(?:start_box|end_box|start_point|end_point)\s*=|<\|box_start\|>|\bpoint\s*=\s*['"]\s*<point>|` +
		`(?m)(?:^|Action\s*[:：])\s*(?:` + uitarsFuncs + `)\s*\(`)
	qwenMarker      = regexp.MustCompile(`"name"\s*:\s*"(?:computer_use|mobile_use)"`)
	openaiMarker    = regexp.MustCompile(`"type"\s*:\s*"computer_call"`)
	anthropicMarker = regexp.MustCompile(`"type"\s*:\s*"tool_use"`)
	osworldMarker   = regexp.MustCompile(`"action_type"\s*:|\bcomputer\s*\.\s*(?:terminate|wait)\s*\(|pyautogui\s*\.\s*\w+\s*\(\s*\*?\s*tag_[0-9]+\b|(?m)^\s*tag_[0-9]+\s*=`)
	osworldWord     = regexp.MustCompile(`^(?:` + "```" + `)?\s*(?:Done|Fail|Wait|done|fail|wait)\s*\.?\s*(?:` + "```" + `)?$`)
)

// uitarsFuncs are the UI-TARS function names that start an action line
// (the ones no other family writes bare).
const uitarsFuncs = `left_single|left_double|right_single|finished|call_user|long_press|press_home|press_back|open_app|` +
	`click|drag|select|hotkey|press|keydown|keyup|release|type|scroll|wait|hover`

// The generic dialects' shapes, tried when no family's marker is present.
var (
	xmlMarker  = regexp.MustCompile(`(?i)<\s*(tool_call|invoke|function_calls|function\s*=|action[\s>/])`)
	verbMarker = regexp.MustCompile(`(?i)<\s*([a-z_]+)[\s>/]`)
	pyMarker   = regexp.MustCompile("pyautogui\\.|time\\.sleep\\(|```(python|py)\\b")
	codeMarker = regexp.MustCompile(`(?m)^\s*(?:` + "```" + `\s*)?(WAIT|DONE|FAIL)\b`)
	jsonMarker = regexp.MustCompile(`[{\[]\s*"`)
)

// detect picks the dialect of a text for auto. A family's own marker wins;
// two families' markers make the text ambiguous (dialect_error naming
// them). Without one, the text's shape picks a generic dialect: XML tool
// calls first (they often wrap JSON), then pyautogui code, then JSON.
func detect(text string) (string, error) {
	var matched []string
	for _, m := range []struct {
		name string
		ok   bool
	}{
		{UITARS, uitarsMarker.MatchString(text)},
		{Qwen, qwenMarker.MatchString(text)},
		{OpenAI, openaiMarker.MatchString(text)},
		{Anthropic, anthropicMarker.MatchString(text)},
		{OSWorld, osworldMarker.MatchString(text) || osworldWord.MatchString(strings.TrimSpace(text))},
	} {
		if m.ok {
			matched = append(matched, m.name)
		}
	}
	switch {
	case len(matched) == 1:
		return matched[0], nil
	case len(matched) > 1:
		return "", dialectErr(text, "ambiguous text: it matches the %s dialects; name one", strings.Join(matched, ", "))
	case xmlMarker.MatchString(text) || hasVerbElement(text):
		return XML, nil
	case pyMarker.MatchString(text), codeMarker.MatchString(text) && !jsonMarker.MatchString(text):
		return PyAutoGUI, nil
	case jsonMarker.MatchString(text):
		return JSON, nil
	}
	return "", dialectErr(text, "no action found: text matches no dialect")
}

func hasVerbElement(text string) bool {
	for _, m := range verbMarker.FindAllStringSubmatch(text, -1) {
		if _, ok := actionNames[normName(m[1])]; ok {
			return true
		}
	}
	return false
}
