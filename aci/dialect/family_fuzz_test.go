package dialect

import (
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

// fuzzFamily seeds a fuzz target with the family's corpus (samples and
// errors) and checks, for the family's dialect and auto, that no input
// panics, every failure is a dialect_error or a typed unsupported refusal,
// every action has a known verb, and every point maps through the default
// space without panicking (a point outside it is invalid_action, a mark
// target unsupported, nothing else).
func fuzzFamily(f *testing.F, family string) { fuzzForm(f, family, "") }

// fuzzForm is fuzzFamily seeded with the family's corpus entries whose name
// starts with prefix (all of them for ""), and the extra seeds.
func fuzzForm(f *testing.F, family, prefix string, seeds ...string) {
	for _, c := range loadCorpus(f) {
		if c.Family != family {
			continue
		}
		for _, s := range c.Samples {
			if strings.HasPrefix(s.Name, prefix) {
				f.Add(s.Text)
			}
		}
		for _, e := range c.Errors {
			if strings.HasPrefix(e.Name, prefix) {
				f.Add(e.Text)
			}
		}
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, d := range []string{family, Auto} {
			p, err := Parse(d, text)
			if err != nil {
				if c := aci.CodeOf(err); c != aci.CodeDialectError && c != aci.CodeUnsupported {
					t.Fatalf("Parse(%s, %q) code %q; want dialect_error or unsupported", d, text, c)
				}
				continue
			}
			for _, a := range p.Actions {
				if !a.Verb.Known() {
					t.Fatalf("Parse(%s, %q) produced unknown verb %q", d, text, a.Verb)
				}
				mark := a.Target != nil && a.Target.Kind == aci.Mark || a.To != nil && a.To.Kind == aci.Mark
				err := p.Coords.MapAction(&a, sampleDisplay)
				switch c := aci.CodeOf(err); {
				case err == nil && mark:
					t.Fatalf("MapAction after Parse(%s, %q) mapped a mark target", d, text)
				case err == nil, c == aci.CodeInvalidAction && !mark, c == aci.CodeUnsupported && mark:
				default:
					t.Fatalf("MapAction after Parse(%s, %q): %v", d, text, err)
				}
			}
			if strings.TrimSpace(p.Dialect) == "" || p.Dialect == Auto {
				t.Fatalf("Parse(%s, %q) reports dialect %q", d, text, p.Dialect)
			}
		}
	})
}

func FuzzUITARS(f *testing.F)    { fuzzFamily(f, UITARS) }
func FuzzQwen(f *testing.F)      { fuzzFamily(f, Qwen) }
func FuzzOpenAI(f *testing.F)    { fuzzFamily(f, OpenAI) }
func FuzzAnthropic(f *testing.F) { fuzzFamily(f, Anthropic) }
func FuzzOSWorld(f *testing.F)   { fuzzFamily(f, OSWorld) }

// One target per form read since the families' first corpus: each seeded
// with that form's corpus entries (named with the prefix) and a few
// mutations of the tags and labels that select the form.

// FuzzThinkTags: reasoning tags (<think>, <thinkt>, <thinking>, suffixed
// with an unused special token) and localized labels before UI-TARS/Seed
// actions.
func FuzzThinkTags(f *testing.F) {
	fuzzForm(f, UITARS, "think ",
		"<think_never_used_51bce0c785ca2f68081bfa7d91973934>x</think_never_used_51bce0c785ca2f68081bfa7d91973934>",
		"<think_never_used_0>a</think>\nAction: click(point='<point>1 2</point>')",
		"思考：\n动作：\n",
		"<thinkt>Action: click(start_box='(1,2)')")
}

// FuzzGroundingBox: Qwen2-VL grounding answers (<|box_start|> with an
// optional object ref).
func FuzzGroundingBox(f *testing.F) {
	fuzzForm(f, UITARS, "grounding ",
		"<|object_ref_start|><|object_ref_end|><|box_start|><|box_end|>",
		"<|box_start|>(1,2),(3,4)<|box_end|><|box_start|>(1,2)<|box_end|>")
}

// FuzzQwenMobile: Qwen's mobile_use tool.
func FuzzQwenMobile(f *testing.F) {
	fuzzForm(f, Qwen, "mobile ",
		`<tool_call>{"name": "mobile_use", "arguments": {"action": "long_press", "coordinate": [1, 2], "time": -1}}</tool_call>`,
		`<tool_call>{"name": "mobile_use", "arguments": {"action": "system_button", "button": 3}}</tool_call>`)
}

// FuzzQwenActionLine: a Qwen tool call after a one-line Action
// description in any language.
func FuzzQwenActionLine(f *testing.F) {
	fuzzForm(f, Qwen, "action line ",
		"Action: type(\"x\")\n<tool_call>\n{\"name\": \"computer_use\", \"arguments\": {\"action\": \"wait\", \"time\": 1}}\n</tool_call>",
		"动作：click(start_box='(1,2)')\n<tool_call>")
}

// FuzzComputer13Fence: OSWorld computer_13 JSON in ```json fences and bare.
func FuzzComputer13Fence(f *testing.F) {
	fuzzForm(f, OSWorld, "computer_13 ",
		"```json\n{\"action_type\": \"CLICK\", \"x\": 1e400, \"y\": 2}\n```",
		"```JSON\n[{\"action_type\": \"DRAG_TO\", \"x\": 1, \"y\": 2}, {\"action_type\": \"DONE\"}]\n```")
}

// FuzzMarksAndGrounding: Set-of-Mark labels (mark targets) and Agent-S
// agent.* calls.
func FuzzMarksAndGrounding(f *testing.F) {
	fuzzForm(f, OSWorld, "som ",
		"```python\npyautogui.dragTo(tag_1)\npyautogui.click(*tag_2)\n```",
		"```python\nagent.click(12, 1, \"left\")\nagent.hold_and_press([\"ctrl\"], [\"c\", \"v\"])\n```",
		"```python\nagent.type(text='hi', overwrite=True, enter=True)\n```")
}

// FuzzShellTools: Claude's bash and text-editor tool_use blocks and
// OpenAI's shell-style output items.
func FuzzShellTools(f *testing.F) {
	fuzzForm(f, Anthropic, "shell ",
		`{"type": "tool_use", "id": "t", "name": "str_replace_editor", "input": {"command": "view", "path": "/"}}`,
		`[{"type": "shell_call", "action": {"commands": ["ls"]}}, {"type": "computer_call", "action": {"type": "wait"}}]`)
}
