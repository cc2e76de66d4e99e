package dialect

import (
	"encoding/json"
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

// Each text holds the same three actions (a click, a typed command, Enter)
// in its dialect's form. The baseline is encoding/json decoding those
// actions in aci's own form: the parsers' cost is reported beside it in the
// same run ("<dialect>/json_native" decodes what "<dialect>" parsed).
var benchTexts = map[string]string{
	PyAutoGUI: "I will click the terminal and type.\n```python\npyautogui.click(200, 200)\npyautogui.write(\"echo 'hello shinken' > ~/hello.txt\")\npyautogui.press('enter')\n```",
	XML: `<think>click the terminal and type</think><tool_call>{"name": "computer", "arguments": {"action": "left_click", "coordinate": [200, 200]}}</tool_call>` +
		`<tool_call>{"name": "computer", "arguments": {"action": "type", "text": "echo 'hello shinken' > ~/hello.txt"}}</tool_call>` +
		`<tool_call>{"name": "computer", "arguments": {"action": "key", "keys": ["enter"]}}</tool_call>`,
	JSON: `[{"action": "left_click", "coordinate": [200, 200]}, {"action": "type", "text": "echo 'hello shinken' > ~/hello.txt"}, {"action": "key", "keys": "Return"}]`,
	UITARS: "Thought: The terminal is open; click it, type the command and run it.\n" +
		"Action: click(start_box='<|box_start|>(200,200)<|box_end|>')\n\ntype(content='echo \\'hello shinken\\' > ~/hello.txt')\n\nhotkey(key='enter')",
	Qwen: "<think>click the terminal and type</think>\n" +
		"<tool_call>\n{\"name\": \"computer_use\", \"arguments\": {\"action\": \"left_click\", \"coordinate\": [200, 200]}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"computer_use\", \"arguments\": {\"action\": \"type\", \"text\": \"echo 'hello shinken' > ~/hello.txt\"}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"computer_use\", \"arguments\": {\"action\": \"key\", \"keys\": [\"enter\"]}}\n</tool_call>",
	OpenAI: `[{"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Click the terminal and type."}]},` +
		`{"type": "computer_call", "id": "cu_1", "call_id": "call_1", "action": {"type": "click", "button": "left", "x": 200, "y": 200}, "pending_safety_checks": [], "status": "completed"},` +
		`{"type": "computer_call", "id": "cu_2", "call_id": "call_2", "action": {"type": "type", "text": "echo 'hello shinken' > ~/hello.txt"}, "pending_safety_checks": [], "status": "completed"},` +
		`{"type": "computer_call", "id": "cu_3", "call_id": "call_3", "action": {"type": "keypress", "keys": ["ENTER"]}, "pending_safety_checks": [], "status": "completed"}]`,
	Anthropic: `{"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "Clicking the terminal."},` +
		`{"type": "tool_use", "id": "toolu_1", "name": "computer", "input": {"action": "left_click", "coordinate": [200, 200]}},` +
		`{"type": "tool_use", "id": "toolu_2", "name": "computer", "input": {"action": "type", "text": "echo 'hello shinken' > ~/hello.txt"}},` +
		`{"type": "tool_use", "id": "toolu_3", "name": "computer", "input": {"action": "key", "text": "Return"}}]}`,
	OSWorld: "```json\n{\"action_type\": \"CLICK\", \"x\": 200, \"y\": 200}\n```\n" +
		"```json\n{\"action_type\": \"TYPING\", \"text\": \"echo 'hello shinken' > ~/hello.txt\"}\n```\n" +
		"```json\n{\"action_type\": \"PRESS\", \"key\": \"enter\"}\n```",
}

func BenchmarkParse(b *testing.B) {
	for _, d := range []string{PyAutoGUI, XML, JSON, UITARS, Qwen, OpenAI, Anthropic, OSWorld} {
		text := benchTexts[d]
		p, err := Parse(d, text)
		if err != nil || len(p.Actions) != 3 {
			b.Fatalf("Parse(%s): %v, %d actions", d, err, len(p.Actions))
		}
		native, err := json.Marshal(p.Actions)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(d, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if p, err := Parse(d, text); err != nil || len(p.Actions) != 3 {
					b.Fatalf("Parse: %v, %d actions", err, len(p.Actions))
				}
			}
		})
		b.Run(d+"/json_native", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(native)))
			for b.Loop() {
				var acts []aci.Action
				if err := json.Unmarshal(native, &acts); err != nil || len(acts) != 3 {
					b.Fatal(err)
				}
			}
		})
		b.Run(d+"/auto", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if p, err := Parse(Auto, text); err != nil || p.Dialect != d {
					b.Fatalf("Parse(auto): %v, %s", err, p.Dialect)
				}
			}
		})
	}
}
