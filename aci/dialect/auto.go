package dialect

import (
	"regexp"
	"strings"
)

// Markers of the model families' own forms. Each is specific to its family:
// a text that shows two of them is ambiguous and auto refuses it.
var (
	uitarsArg      = regexp.MustCompile(`point\s*=\s*['"]\s*<point>`)
	uitarsCallLine = regexp.MustCompile(`^(?:(?:Action|动作|操作)[ \t]*[:：][ \t]*)?(?:` + uitarsFuncs + `)[ \t]*\(`)
	qwenMarker     = regexp.MustCompile(`"name"\s*:\s*"(?:computer_use|mobile_use)"`)
	openaiMarker   = regexp.MustCompile(`"type"\s*:\s*"computer_call"`)
	// openaiShellMarker is an OpenAI shell output item (local_shell,
	// shell tools): refused typed, but its family's to refuse.
	openaiShellMarker = regexp.MustCompile(`"type"\s*:\s*"(?:local_shell_call|shell_call|apply_patch_call)"`)
	// uitarsArgs are UI-TARS argument forms: an Action line that has one is
	// a UI-TARS call, not a Qwen description.
	uitarsArgs = regexp.MustCompile(`\b(?:start_box|end_box|start_point|end_point|point|content|key|direction)\s*=|<point>|<bbox>|<\|box_start\|>`)
	// qwenToolCalls is a Qwen tool call block with the one-line
	// "Action: …" description Qwen3-VL writes before it.
	qwenToolCalls   = regexp.MustCompile(`(?s)(?:(?m:^)[ \t]*(?:Action|动作|操作)[ \t]*[:：][^\n]*\n\s*)?<tool_call>.*?(?:</tool_call>|$)`)
	anthropicMarker = regexp.MustCompile(`"type"\s*:\s*"tool_use"`)
	computerCall    = regexp.MustCompile(`computer\.\s*(?:terminate|wait)\s*\(`)
	agentSCall      = regexp.MustCompile(`(?m)^[ \t]*agent\s*\.\s*(?:click|type|scroll|drag_and_drop|highlight_text_span|hotkey|hold_and_press|wait|done|fail|switch_applications|open|save_to_knowledge|set_cell_values)\s*\(`)
	tagUse          = regexp.MustCompile(`pyautogui\s*\.\s*\w+\s*\(\s*\*?\s*tag_[0-9]+\b|(?m)^[ \t]*tag_[0-9]+[ \t]*=`)
	osworldWord     = regexp.MustCompile(`^(?:` + "```" + `)?\s*(?:Done|Fail|Wait|done|fail|wait)\s*\.?\s*(?:` + "```" + `)?$`)
)

// uitarsLike reports a UI-TARS form: a box or point argument, or a line
// that is (after an optional Action: label) one of its calls.
func uitarsLike(text string) bool {
	if strings.Contains(text, "<|box_start|>") || strings.Contains(text, seedOpen) || strings.Contains(text, "<point>") && uitarsArg.MatchString(text) {
		return true
	}
	for _, arg := range []string{"start_box", "end_box", "start_point", "end_point"} {
		if i := strings.Index(text, arg); i >= 0 && strings.HasPrefix(strings.TrimLeft(text[i+len(arg):], " \t"), "=") {
			return true
		}
	}
	for line := range strings.Lines(text) {
		if uitarsCallLine.MatchString(strings.TrimLeft(line, " \t")) {
			return true
		}
	}
	return false
}

// osworldLike reports an OSWorld form: computer_13 JSON, OpenCUA's
// computer.* calls, Set-of-Mark labels, Agent-S's agent.* calls, or a bare
// Done / Fail / Wait.
func osworldLike(text string) bool {
	return strings.Contains(text, `"action_type"`) ||
		strings.Contains(text, "computer.") && computerCall.MatchString(text) ||
		strings.Contains(text, "tag_") && tagUse.MatchString(text) ||
		strings.Contains(text, "agent.") && agentSCall.MatchString(text) ||
		len(text) < 32 && osworldWord.MatchString(strings.TrimSpace(text))
}

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
	// Reasoning blocks are not the answer: a thought that quotes another
	// family's form must not make the text ambiguous.
	if t := stripThink(unsuffixTags(text)); strings.TrimSpace(t) != "" {
		text = t
	}
	qwen := (strings.Contains(text, "computer_use") || strings.Contains(text, "mobile_use")) && qwenMarker.MatchString(text)
	uitars := uitarsLike(text)
	if uitars && qwen && !uitarsLike(qwenToolCalls.ReplaceAllString(text, "")) && !uitarsArgs.MatchString(strings.Join(qwenToolCalls.FindAllString(text, -1), "\n")) {
		// Qwen3-VL's "Action: <what to do>" line before its tool call is
		// a description, even when it reads like a UI-TARS call.
		uitars = false
	}
	var matched []string
	for _, m := range []struct {
		name string
		ok   bool
	}{
		{UITARS, uitars},
		{Qwen, qwen},
		{OpenAI, (strings.Contains(text, "computer_call") && openaiMarker.MatchString(text)) ||
			strings.Contains(text, "_call") && openaiShellMarker.MatchString(text)},
		{Anthropic, strings.Contains(text, "tool_use") && anthropicMarker.MatchString(text)},
		{OSWorld, osworldLike(text)},
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
