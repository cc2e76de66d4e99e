package dialect

import "testing"

// TestElementRefs: every form with named arguments takes element refs, and
// the element verbs parse in each.
func TestElementRefs(t *testing.T) {
	clickE12 := `[{"verb":"click","target":{"kind":"element_ref","x":0,"y":0,"ref":"e12"}}]`
	runOK(t, []okCase{
		{"pyautogui element=", "pyautogui", `pyautogui.click(element="e12")`, clickE12},
		{"pyautogui positional ref", "pyautogui", `pyautogui.click("e12")`, clickE12},
		{"pyautogui double", "pyautogui", `pyautogui.doubleClick(element='e3')`, `[{"verb":"double_click","target":{"kind":"element_ref","x":0,"y":0,"ref":"e3"}}]`},
		{"pyautogui invokeAction", "pyautogui", `pyautogui.invokeAction("e7", action="click")`, `[{"verb":"invoke_action","target":{"kind":"element_ref","x":0,"y":0,"ref":"e7"},"text":"click"}]`},
		{"pyautogui setValue", "pyautogui", "```python\npyautogui.setValue(element=\"e9\", value=\"reports\")\n```", `[{"verb":"set_value","target":{"kind":"element_ref","x":0,"y":0,"ref":"e9"},"text":"reports"}]`},
		{"json ref", "json", `{"action": "click", "ref": "e12"}`, clickE12},
		{"json element target", "json", `{"action": "click", "target": {"kind": "element_ref", "ref": "e12"}}`, clickE12},
		{"json native", "json", `{"verb": "click", "target": {"kind": "element_ref", "ref": "e12"}}`, clickE12},
		{"json invoke", "json", `{"action": "invoke_action", "ref": "e4", "name": "activate"}`, `[{"verb":"invoke_action","target":{"kind":"element_ref","x":0,"y":0,"ref":"e4"},"text":"activate"}]`},
		{"json set_value", "json", `{"action": "set_value", "ref": "e5", "value": "42"}`, `[{"verb":"set_value","target":{"kind":"element_ref","x":0,"y":0,"ref":"e5"},"text":"42"}]`},
		{"xml invoke ref", "xml", `<invoke name="computer"><parameter name="action">left_click</parameter><parameter name="ref">e12</parameter></invoke>`, clickE12},
		{"xml set_value", "xml", `<invoke name="set_value"><parameter name="ref">e5</parameter><parameter name="value">hi</parameter></invoke>`, `[{"verb":"set_value","target":{"kind":"element_ref","x":0,"y":0,"ref":"e5"},"text":"hi"}]`},
		{"xml tool_call ref", "xml", `<tool_call>{"name": "computer_use", "arguments": {"action": "left_click", "element": "e12"}}</tool_call>`, clickE12},
	})
	runErr(t, []errCase{
		{"pyautogui bad ref", "pyautogui", `pyautogui.click(element="button")`, `element="button"`},
		{"json bad ref", "json", `{"action": "click", "ref": "12"}`, `"ref": "12"`},
		{"json invoke without ref", "json", `{"action": "invoke_action"}`, `invoke_action`},
		{"json set_value without value", "json", `{"action": "set_value", "ref": "e1"}`, `set_value`},
		{"pyautogui setValue without value", "pyautogui", `pyautogui.setValue("e1")`, `setValue`},
	})
}
