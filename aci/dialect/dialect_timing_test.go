package dialect

import (
	"encoding/json"
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

// The baseline is encoding/json decoding the same actions in aci's own
// form: the parsers' cost is reported relative to it in the same run.
var benchTexts = map[string]string{
	"pyautogui": "I will click the terminal and type.\n```python\npyautogui.click(200, 200)\npyautogui.write(\"echo 'hello shinken' > ~/hello.txt\")\npyautogui.press('enter')\n```",
	"xml": `<think>click the terminal and type</think><tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [200, 200]}}</tool_call>` +
		`<tool_call>{"name": "computer_use", "arguments": {"action": "type", "text": "echo 'hello shinken' > ~/hello.txt"}}</tool_call>` +
		`<tool_call>{"name": "computer_use", "arguments": {"action": "key", "keys": ["enter"]}}</tool_call>`,
	"json": `[{"action": "left_click", "coordinate": [200, 200]}, {"action": "type", "text": "echo 'hello shinken' > ~/hello.txt"}, {"action": "key", "keys": "Return"}]`,
}

const benchNative = `[{"verb":"click","target":{"kind":"point_px","x":200,"y":200}},{"verb":"type_text","text":"echo 'hello shinken' > ~/hello.txt"},{"verb":"key","keys":"Return"}]`

func BenchmarkParse(b *testing.B) {
	b.Run("baseline_json_native", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(benchNative)))
		for b.Loop() {
			var acts []aci.Action
			if err := json.Unmarshal([]byte(benchNative), &acts); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, d := range []string{"pyautogui", "xml", "json"} {
		text := benchTexts[d]
		b.Run(d, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if p, err := Parse(d, text); err != nil || len(p.Actions) != 3 {
					b.Fatalf("Parse: %v, %d actions", err, len(p.Actions))
				}
			}
		})
	}
}
