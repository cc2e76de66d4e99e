// Package dialect parses raw model text into typed aci actions. It reads
// the generic forms computer-use models write and the model families' own:
//
//   - "pyautogui": OSWorld-style Python (pyautogui.click(...), time.sleep(...),
//     and the bare WAIT, DONE and FAIL codes), inside ``` fences or bare lines;
//   - "xml": tool calls as <tool_call>{json}</tool_call>, <invoke name=..>
//     with <parameter name=..> children, <function=..> with <parameter=..>,
//     and plain attribute/element XML such as <click x="10" y="20"/>;
//   - "json": computer_use-style objects ({"action":"left_click",
//     "coordinate":[x,y]}), OpenAI-style tool calls and actions, and aci's own
//     {"verb":...} actions, alone, in a list, or inside ```json fences;
//   - "uitars": UI-TARS and Seed GUI agents (Thought: ... Action:
//     click(start_box='(x,y)')), see parseUITARS;
//   - "qwen": the computer_use tool of Qwen2.5-VL and Qwen3-VL, see parseQwen;
//   - "openai_computer": OpenAI computer-use computer_call items, see
//     parseOpenAI;
//   - "anthropic_computer": Claude computer-use tool_use blocks, see
//     parseAnthropic;
//   - "osworld": OSWorld's agents (pyautogui, computer_13 JSON, Set-of-Mark
//     labels, OpenCUA's computer.* calls), see parseOSWorld;
//
// and "auto", which picks the family whose own forms the text shows (two
// families' forms is a dialect_error naming them), else a generic dialect
// from the text's shape.
//
// Parsing is all-or-nothing: anything action-shaped that cannot be mapped
// fails the whole parse with an *aci.Error of code dialect_error whose Detail
// is the offending snippet, so nothing in that message runs. A form that is
// read but asks for what this server cannot do (Qwen mobile_use's phone
// buttons and app launcher, Claude's bash and text-editor tools, OpenAI's
// shell calls, Agent-S element descriptions that need a grounding model) is
// refused with code unsupported instead, the message naming it. Text around the
// actions (reasoning, prose, <think> blocks) is ignored.
//
// Coordinates are kept as the model wrote them (point_px targets, or
// point_norm for 0..1 fractions); Parsed.Coords names the dialect's default
// space for reading them (DefaultCoords): screen for pyautogui, osworld, xml
// and json; norm1000 for uitars and qwen (UI-TARS 1.0, Seed, Qwen3-VL);
// frame for openai_computer and anthropic_computer (pixels of the
// screenshot as sent). UI-TARS-1.5 and Qwen2.5-VL write pixels of their
// processor's resized image, which only the caller knows: their steps must
// declare coords {w, h}. keyDown/keyUp pairs become chords (see
// parsePyautogui).
package dialect

import (
	"fmt"
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

// Dialect names.
const (
	PyAutoGUI = "pyautogui"
	XML       = "xml"
	JSON      = "json"
	UITARS    = "uitars"
	Qwen      = "qwen"
	OpenAI    = "openai_computer"
	Anthropic = "anthropic_computer"
	OSWorld   = "osworld"
	Auto      = "auto"
)

// Names returns the dialect names Parse accepts, in a stable order.
func Names() []string {
	return []string{PyAutoGUI, XML, JSON, UITARS, Qwen, OpenAI, Anthropic, OSWorld, Auto}
}

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
	// Answer is the text a model gave with the end of its episode
	// (UI-TARS finished(content=...)/call_user, Qwen answer, OpenCUA
	// computer.terminate(answer=...)); empty when it gave none.
	Answer string
}

// parsed is what one dialect's parser returns.
type parsed struct {
	acts   []aci.Action
	answer string
}

// family is one dialect: its parser and default coordinate space.
type family struct {
	parse  func(string) (parsed, error)
	coords string
}

var families map[string]family

func init() {
	plain := func(f func(string) ([]aci.Action, error)) func(string) (parsed, error) {
		return func(text string) (parsed, error) {
			acts, err := f(text)
			return parsed{acts: acts}, err
		}
	}
	families = map[string]family{
		PyAutoGUI: {plain(parsePyautogui), aci.CoordsScreen},
		XML:       {plain(parseXML), aci.CoordsScreen},
		JSON:      {plain(parseJSON), aci.CoordsScreen},
		UITARS:    {parseUITARS, aci.CoordsNorm1000},
		Qwen:      {parseQwen, aci.CoordsNorm1000},
		OpenAI:    {parseOpenAI, aci.CoordsFrame},
		Anthropic: {parseAnthropic, aci.CoordsFrame},
		OSWorld:   {parseOSWorld, aci.CoordsScreen},
	}
}

// DefaultCoords is the default coordinate space of a dialect (screen for
// auto and unknown names).
func DefaultCoords(dialect string) aci.Coords {
	if f, ok := families[strings.ToLower(strings.TrimSpace(dialect))]; ok {
		return aci.Coords{Space: f.coords}
	}
	return aci.Coords{Space: aci.CoordsScreen}
}

// Parse turns a model's raw text into actions. dialect is one of Names; an
// unknown name is bad_request. Every parse failure is an *aci.Error with code
// dialect_error and the offending snippet (a string) in Detail. A text with no
// action in it is a dialect_error too.
func Parse(dialect, text string) (Parsed, error) {
	if len(text) > MaxText {
		return Parsed{}, dialectErr(text, "text of %d bytes is over the %d-byte limit", len(text), MaxText)
	}
	name := strings.ToLower(strings.TrimSpace(dialect))
	if name == "" {
		name = Auto
	}
	if name == Auto {
		var err error
		if name, err = detect(text); err != nil {
			return Parsed{}, err
		}
	}
	f, ok := families[name]
	if !ok {
		return Parsed{}, &aci.Error{Code: aci.CodeBadRequest,
			Message: fmt.Sprintf("unknown dialect %q (want one of %s)", dialect, strings.Join(Names(), ", "))}
	}
	res, err := f.parse(text)
	if err != nil {
		return Parsed{}, err
	}
	if len(res.acts) == 0 {
		return Parsed{}, dialectErr(text, "no action found in %s text", name)
	}
	return Parsed{Actions: res.acts, Dialect: name, Coords: aci.Coords{Space: f.coords}, Answer: res.answer}, nil
}

// taggedBlocks returns what each open...close block of s holds, in order;
// the last may run to the end of s unclosed.
func taggedBlocks(s, open, close string) []string {
	var out []string
	for {
		i := strings.Index(s, open)
		if i < 0 {
			return out
		}
		s = s[i+len(open):]
		j := strings.Index(s, close)
		if j < 0 {
			return append(out, s)
		}
		out = append(out, s[:j])
		s = s[j+len(close):]
	}
}

// unsupportedErr builds the typed refusal of a form that was read but names
// something this server cannot do (a phone button, a shell, a mark or a
// description that needs grounding): code unsupported, the snippet in Detail.
func unsupportedErr(snippet, format string, args ...any) *aci.Error {
	return &aci.Error{Code: aci.CodeUnsupported, Message: fmt.Sprintf(format, args...), Detail: clip(snippet)}
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
