package dialect

import (
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

// node is an element of the tolerant XML tree: a tag with attributes and
// children, or (tag == "") a run of text.
type node struct {
	tag   string // lowercased; "function=click" keeps its "=value"
	attrs map[string]string
	kids  []*node
	text  string // text nodes, and the raw body of raw elements
	raw   bool   // body kept verbatim (not parsed for tags)
	src   string
}

// rawMode says whether an element keeps its body verbatim (JSON payloads and
// typed text may hold '<' and '&' that are not markup): parameters always,
// the others unless their body starts with a tag.
func rawMode(base string) (raw, always bool) {
	switch base {
	case "parameter":
		return true, true
	case "tool_call", "type_text", "type", "text", "clipboard_set", "arguments":
		return true, false
	}
	return false, false
}

// skipped elements hold reasoning, never actions.
var skipped = map[string]bool{
	"think": true, "thinking": true, "reasoning": true, "thought": true, "analysis": true,
	"reflection": true, "plan": true, "observation": true,
}

// wrappers group calls without being calls themselves.
var wrappers = map[string]bool{
	"function_calls": true, "tool_calls": true, "actions": true, "antml:function_calls": true,
}

func baseName(tag string) string {
	if i := strings.IndexByte(tag, '='); i >= 0 {
		return strings.TrimSpace(tag[:i])
	}
	return tag
}

// parseXML reads tool calls written as XML; see the package doc for forms.
// Unclosed tags close at their parent's end or the end of the text.
func parseXML(text string) ([]aci.Action, error) {
	p := &xmlParser{s: text}
	root := p.parse()
	if p.tooDeep {
		return nil, dialectErr(text, "elements nested over %d deep", maxDepth)
	}
	var out []aci.Action
	for _, n := range root {
		acts, err := nodeActions(n)
		if err != nil {
			return nil, err
		}
		out = append(out, acts...)
	}
	return out, nil
}

type xmlParser struct {
	s       string
	pos     int
	tooDeep bool
}

// parse reads nodes until the end of the text.
func (p *xmlParser) parse() []*node {
	kids, _ := p.nodes(nil)
	return kids
}

// nodes reads sibling nodes until a close tag for open[len-1] (consumed) or
// an ancestor (left for the ancestor) or the end of the text.
func (p *xmlParser) nodes(open []string) ([]*node, bool) {
	var kids []*node
	for p.pos < len(p.s) {
		i := strings.IndexByte(p.s[p.pos:], '<')
		if i < 0 {
			kids = appendText(kids, p.s[p.pos:])
			p.pos = len(p.s)
			break
		}
		kids = appendText(kids, p.s[p.pos:p.pos+i])
		p.pos += i
		if strings.HasPrefix(p.s[p.pos:], "<!--") {
			end := strings.Index(p.s[p.pos:], "-->")
			if end < 0 {
				p.pos = len(p.s)
			} else {
				p.pos += end + 3
			}
			continue
		}
		tag, attrs, closing, selfClose, n, ok := readTag(p.s[p.pos:])
		if !ok {
			kids = appendText(kids, "<")
			p.pos++
			continue
		}
		if closing {
			base := baseName(tag)
			for d := len(open) - 1; d >= 0; d-- {
				if baseName(open[d]) == base {
					if d == len(open)-1 {
						p.pos += n // ours: consume
						return kids, true
					}
					return kids, false // an ancestor's: leave it
				}
			}
			p.pos += n // stray close tag: drop it
			continue
		}
		if len(open) >= maxDepth {
			p.tooDeep = true
			p.pos = len(p.s)
			break
		}
		start := p.pos
		p.pos += n
		el := &node{tag: tag, attrs: attrs}
		if !selfClose {
			raw, always := rawMode(baseName(tag))
			if raw && (always || !strings.HasPrefix(strings.TrimSpace(p.s[p.pos:]), "<")) {
				el.raw = true
				el.text = p.rawBody(baseName(tag))
			} else {
				el.kids, _ = p.nodes(append(open[:len(open):len(open)], tag))
			}
		}
		el.src = p.s[start:p.pos]
		kids = append(kids, el)
	}
	return kids, false
}

// maxDepth bounds element nesting; deeper is a dialect_error.
const maxDepth = 32

// rawBody reads verbatim up to the matching close tag (consumed) or the end.
func (p *xmlParser) rawBody(base string) string {
	end := indexFold(p.s[p.pos:], "</"+base)
	if end < 0 {
		body := p.s[p.pos:]
		p.pos = len(p.s)
		return body
	}
	body := p.s[p.pos : p.pos+end]
	if gt := strings.IndexByte(p.s[p.pos+end:], '>'); gt >= 0 {
		p.pos += end + gt + 1
	} else {
		p.pos = len(p.s)
	}
	return body
}

func appendText(kids []*node, s string) []*node {
	if s == "" {
		return kids
	}
	return append(kids, &node{text: s})
}

// readTag reads a tag at the start of s ("<name a="v">", "</name>",
// "<name/>", "<function=click>", "<parameter=x>"). ok is false when s does
// not start a tag ("< 5", "<3").
func readTag(s string) (tag string, attrs map[string]string, closing, selfClose bool, n int, ok bool) {
	i := 1
	if i < len(s) && s[i] == '/' {
		closing = true
		i++
	}
	for i < len(s) && s[i] == ' ' {
		i++
	}
	st := i
	for i < len(s) && (isWordByte(s[i]) || s[i] == ':' || s[i] == '-' || s[i] == '.') {
		i++
	}
	if i == st || !(s[st] >= 'a' && s[st] <= 'z' || s[st] >= 'A' && s[st] <= 'Z' || s[st] == '_') {
		return "", nil, false, false, 0, false
	}
	tag = strings.ToLower(s[st:i])
	if i < len(s) && s[i] == '=' { // <function=name>, <parameter=name>
		j := i + 1
		for j < len(s) && s[j] != '>' && s[j] != '\n' {
			j++
		}
		if j >= len(s) || s[j] != '>' {
			return "", nil, false, false, 0, false
		}
		v := strings.Trim(strings.TrimSpace(s[i+1:j]), `"'`)
		return tag + "=" + v, nil, closing, false, j + 1, true
	}
	attrs = map[string]string{}
	for {
		for i < len(s) && strings.IndexByte(" \t\r\n", s[i]) >= 0 {
			i++
		}
		if i >= len(s) {
			return "", nil, false, false, 0, false
		}
		switch {
		case s[i] == '>':
			return tag, attrs, closing, false, i + 1, true
		case strings.HasPrefix(s[i:], "/>"):
			return tag, attrs, closing, true, i + 2, true
		}
		as := i
		for i < len(s) && (isWordByte(s[i]) || s[i] == '-' || s[i] == ':') {
			i++
		}
		if i == as {
			return "", nil, false, false, 0, false
		}
		name := strings.ToLower(s[as:i])
		if i >= len(s) || s[i] != '=' {
			attrs[name] = ""
			continue
		}
		i++
		if i >= len(s) {
			return "", nil, false, false, 0, false
		}
		var val string
		if q := s[i]; q == '"' || q == '\'' {
			end := strings.IndexByte(s[i+1:], q)
			if end < 0 {
				return "", nil, false, false, 0, false
			}
			val = s[i+1 : i+1+end]
			i += end + 2
		} else {
			vs := i
			for i < len(s) && strings.IndexByte(" \t\r\n>", s[i]) < 0 && !strings.HasPrefix(s[i:], "/>") {
				i++
			}
			val = s[vs:i]
		}
		attrs[name] = unescape(val)
	}
}

var entities = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&apos;", "'", "&#39;", "'", "&amp;", "&")

func unescape(s string) string { return entities.Replace(s) }

// innerText is a node's text: its raw body, or its text children joined.
func (n *node) innerText() string {
	if n.raw || n.tag == "" {
		return n.text
	}
	var b strings.Builder
	for _, k := range n.kids {
		if k.tag == "" {
			b.WriteString(unescape(k.text))
		}
	}
	return b.String()
}

func (n *node) elements() []*node {
	var out []*node
	for _, k := range n.kids {
		if k.tag != "" {
			out = append(out, k)
		}
	}
	return out
}

// nodeActions maps one node onto actions. Text at the top level and inside
// wrappers is prose and ignored; every element must be understood.
func nodeActions(n *node) ([]aci.Action, error) {
	if n.tag == "" {
		return nil, nil
	}
	base := baseName(n.tag)
	switch {
	case skipped[base]:
		return nil, nil
	case wrappers[base]:
		return childActions(n)
	case base == "tool_call":
		body := strings.TrimSpace(n.innerText())
		if !n.raw {
			return childActions(n)
		}
		if body == "" {
			return nil, dialectErr(n.src, "empty tool_call")
		}
		body = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(body, "```json"), "```"))
		v, err := decodeLoose(body)
		if err != nil {
			return nil, dialectErr(n.src, "tool_call: bad JSON: %v", err)
		}
		return jsonActions(v, n.src)
	case base == "invoke" || strings.HasSuffix(base, ":invoke"):
		return paramCall(n, n.attrs["name"])
	case base == "function" && strings.Contains(n.tag, "="):
		return paramCall(n, strings.TrimSpace(n.tag[len("function="):]))
	case base == "action" || base == "function" || base == "call" || base == "tool":
		name := firstNonEmpty(n.attrs["verb"], n.attrs["name"], n.attrs["type"], n.attrs["action"])
		if name == "" {
			// <action>click(..)</action>-style bodies are not XML: refuse.
			if len(n.elements()) == 0 {
				return nil, dialectErr(n.src, "<%s> names no action", n.tag)
			}
			return childActions(n)
		}
		args := elementArgs(n)
		for _, k := range []string{"verb", "name", "type", "action"} {
			if n.attrs[k] == name {
				delete(args, k)
				break
			}
		}
		return call{name: name, args: args, snippet: n.src}.actions()
	}
	if _, ok := actionNames[normName(base)]; ok {
		return call{name: base, args: elementArgs(n), snippet: n.src}.actions()
	}
	return nil, dialectErr(n.src, "unknown element <%s>", n.tag)
}

func childActions(n *node) ([]aci.Action, error) {
	var out []aci.Action
	for _, k := range n.kids {
		acts, err := nodeActions(k)
		if err != nil {
			return nil, err
		}
		out = append(out, acts...)
	}
	return out, nil
}

// paramCall reads <invoke name=X><parameter name=k>v</parameter>... and
// <function=X><parameter=k>v</parameter>... . Parameter values that look
// like JSON (lists, objects, numbers) are decoded.
func paramCall(n *node, name string) ([]aci.Action, error) {
	if name == "" {
		return nil, dialectErr(n.src, "<%s> names no tool", n.tag)
	}
	args := map[string]any{}
	for _, k := range n.elements() {
		var key string
		switch b := baseName(k.tag); {
		case b == "parameter" && strings.Contains(k.tag, "="):
			key = strings.TrimSpace(k.tag[len("parameter="):])
		case b == "parameter" || strings.HasSuffix(b, ":parameter"):
			key = k.attrs["name"]
		default:
			return nil, dialectErr(k.src, "unexpected <%s> in <%s>", k.tag, n.tag)
		}
		if key == "" {
			return nil, dialectErr(k.src, "parameter without a name")
		}
		args[key] = paramValue(k.innerText())
	}
	return call{name: name, args: args, snippet: n.src}.actions()
}

// paramValue decodes a parameter's text: JSON lists and objects become
// values, everything else stays a string (numbers are read where needed).
// Only one leading and trailing newline are trimmed from text, so typed
// text keeps its own spacing.
func paramValue(s string) any {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{") {
		if v, err := decodeLoose(t); err == nil {
			return v
		}
	}
	s = strings.TrimPrefix(s, "\n")
	s = strings.TrimSuffix(s, "\n")
	return s
}

// elementArgs gathers a generic element's arguments: attributes, child
// elements (<x>10</x>), and its own text as "text" when it has any.
func elementArgs(n *node) map[string]any {
	args := map[string]any{}
	for k, v := range n.attrs {
		args[k] = paramValue(v)
	}
	for _, k := range n.elements() {
		args[baseName(k.tag)] = paramValue(k.innerText())
	}
	if t := n.innerText(); strings.TrimSpace(t) != "" {
		key := "text"
		switch normName(baseName(n.tag)) {
		case "key", "keypress", "key_press", "press", "hotkey":
			key = "keys"
		case "wait", "sleep":
			key = "ms"
		case "launch_app", "launch", "open_app":
			key = "app"
		case "click", "left_click", "double_click", "right_click", "move", "mouse_move", "scroll":
			key = "coordinate"
		}
		if n.raw {
			args[key] = t
		} else {
			args[key] = strings.TrimSpace(t)
		}
	}
	return args
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// indexFold is strings.Index ignoring ASCII case in s (sub is lowercase).
func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		j := strings.IndexByte(s[i:], '<')
		if j < 0 {
			return -1
		}
		i += j
		if i+len(sub) <= len(s) && strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}
