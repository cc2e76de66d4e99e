// Package dialect parses raw model text into typed aci actions. It knows three
// dialects that computer-use models write:
//
//   - "pyautogui": OSWorld-style Python (pyautogui.click(...), time.sleep(...),
//     and the bare WAIT, DONE and FAIL codes), inside ``` fences or bare lines;
//   - "xml": tool calls as <tool_call>{json}</tool_call>, <invoke name=..>
//     with <parameter name=..> children, <function=..> with <parameter=..>,
//     and plain attribute/element XML such as <click x="10" y="20"/>;
//   - "json": computer_use-style objects ({"action":"left_click",
//     "coordinate":[x,y]}), OpenAI-style tool calls and actions, and aci's own
//     {"verb":...} actions, alone, in a list, or inside ```json fences;
//
// and "auto", which picks one of them from the text's shape.
//
// Parsing is all-or-nothing: anything action-shaped that cannot be mapped
// fails the whole parse with an *aci.Error of code dialect_error whose Detail
// is the offending snippet, so nothing in that message runs. Text around the
// actions (reasoning, prose, <think> blocks) is ignored.
//
// Coordinates are screen pixels (point_px) unless the model names a target
// kind explicitly. keyDown/keyUp pairs become chords (see parsePyautogui).
package dialect

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

// Dialect names.
const (
	PyAutoGUI = "pyautogui"
	XML       = "xml"
	JSON      = "json"
	Auto      = "auto"
)

// Names returns the dialect names Parse accepts, in a stable order.
func Names() []string { return []string{PyAutoGUI, XML, JSON, Auto} }

// MaxText is the longest text Parse reads.
const MaxText = 1 << 20

// maxSnippet bounds the snippet an error carries.
const maxSnippet = 200

// Parsed is what Parse read from a model's text.
type Parsed struct {
	Actions []aci.Action
	// Dialect is the dialect that read the text (auto resolves to one).
	Dialect string
	// Coords is the dialect's default coordinate space: how its numbers are
	// read when neither the step nor the env declares one.
	Coords aci.Coords
}

// Parse turns a model's raw text into actions. dialect is one of Names; an
// unknown name is bad_request. Every parse failure is an *aci.Error with code
// dialect_error and the offending snippet (a string) in Detail. A text with no
// action in it is a dialect_error too.
func Parse(dialect, text string) (Parsed, error) {
	if len(text) > MaxText {
		return Parsed{}, dialectErr(text, "text of %d bytes is over the %d-byte limit", len(text), MaxText)
	}
	var (
		acts []aci.Action
		err  error
		name = strings.ToLower(strings.TrimSpace(dialect))
	)
	switch name {
	case PyAutoGUI:
		acts, err = parsePyautogui(text)
	case XML:
		acts, err = parseXML(text)
	case JSON:
		acts, err = parseJSON(text)
	case Auto, "":
		name, acts, err = parseAuto(text)
	default:
		return Parsed{}, &aci.Error{Code: aci.CodeBadRequest,
			Message: fmt.Sprintf("unknown dialect %q (want one of %s)", dialect, strings.Join(Names(), ", "))}
	}
	if err != nil {
		return Parsed{}, err
	}
	if len(acts) == 0 {
		return Parsed{}, dialectErr(text, "no action found in %s text", strings.ToLower(dialect))
	}
	return Parsed{Actions: acts, Dialect: name, Coords: aci.Coords{Space: aci.CoordsScreen}}, nil
}

var (
	xmlMarker  = regexp.MustCompile(`(?i)<\s*(tool_call|invoke|function_calls|function\s*=|action[\s>/])`)
	verbMarker = regexp.MustCompile(`(?i)<\s*([a-z_]+)[\s>/]`)
	pyMarker   = regexp.MustCompile("pyautogui\\.|time\\.sleep\\(|```(python|py)\\b")
	codeMarker = regexp.MustCompile(`(?m)^\s*(?:` + "```" + `\s*)?(WAIT|DONE|FAIL)\b`)
	jsonMarker = regexp.MustCompile(`[{\[]\s*"`)
)

// parseAuto picks a dialect from the text's shape: XML tool calls first (they
// often wrap JSON), then pyautogui code, then JSON, then the bare codes.
func parseAuto(text string) (string, []aci.Action, error) {
	var (
		acts []aci.Action
		err  error
	)
	switch {
	case xmlMarker.MatchString(text) || hasVerbElement(text):
		acts, err = parseXML(text)
		return XML, acts, err
	case pyMarker.MatchString(text), codeMarker.MatchString(text) && !jsonMarker.MatchString(text):
		acts, err = parsePyautogui(text)
		return PyAutoGUI, acts, err
	case jsonMarker.MatchString(text):
		acts, err = parseJSON(text)
		return JSON, acts, err
	}
	return "", nil, dialectErr(text, "no action found: text matches no dialect")
}

func hasVerbElement(text string) bool {
	for _, m := range verbMarker.FindAllStringSubmatch(text, -1) {
		if _, ok := actionNames[normName(m[1])]; ok {
			return true
		}
	}
	return false
}

// dialectErr builds a dialect_error carrying a bounded snippet.
func dialectErr(snippet, format string, args ...any) *aci.Error {
	return &aci.Error{Code: aci.CodeDialectError, Message: fmt.Sprintf(format, args...), Detail: clip(snippet)}
}

func clip(s string) string {
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > maxSnippet {
		return string(r[:maxSnippet]) + "…"
	}
	return s
}

// normName lowercases a function or action name and folds separators to '_'.
func normName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.NewReplacer("-", "_", " ", "_", ".", "_").Replace(s)
}
