package dialect

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

// canon re-encodes a JSON action list so that expectations and results
// compare as text.
func canon(t *testing.T, acts []aci.Action) string {
	t.Helper()
	b, err := json.Marshal(acts)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantActions(t *testing.T, js string) string {
	t.Helper()
	var acts []aci.Action
	if err := json.Unmarshal([]byte(js), &acts); err != nil {
		t.Fatalf("bad expectation %s: %v", js, err)
	}
	return canon(t, acts)
}

type okCase struct {
	name, dialect, text, want string
}

type errCase struct {
	name, dialect, text, snippet string // snippet: a substring the error's Detail must hold
}

func runOK(t *testing.T, cases []okCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parsed, err := Parse(c.dialect, c.text)
			got := parsed.Actions
			if err != nil {
				t.Fatalf("Parse(%s, %q): %v", c.dialect, c.text, err)
			}
			if g, w := canon(t, got), wantActions(t, c.want); g != w {
				t.Errorf("Parse(%s, %q)\n got %s\nwant %s", c.dialect, c.text, g, w)
			}
		})
	}
}

func runErr(t *testing.T, cases []errCase) {
	t.Helper()
	runErrCode(t, cases, "")
}

// runErrCode is runErr for refusals with code want (empty: dialect_error).
func runErrCode(t *testing.T, cases []errCase, want aci.Code) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if want == "" {
				want = aci.CodeDialectError
			}
			parsed, err := Parse(c.dialect, c.text)
			got := parsed.Actions
			if err == nil {
				t.Fatalf("Parse(%s, %q) = %s; want %s", c.dialect, c.text, canon(t, got), want)
			}
			var e *aci.Error
			if !errors.As(err, &e) || e.Code != want {
				t.Fatalf("Parse(%s, %q) error %v; want code %s", c.dialect, c.text, err, want)
			}
			d, ok := e.Detail.(string)
			if !ok || !strings.Contains(d, c.snippet) {
				t.Errorf("error %v detail %q; want it to hold %q", err, e.Detail, c.snippet)
			}
		})
	}
}

const (
	click100   = `[{"verb":"click","target":{"kind":"point_px","x":100,"y":200}}]`
	typeHello  = `[{"verb":"type_text","text":"hello"}]`
	keyCtrlC   = `[{"verb":"key","keys":"ctrl+c"}]`
	keyReturn  = `[{"verb":"key","keys":"Return"}]`
	doneAction = `[{"verb":"done"}]`
)

func TestPyautogui(t *testing.T) {
	runOK(t, []okCase{
		{"click", "pyautogui", "pyautogui.click(100, 200)", click100},
		{"click kw", "pyautogui", "pyautogui.click(x=100, y=200)", click100},
		{"click tuple", "pyautogui", "pyautogui.click((100, 200))", click100},
		{"click floats", "pyautogui", "pyautogui.click(100.0, 200.0, duration=0.5)", click100},
		{"click here", "pyautogui", "pyautogui.click()", `[{"verb":"mouse_down"},{"verb":"mouse_up"}]`},
		{"click right button", "pyautogui", "pyautogui.click(1, 2, button='right')", `[{"verb":"right_click","target":{"kind":"point_px","x":1,"y":2}}]`},
		{"click twice", "pyautogui", "pyautogui.click(1, 2, clicks=2)", `[{"verb":"double_click","target":{"kind":"point_px","x":1,"y":2}}]`},
		{"doubleClick", "pyautogui", "pyautogui.doubleClick(1, 2)", `[{"verb":"double_click","target":{"kind":"point_px","x":1,"y":2}}]`},
		{"tripleClick", "pyautogui", "pyautogui.tripleClick(1, 2)", `[{"verb":"click","target":{"kind":"point_px","x":1,"y":2}},{"verb":"click","target":{"kind":"point_px","x":1,"y":2}},{"verb":"click","target":{"kind":"point_px","x":1,"y":2}}]`},
		{"rightClick", "pyautogui", "pyautogui.rightClick(5, 6)", `[{"verb":"right_click","target":{"kind":"point_px","x":5,"y":6}}]`},
		{"middleClick", "pyautogui", "pyautogui.middleClick(5, 6)", `[{"verb":"click","button":"middle","target":{"kind":"point_px","x":5,"y":6}}]`},
		{"moveTo", "pyautogui", "pyautogui.moveTo(10, 20, duration=0.25)", `[{"verb":"move","target":{"kind":"point_px","x":10,"y":20},"duration_ms":250}]`},
		{"dragTo", "pyautogui", "pyautogui.dragTo(300, 400, duration=1)", `[{"verb":"drag","to":{"kind":"point_px","x":300,"y":400},"duration_ms":1000}]`},
		{"dragTo right", "pyautogui", "pyautogui.dragTo(3, 4, button='right')", `[{"verb":"drag","to":{"kind":"point_px","x":3,"y":4},"button":"right"}]`},
		{"mouseDown up", "pyautogui", "pyautogui.mouseDown(1, 2)\npyautogui.mouseUp()", `[{"verb":"mouse_down","target":{"kind":"point_px","x":1,"y":2}},{"verb":"mouse_up"}]`},
		{"scroll up", "pyautogui", "pyautogui.scroll(5)", `[{"verb":"scroll","dy":-5}]`},
		{"scroll down at", "pyautogui", "pyautogui.scroll(-3, x=10, y=20)", `[{"verb":"scroll","dy":3,"target":{"kind":"point_px","x":10,"y":20}}]`},
		{"hscroll", "pyautogui", "pyautogui.hscroll(2)", `[{"verb":"scroll","dx":2}]`},
		{"write", "pyautogui", "pyautogui.write('hello')", typeHello},
		{"typewrite interval", "pyautogui", `pyautogui.typewrite("hello", interval=0.05)`, typeHello},
		{"write escapes", "pyautogui", `pyautogui.write('a\tb\n\'c\' \u00e9')`, `[{"verb":"type_text","text":"a\tb\n'c' é"}]`},
		{"write raw", "pyautogui", `pyautogui.write(r'C:\new')`, `[{"verb":"type_text","text":"C:\\new"}]`},
		{"write triple", "pyautogui", "pyautogui.write('''line one\nline \"two\"\n''')", `[{"verb":"type_text","text":"line one\nline \"two\"\n"}]`},
		{"write triple double", "pyautogui", "pyautogui.typewrite(\"\"\"def f():\n    return 'x'\"\"\")", `[{"verb":"type_text","text":"def f():\n    return 'x'"}]`},
		{"write concat", "pyautogui", "pyautogui.write('hel' 'lo')", typeHello},
		{"typewrite list", "pyautogui", "pyautogui.typewrite(['a', 'enter'])", `[{"verb":"key","keys":"a"},{"verb":"key","keys":"Return"}]`},
		{"press enter", "pyautogui", "pyautogui.press('enter')", keyReturn},
		{"press names", "pyautogui", "pyautogui.press(['esc', 'backspace', 'pageup', 'f5', 'tab', 'up'])", `[{"verb":"key","keys":"Escape"},{"verb":"key","keys":"BackSpace"},{"verb":"key","keys":"Page_Up"},{"verb":"key","keys":"F5"},{"verb":"key","keys":"Tab"},{"verb":"key","keys":"Up"}]`},
		{"press presses", "pyautogui", "pyautogui.press('down', presses=2)", `[{"verb":"key","keys":"Down"},{"verb":"key","keys":"Down"}]`},
		{"press plus", "pyautogui", "pyautogui.press('+')", `[{"verb":"key","keys":"plus"}]`},
		{"hotkey", "pyautogui", "pyautogui.hotkey('ctrl', 'c')", keyCtrlC},
		{"hotkey list", "pyautogui", "pyautogui.hotkey(['ctrl', 'shift', 't'])", `[{"verb":"key","keys":"ctrl+shift+t"}]`},
		{"hotkey win", "pyautogui", "pyautogui.hotkey('command', 'option', 'esc')", `[{"verb":"key","keys":"super+alt+Escape"}]`},
		{"keyDown press keyUp", "pyautogui", "pyautogui.keyDown('ctrl')\npyautogui.press('c')\npyautogui.keyUp('ctrl')", keyCtrlC},
		{"keyDown keyDown", "pyautogui", "pyautogui.keyDown('ctrl'); pyautogui.keyDown('a'); pyautogui.keyUp('a'); pyautogui.keyUp('ctrl')", `[{"verb":"key","keys":"ctrl+a"}]`},
		{"keyDown alone", "pyautogui", "pyautogui.keyDown('shift')\npyautogui.keyUp('shift')", `[{"verb":"key","keys":"shift"}]`},
		{"keyDown click", "pyautogui", "pyautogui.keyDown('shift')\npyautogui.click(1, 2)\npyautogui.keyUp('shift')", `[{"verb":"click","target":{"kind":"point_px","x":1,"y":2},"modifiers":["shift"]}]`},
		{"keyDown write", "pyautogui", "pyautogui.keyDown('ctrl')\npyautogui.write('a')\npyautogui.keyUp('ctrl')", `[{"verb":"key","keys":"ctrl+a"}]`},
		{"sleep", "pyautogui", "pyautogui.click(100, 200)\ntime.sleep(0.5)", `[{"verb":"click","target":{"kind":"point_px","x":100,"y":200}},{"verb":"wait","ms":500}]`},
		{"WAIT", "pyautogui", "WAIT", `[{"verb":"wait","ms":1000}]`},
		{"WAIT given", "pyautogui", "WAIT(2)", `[{"verb":"wait","ms":2000}]`},
		{"DONE fenced inline", "pyautogui", "The file is saved.\n```DONE```", doneAction},
		{"FAIL fenced", "pyautogui", "This is impossible.\n```\nFAIL\n```", `[{"verb":"fail"}]`},
		{"imports and settings", "pyautogui", "import pyautogui\nimport time\npyautogui.FAILSAFE = False\npyautogui.click(100, 200)  # open it", click100},
		{"fenced with prose", "pyautogui", "I will click the icon with pyautogui.click.\n```python\npyautogui.click(100, 200)\n```\nThen type.", click100},
		{"fence unclosed", "pyautogui", "```python\npyautogui.click(100, 200)\n", click100},
		{"two fences", "pyautogui", "```python\npyautogui.write('hello')\n```\nthen\n```python\npyautogui.press('enter')\n```", `[{"verb":"type_text","text":"hello"},{"verb":"key","keys":"Return"}]`},
		{"bare lines in prose", "pyautogui", "Thinking about it.\npyautogui.click(100,\n    200)\nThat should work.", click100},
		{"semicolons", "pyautogui", "pyautogui.click(100, 200); pyautogui.write('hello')", `[{"verb":"click","target":{"kind":"point_px","x":100,"y":200}},{"verb":"type_text","text":"hello"}]`},
		{"trailing comma", "pyautogui", "pyautogui.click(100, 200,)", click100},
	})
}

func TestPyautoguiErrors(t *testing.T) {
	runErr(t, []errCase{
		{"unknown call", "pyautogui", "pyautogui.locateOnScreen('button.png')", "locateOnScreen"},
		{"non pyautogui call", "pyautogui", "```python\nimport os\nos.system('rm -rf /')\n```", "os.system"},
		{"variables", "pyautogui", "```python\nx = 100\npyautogui.click(x, 200)\n```", "x = 100"},
		{"variable arg", "pyautogui", "```python\npyautogui.click(x, 200)\n```", "pyautogui.click(x, 200)"},
		{"image click", "pyautogui", "pyautogui.click('ok.png')", "ok.png"},
		{"unknown key", "pyautogui", "pyautogui.press('hyperdrive')", "hyperdrive"},
		{"unknown kwarg", "pyautogui", "pyautogui.click(1, 2, force=True)", "force"},
		{"keyUp alone", "pyautogui", "pyautogui.keyUp('ctrl')", "keyUp('ctrl')"},
		{"keyDown never released", "pyautogui", "pyautogui.keyDown('shift')\npyautogui.click(1,2)", "keyDown('shift')"},
		{"scroll while held", "pyautogui", "pyautogui.keyDown('ctrl')\npyautogui.scroll(1)\npyautogui.keyUp('ctrl')", "scroll(1)"},
		{"unterminated string", "pyautogui", "pyautogui.write('abc", "write('abc"},
		{"unclosed paren", "pyautogui", "```python\npyautogui.click(1, 2\n```", "click"},
		{"call in prose", "pyautogui", "I think pyautogui.click(1, 2) is right", "I think"},
		{"f-string", "pyautogui", `pyautogui.write(f"{name}")`, "name"},
		{"moveRel", "pyautogui", "pyautogui.moveRel(10, 0)", "moveRel"},
		{"all or nothing", "pyautogui", "pyautogui.click(1, 2)\npyautogui.bogus()", "bogus"},
		{"no action", "pyautogui", "I am not sure what to do.", "not sure"},
		{"scroll zero", "pyautogui", "pyautogui.scroll(0)", "scroll(0)"},
	})
}

func TestXML(t *testing.T) {
	runOK(t, []okCase{
		{"tool_call computer", "xml", `<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [100, 200]}}</tool_call>`, click100},
		{"tool_call qwen key list", "xml", `<tool_call>{"name":"computer_use","arguments":{"action":"key","keys":["ctrl","c"]}}</tool_call>`, keyCtrlC},
		{"tool_call unclosed", "xml", "<think>the button</think>\n<tool_call>\n{\"name\": \"computer\", \"arguments\": {\"action\": \"type\", \"text\": \"hello\"}}", typeHello},
		{"tool_call trailing comma", "xml", `<tool_call>{"name": "computer", "arguments": {"action": "left_click", "coordinate": [100, 200],},}</tool_call>`, click100},
		{"tool_call fenced", "xml", "<tool_call>\n```json\n{\"name\": \"computer\", \"arguments\": {\"action\": \"key\", \"text\": \"Return\"}}\n```\n</tool_call>", keyReturn},
		{"tool_call text with lt", "xml", `<tool_call>{"name":"computer","arguments":{"action":"type","text":"a<b & c"}}</tool_call>`, `[{"verb":"type_text","text":"a<b & c"}]`},
		{"two tool_calls", "xml", `<tool_call>{"name":"computer","arguments":{"action":"type","text":"hello"}}</tool_call><tool_call>{"name":"computer","arguments":{"action":"key","keys":["Return"]}}</tool_call>`, `[{"verb":"type_text","text":"hello"},{"verb":"key","keys":"Return"}]`},
		{"tool_call terminate", "xml", `<tool_call>{"name":"computer_use","arguments":{"action":"terminate","status":"failure"}}</tool_call>`, `[{"verb":"fail"}]`},
		{"invoke", "xml", `<function_calls><invoke name="computer"><parameter name="action">left_click</parameter><parameter name="coordinate">[100, 200]</parameter></invoke></function_calls>`, click100},
		{"invoke direct", "xml", `<invoke name="type_text"><parameter name="text">hello</parameter></invoke>`, typeHello},
		{"invoke scroll", "xml", `<invoke name="computer"><parameter name="action">scroll</parameter><parameter name="coordinate">[5, 6]</parameter><parameter name="scroll_direction">up</parameter><parameter name="scroll_amount">2</parameter></invoke>`, `[{"verb":"scroll","dy":-2,"target":{"kind":"point_px","x":5,"y":6}}]`},
		{"invoke drag", "xml", `<invoke name="computer"><parameter name="action">left_click_drag</parameter><parameter name="start_coordinate">[1, 2]</parameter><parameter name="coordinate">[3, 4]</parameter></invoke>`, `[{"verb":"drag","target":{"kind":"point_px","x":1,"y":2},"to":{"kind":"point_px","x":3,"y":4}}]`},
		{"invoke text keeps markup", "xml", `<invoke name="computer"><parameter name="action">type</parameter><parameter name="text"><b>bold</b></parameter></invoke>`, `[{"verb":"type_text","text":"<b>bold</b>"}]`},
		{"invoke unclosed", "xml", "<function_calls>\n<invoke name=\"computer\">\n<parameter name=\"action\">key</parameter>\n<parameter name=\"text\">ctrl+c</parameter>", keyCtrlC},
		{"function=", "xml", "<function=click>\n<parameter=x>100</parameter>\n<parameter=y>200</parameter>\n</function>", click100},
		{"function= computer", "xml", "<function=computer_use>\n<parameter=action>\nleft_click\n</parameter>\n<parameter=coordinate>\n[100, 200]\n</parameter>\n</function>", click100},
		{"function= unclosed", "xml", "<function=type_text>\n<parameter=text>hello</parameter>", typeHello},
		{"attrs", "xml", `<click x="100" y="200"/>`, click100},
		{"attrs button", "xml", `<click x="1" y="2" button="right"></click>`, `[{"verb":"right_click","target":{"kind":"point_px","x":1,"y":2}}]`},
		{"elements", "xml", `<click><x>100</x><y>200</y></click>`, click100},
		{"element text", "xml", `<type_text>hello</type_text>`, typeHello},
		{"element key", "xml", `<key>ctrl+c</key>`, keyCtrlC},
		{"element key enter", "xml", `<key>enter</key>`, keyReturn},
		{"action verb attr", "xml", `<action verb="click" x="100" y="200"/>`, click100},
		{"action type attr text", "xml", `<action type="type">hello</action>`, typeHello},
		{"done", "xml", `<done/>`, doneAction},
		{"wait ms", "xml", `<wait ms="250"/>`, `[{"verb":"wait","ms":250}]`},
		{"prose and think ignored", "xml", "Let me think. <think>maybe <click x=\"1\" y=\"1\"/> no</think> I will click.\n<click x=\"100\" y=\"200\"/>", click100},
		{"entities", "xml", `<type_text text="a &amp; b"/>`, `[{"verb":"type_text","text":"a & b"}]`},
		{"actions wrapper", "xml", `<actions><type_text>hello</type_text><key>Return</key></actions>`, `[{"verb":"type_text","text":"hello"},{"verb":"key","keys":"Return"}]`},
	})
}

func TestXMLErrors(t *testing.T) {
	runErr(t, []errCase{
		{"unknown action", "xml", `<tool_call>{"name":"computer","arguments":{"action":"zoom","region":[0,0,1,1]}}</tool_call>`, "zoom"},
		{"bad json", "xml", `<tool_call>{"name": "computer", "arguments": {"action": }</tool_call>`, "tool_call"},
		{"unknown element", "xml", `<teleport x="1"/>`, "teleport"},
		{"unknown arg", "xml", `<click x="1" y="2" force="yes"/>`, "force"},
		{"missing y", "xml", `<click x="1"/>`, `x="1"`},
		{"bad coordinate", "xml", `<invoke name="computer"><parameter name="action">left_click</parameter><parameter name="coordinate">here</parameter></invoke>`, "here"},
		{"unknown key", "xml", `<key>hyper+q</key>`, "hyper"},
		{"all or nothing", "xml", `<type_text>hello</type_text><fly/>`, "fly"},
		{"invoke no name", "xml", `<invoke><parameter name="x">1</parameter></invoke>`, "invoke"},
		{"empty tool_call", "xml", `<tool_call></tool_call>`, "tool_call"},
	})
}

func TestJSON(t *testing.T) {
	runOK(t, []okCase{
		{"computer_use args", "json", `{"action": "left_click", "coordinate": [100, 200]}`, click100},
		{"named call", "json", `{"name": "computer", "arguments": {"action": "left_click", "coordinate": [100, 200]}}`, click100},
		{"arguments string", "json", `{"name": "computer", "arguments": "{\"action\": \"type\", \"text\": \"hello\"}"}`, typeHello},
		{"openai tool call", "json", `{"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "computer", "arguments": "{\"action\":\"key\",\"keys\":[\"ctrl\",\"c\"]}"}}]}`, keyCtrlC},
		{"openai cua click", "json", `{"type": "click", "x": 100, "y": 200, "button": "left"}`, click100},
		{"openai cua keypress", "json", `{"type": "keypress", "keys": ["CTRL", "C"]}`, keyCtrlC},
		{"openai cua scroll", "json", `{"type": "scroll", "x": 1, "y": 2, "scroll_x": 0, "scroll_y": 250}`, `[{"verb":"scroll","dy":3,"target":{"kind":"point_px","x":1,"y":2}}]`},
		{"openai cua drag path", "json", `{"type": "drag", "path": [{"x": 1, "y": 2}, {"x": 5, "y": 5}, {"x": 3, "y": 4}]}`, `[{"verb":"drag","target":{"kind":"point_px","x":1,"y":2},"to":{"kind":"point_px","x":3,"y":4}}]`},
		{"native", "json", `{"verb": "click", "target": {"kind": "point_norm", "x": 0.5, "y": 0.25}}`, `[{"verb":"click","target":{"kind":"point_norm","x":0.5,"y":0.25}}]`},
		{"native key normalized", "json", `{"verb": "key", "keys": "Ctrl+Enter"}`, `[{"verb":"key","keys":"ctrl+Return"}]`},
		{"list", "json", `[{"action": "type", "text": "hello"}, {"action": "key", "keys": "Return"}]`, `[{"verb":"type_text","text":"hello"},{"verb":"key","keys":"Return"}]`},
		{"actions object", "json", `{"actions": [{"action": "done"}]}`, doneAction},
		{"fenced with prose", "json", "I'll click it.\n```json\n{\"action\": \"left_click\", \"coordinate\": [100, 200]}\n```", click100},
		{"bare in prose", "json", "Clicking {the button} now: {\"action\": \"left_click\", \"coordinate\": [100, 200]} ok", click100},
		{"trailing commas", "json", `{"action": "left_click", "coordinate": [100, 200,],}`, click100},
		{"coordinate string", "json", `{"action": "left_click", "coordinate": "(100, 200)"}`, click100},
		{"numeric strings", "json", `{"action": "click", "x": "100", "y": "200"}`, click100},
		{"wait seconds", "json", `{"action": "wait", "duration": 2}`, `[{"verb":"wait","ms":2000}]`},
		{"wait default", "json", `{"action": "wait"}`, `[{"verb":"wait","ms":1000}]`},
		{"launch", "json", `{"action": "launch_app", "app": "xterm", "args": ["-e", "top"]}`, `[{"verb":"launch_app","app":"xterm","args":["-e","top"]}]`},
		{"click with modifier", "json", `{"action": "left_click", "coordinate": [100, 200], "text": "shift"}`, `[{"verb":"click","target":{"kind":"point_px","x":100,"y":200},"modifiers":["shift"]}]`},
		{"thought ignored", "json", `{"thought": "the ok button", "action": "left_click", "coordinate": [100, 200]}`, click100},
	})
}

func TestJSONErrors(t *testing.T) {
	runErr(t, []errCase{
		{"unknown action", "json", `{"action": "cursor_position"}`, "cursor_position"},
		{"unknown arg", "json", `{"action": "left_click", "coordinate": [1, 2], "speed": 3}`, "speed"},
		{"native unknown verb", "json", `{"verb": "explode"}`, "explode"},
		{"native unknown field", "json", `{"verb": "click", "force": 1}`, "force"},
		{"unclosed", "json", `{"action": "type", "text": "hello wor`, `"action"`},
		{"bad json", "json", `{"action": "type" "text": "x"}`, `"action"`},
		{"no action field", "json", `{"coordinate": [1, 2]}`, "coordinate"},
		{"short point", "json", `{"action": "left_click", "coordinate": [1]}`, "coordinate"},
		{"all or nothing", "json", `[{"action": "type", "text": "hi"}, {"action": "hold_key", "text": "a"}]`, "hold_key"},
		{"scalar", "json", `["ok"]`, "ok"},
		{"bad scroll", "json", `{"action": "scroll", "scroll_direction": "sideways"}`, "sideways"},
	})
}

func TestAuto(t *testing.T) {
	runOK(t, []okCase{
		{"pyautogui", "auto", "```python\npyautogui.click(100, 200)\n```", click100},
		{"xml tool_call", "auto", `<tool_call>{"name":"computer","arguments":{"action":"left_click","coordinate":[100,200]}}</tool_call>`, click100},
		{"xml function=", "auto", "<function=click><parameter=x>100</parameter><parameter=y>200</parameter></function>", click100},
		{"xml element", "auto", `<click x="100" y="200"/>`, click100},
		{"json", "auto", `{"action": "left_click", "coordinate": [100, 200]}`, click100},
		{"bare DONE", "auto", "DONE", doneAction},
		{"empty dialect is auto", "", "pyautogui.click(100, 200)", click100},
	})
	runErr(t, []errCase{
		{"nothing", "auto", "I give up thinking.", "give up"},
	})
}

func TestUnknownDialect(t *testing.T) {
	_, err := Parse("yaml", "click: 1")
	if got := aci.CodeOf(err); got != aci.CodeBadRequest {
		t.Errorf("Parse(yaml) code %q; want %q", got, aci.CodeBadRequest)
	}
}

func TestNames(t *testing.T) {
	got := strings.Join(Names(), ",")
	if want := "pyautogui,xml,json,uitars,qwen,openai_computer,anthropic_computer,osworld,auto"; got != want {
		t.Errorf("Names() = %s; want %s", got, want)
	}
	for _, n := range Names() {
		if _, err := Parse(n, "```DONE```"); err != nil && aci.CodeOf(err) == aci.CodeBadRequest {
			t.Errorf("Parse(%s) rejected its own name: %v", n, err)
		}
	}
}

// FuzzParse checks that no input panics and every failure is typed.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"pyautogui.click(1, 2)", "```python\npyautogui.write('''a\n''')\n```", "<tool_call>{\"name\":\"computer\",\"arguments\":{}}",
		`<invoke name="computer"><parameter name="action">key</parameter>`, `{"action":"scroll","coordinate":[1,2],"scroll_y":-3}`,
		"<function=click><parameter=x>1", "WAIT", `<click x="1" y="2"/>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, d := range Names() {
			acts, err := Parse(d, text)
			if err != nil {
				if c := aci.CodeOf(err); c != aci.CodeDialectError {
					t.Fatalf("Parse(%s, %q) code %q; want dialect_error", d, text, c)
				}
				continue
			}
			for _, a := range acts.Actions {
				if !a.Verb.Known() {
					t.Fatalf("Parse(%s, %q) produced unknown verb %q", d, text, a.Verb)
				}
			}
		}
	})
}

func TestPathologicalInputs(t *testing.T) {
	for name, text := range map[string]string{
		"deep xml":      strings.Repeat("<actions>", 5000) + `<click x="1" y="2"/>`,
		"many raw":      strings.Repeat("<type_text>a", 3000),
		"many braces":   strings.Repeat(`{"a": `, 3000),
		"many fences":   strings.Repeat("```python\n", 3000),
		"long code":     "```python\n" + strings.Repeat("pyautogui.press('a')\n", 5000) + "```",
		"too long text": strings.Repeat("x", MaxText+1),
	} {
		for _, d := range Names() {
			_, err := Parse(d, text)
			if err != nil && aci.CodeOf(err) != aci.CodeDialectError {
				t.Errorf("%s: Parse(%s) code %v; want dialect_error or success", name, d, aci.CodeOf(err))
			}
		}
	}
	if _, err := Parse("xml", strings.Repeat("<actions>", 40)+`<click x="1" y="2"/>`); aci.CodeOf(err) != aci.CodeDialectError {
		t.Errorf("deeply nested xml: %v; want dialect_error", err)
	}
}
