package dialect

import (
	"regexp"
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

// Element refs in model text (docs/api.md, "Structured observation"): every
// family whose form has named arguments takes an element ref where it takes
// a point — `ref`/`element` in JSON and XML calls (`{"action": "click",
// "ref": "e12"}`, `<click><ref>e12</ref></click>`), `element=` in the
// pyautogui form (`pyautogui.click(element="e12")`) — and two element
// verbs: invoke_action (ref, optional action name) and set_value (ref,
// value). pyautogui spells them pyautogui.invokeAction(element, action=None)
// and pyautogui.setValue(element, value).

// refRE is an element id as observations issue them.
var refRE = regexp.MustCompile(`^e[1-9][0-9]{0,8}$`)

// refKeys are the argument names that carry an element ref.
var refKeys = []string{"ref", "element", "element_id", "element_ref"}

// asRef reads an element ref ("e12", or {"kind": "element_ref", "ref":
// "e12"}); isRef is false for anything else (a point, say).
func asRef(v any) (*aci.Target, bool, error) {
	switch r := v.(type) {
	case string:
		s := strings.TrimSpace(r)
		if !refRE.MatchString(s) {
			return nil, false, nil
		}
		return aci.Ref(s), true, nil
	case map[string]any:
		if k, _ := r["kind"].(string); k == aci.ElementRef {
			s, _ := r["ref"].(string)
			if !refRE.MatchString(s) || len(r) != 2 {
				return nil, true, dialectErrNoSnippet("element_ref target wants {kind, ref: e<N>}")
			}
			return aci.Ref(s), true, nil
		}
	}
	return nil, false, nil
}

func dialectErrNoSnippet(format string, args ...any) error {
	return aci.Errorf(aci.CodeDialectError, format, args...)
}

// ref reads an element ref argument; nil when the call has none.
func (r *argReader) ref() (*aci.Target, error) {
	v, k, ok := r.get(refKeys...)
	if !ok {
		return nil, nil
	}
	t, _, err := asRef(v)
	if err != nil {
		return nil, r.errf("argument %s: %s", k, aci.AsError(err).Message)
	}
	if t == nil {
		return nil, r.errf("argument %s: want an element id e<N> from the observation's tree", k)
	}
	return t, nil
}

func (r *argReader) invokeAction() ([]aci.Action, error) {
	t, err := r.ref()
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, r.errf("invoke_action needs ref")
	}
	name, _, err := r.str("action", "name", "action_name")
	if err != nil {
		return nil, err
	}
	return []aci.Action{{Verb: aci.InvokeAction, Target: t, Text: name}}, nil
}

func (r *argReader) setValue() ([]aci.Action, error) {
	t, err := r.ref()
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, r.errf("set_value needs ref")
	}
	v, ok, err := r.str("value", "text")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, r.errf("set_value needs value")
	}
	return []aci.Action{{Verb: aci.SetValue, Target: t, Text: v}}, nil
}

// addElementActions registers the element verbs with the named-argument
// families.
func addElementActions(m map[string]func(*argReader) ([]aci.Action, error)) {
	for _, n := range []string{"invoke_action", "invoke", "do_action"} {
		m[n] = (*argReader).invokeAction
	}
	for _, n := range []string{"set_value", "setvalue", "set_text"} {
		m[n] = (*argReader).setValue
	}
}

// pyElement reads pyautogui's element= argument (or an "e12" string where x
// goes); nil when there is none.
func (a *pyArgs) element() (*aci.Target, error) {
	v, ok := a.args["element"]
	if !ok {
		if s, isStr := a.args["x"].(string); isStr && refRE.MatchString(strings.TrimSpace(s)) && a.args["y"] == nil {
			v, ok = s, true
		}
	}
	if !ok || v == nil {
		return nil, nil
	}
	t, _, err := asRef(v)
	if err != nil {
		return nil, dialectErr(a.src, "%s", aci.AsError(err).Message)
	}
	if t == nil {
		return nil, dialectErr(a.src, "element must be an element id like \"e12\"")
	}
	return t, nil
}

// pyElementCall maps pyautogui.invokeAction / pyautogui.setValue.
func (p *pyParser) pyElementCall(fn string, a *pyArgs) ([]aci.Action, error) {
	t, err := a.element()
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, dialectErr(a.src, "%s needs element", fn)
	}
	act := aci.Action{Verb: aci.InvokeAction, Target: t}
	key := "action"
	if fn == "setValue" {
		act.Verb, key = aci.SetValue, "value"
	}
	if v, ok := a.args[key]; ok && v != nil {
		s, ok := v.(string)
		if !ok {
			return nil, dialectErr(a.src, "%s must be a string", key)
		}
		act.Text = s
	} else if fn == "setValue" {
		return nil, dialectErr(a.src, "setValue needs value")
	}
	return []aci.Action{act}, nil
}
