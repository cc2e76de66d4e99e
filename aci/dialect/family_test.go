package dialect

import (
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

func TestAutoAmbiguous(t *testing.T) {
	for name, c := range map[string]struct {
		text  string
		names []string
	}{
		"openai and anthropic": {`[{"type": "computer_call", "action": {"type": "wait"}}, {"type": "tool_use", "name": "computer", "input": {"action": "wait"}}]`,
			[]string{OpenAI, Anthropic}},
		"uitars and qwen": {"Action: click(start_box='(1,2)')\n<tool_call>{\"name\": \"computer_use\", \"arguments\": {\"action\": \"wait\"}}</tool_call>",
			[]string{UITARS, Qwen}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(Auto, c.text)
			e := aci.AsError(err)
			if e == nil || e.Code != aci.CodeDialectError {
				t.Fatalf("Parse(auto) = %v; want dialect_error", err)
			}
			for _, n := range c.names {
				if !strings.Contains(e.Message, n) {
					t.Errorf("error %q does not name %s", e.Message, n)
				}
			}
		})
	}
}

func TestDefaultCoords(t *testing.T) {
	for d, want := range map[string]string{
		PyAutoGUI: aci.CoordsScreen, XML: aci.CoordsScreen, JSON: aci.CoordsScreen, OSWorld: aci.CoordsScreen,
		UITARS: aci.CoordsNorm1000, Qwen: aci.CoordsNorm1000, OpenAI: aci.CoordsFrame, Anthropic: aci.CoordsFrame,
		Auto: aci.CoordsScreen, "nonsense": aci.CoordsScreen,
	} {
		if got := DefaultCoords(d); got.Space != want {
			t.Errorf("DefaultCoords(%s) = %v; want %s", d, got, want)
		}
	}
}

func TestFamilyEdges(t *testing.T) {
	runOK(t, []okCase{
		{"uitars paren inside content", UITARS, "Action: type(content='f(x) = (a, b)')", `[{"verb":"type_text","text":"f(x) = (a, b)"}]`},
		{"uitars quote then paren inside content", UITARS, "Action: type(content='say \\'hi\\') now')", `[{"verb":"type_text","text":"say 'hi') now"}]`},
		{"uitars positional key", UITARS, "Action: hotkey('alt f4')", `[{"verb":"key","keys":"alt+F4"}]`},
		{"uitars unquoted box", UITARS, "Action: click(start_box=(5,6))", `[{"verb":"click","target":{"kind":"point_px","x":5,"y":6}}]`},
		{"uitars press space", UITARS, "Action: press(key='space')", `[{"verb":"key","keys":"space"}]`},
		{"qwen bare object", Qwen, `{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [3, 4]}}`, `[{"verb":"click","target":{"kind":"point_px","x":3,"y":4}}]`},
		{"openai whole response with message only first", OpenAI, `{"output": [{"type": "message", "content": []}, {"type": "computer_call", "action": {"type": "move", "x": 1, "y": 2}}]}`, `[{"verb":"move","target":{"kind":"point_px","x":1,"y":2}}]`},
		{"osworld lowercase word", OSWorld, "done", `[{"verb":"done"}]`},
		{"pyautogui normalized", PyAutoGUI, "pyautogui.click(0.5, 0.25)", `[{"verb":"click","target":{"kind":"point_norm","x":0.5,"y":0.25}}]`},
		{"pyautogui corner pixel stays pixel", PyAutoGUI, "pyautogui.click(1, 0)", `[{"verb":"click","target":{"kind":"point_px","x":1,"y":0}}]`},
	})
	runErr(t, []errCase{
		{"uitars unterminated", UITARS, "Action: type(content='abc", "abc"},
		{"qwen empty", Qwen, "<tool_call></tool_call>", ""},
		{"openai reasoning only", OpenAI, `[{"type": "reasoning", "summary": []}]`, "reasoning"},
		{"anthropic text only", Anthropic, `{"content": [{"type": "text", "text": "hi"}]}`, "text"},
		{"osworld tag in plain pyautogui", PyAutoGUI, "pyautogui.click(tag_1)", "tag_1"},
	})
}
