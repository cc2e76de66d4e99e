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

// TestLocalizedAndTagged covers the tolerated variants the corpus has no
// public source for: Chinese Action and thought labels, <thinking> blocks,
// and a suffixed think tag whose closing tag lost its suffix.
func TestLocalizedAndTagged(t *testing.T) {
	click := `[{"verb":"click","target":{"kind":"point_px","x":235,"y":512}}]`
	runOK(t, []okCase{
		{"chinese action label", UITARS, "思考：我需要点击搜索框。\n动作：click(start_box='(235,512)')", click},
		{"chinese operation label", UITARS, "操作：click(start_box='(235,512)')", click},
		{"chinese thought label then calls", UITARS, "思考：对话框已经打开。\nclick(start_box='(235,512)')", click},
		{"reflection label then calls", UITARS, "Reflection: the last click missed.\nclick(start_box='(235,512)')", click},
		{"thinking block", UITARS, "<thinking>The box is on top.</thinking>\nclick(start_box='(235,512)')", click},
		{"suffix on the opening tag only", UITARS, "<think_never_used_51bce0c785ca2f68081bfa7d91973934>x</think>\nclick(start_box='(235,512)')", click},
		{"auto: chinese labels", Auto, "思考：我需要点击搜索框。\n动作：click(start_box='(235,512)')", click},
		{"auto: thought quoting a qwen call", Auto, "<think>Not {\"name\": \"computer_use\"} this time.</think>\nclick(start_box='(235,512)')", click},
		{"osworld: mark unpacked", OSWorld, "```python\npyautogui.click(*tag_2)\n```", `[{"verb":"click","target":{"kind":"mark","x":0,"y":0,"ref":"2"}}]`},
		{"osworld: agent-s overwrite", OSWorld, "```python\nagent.type(text='a', overwrite=True)\n```", `[{"verb":"key","keys":"ctrl+a"},{"verb":"key","keys":"BackSpace"},{"verb":"type_text","text":"a"}]`},
		{"osworld: agent-s hold_and_press", OSWorld, "```python\nagent.hold_and_press(['ctrl'], ['c', 'v'])\n```", `[{"verb":"key","keys":"ctrl+c"},{"verb":"key","keys":"ctrl+v"}]`},
		{"osworld: agent-s wait", OSWorld, "```python\nagent.wait(1.5)\n```", `[{"verb":"wait","ms":1500}]`},
	})
	runErr(t, []errCase{
		{"thought label and no call", UITARS, "思考：我需要点击搜索框。", "思考"},
		{"grounding box with prose", UITARS, "The button is at <|box_start|>(1,2),(3,4)<|box_end|>", "button"},
		{"mark in plain pyautogui", PyAutoGUI, "```python\npyautogui.click(tag_3)\n```", "tag_3"},
		{"mark with a y", OSWorld, "```python\npyautogui.click(tag_3, 5)\n```", "tag_3"},
		{"agent-s unknown call", OSWorld, "```python\nagent.teleport('x')\n```", "teleport"},
	})
	runErrCode(t, []errCase{
		{"agent-s scroll description", OSWorld, "```python\nagent.scroll('the list', 3)\n```", "the list"},
		{"agent-s type into element", OSWorld, "```python\nagent.type('the search box', 'cats')\n```", "search box"},
		{"mobile interact", Qwen, `<tool_call>{"name": "mobile_use", "arguments": {"action": "interact", "text": "Which one?"}}</tool_call>`, "interact"},
		{"codex shell function", OpenAI, `{"type": "function_call", "name": "shell", "arguments": "{\"command\": [\"ls\"]}"}`, "shell"},
	}, aci.CodeUnsupported)
	if _, err := Parse(Auto, "```python\nagent.click('The OK button')\n```"); !strings.HasPrefix(aci.AsError(err).Message, "needs_grounding:") {
		t.Errorf("Agent-S description: %v; want a needs_grounding: message", err)
	}
}
