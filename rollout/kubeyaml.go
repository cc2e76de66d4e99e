package rollout

import (
	"encoding/json"
	"fmt"
	"strings"
)

// parseKubeYAML reads the YAML a kubeconfig is written in: JSON, or block
// mappings and sequences of plain or quoted scalars (with empty {} and []),
// which is what kubectl writes. Anything else (anchors, block scalars, flow
// collections with content) is an error. The same subset as the Python
// client's shinken.k8s.parse_yaml.
func parseKubeYAML(text string) (any, error) {
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		var v any
		if err := json.Unmarshal([]byte(t), &v); err != nil {
			return nil, err
		}
		return v, nil
	}
	var lines []yline
	for _, raw := range strings.Split(text, "\n") {
		s := strings.TrimRight(stripYAMLComment(strings.TrimRight(raw, "\r")), " \t")
		trim := strings.TrimSpace(s)
		if trim == "" || trim == "---" || trim == "..." {
			continue
		}
		lead := s[:len(s)-len(strings.TrimLeft(s, " \t"))]
		if strings.Contains(lead, "\t") {
			return nil, fmt.Errorf("tab in indentation")
		}
		lines = append(lines, yline{len(lead), trim})
	}
	if len(lines) == 0 {
		return nil, nil
	}
	p := &yparser{lines: lines}
	v, err := p.node(0, lines[0].indent)
	if err != nil {
		return nil, err
	}
	if p.i != len(p.lines) {
		return nil, fmt.Errorf("unexpected indentation at %q", p.lines[p.i].text)
	}
	return v, nil
}

type yline struct {
	indent int
	text   string
}

type yparser struct {
	lines []yline
	i     int
}

func stripYAMLComment(s string) string {
	var q byte
	for k := 0; k < len(s); k++ {
		c := s[k]
		switch {
		case q != 0:
			if c == q {
				q = 0
			}
		case (c == '\'' || c == '"') && (k == 0 || strings.IndexByte(" :-[{,", s[k-1]) >= 0):
			q = c
		case c == '#' && (k == 0 || s[k-1] == ' ' || s[k-1] == '\t'):
			return s[:k]
		}
	}
	return s
}

func isYAMLItem(s string) bool { return s == "-" || strings.HasPrefix(s, "- ") }

func (p *yparser) node(i, indent int) (any, error) {
	p.i = i
	if isYAMLItem(p.lines[i].text) {
		return p.seq(indent)
	}
	return p.mapping(indent)
}

func (p *yparser) seq(indent int) (any, error) {
	out := []any{}
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && isYAMLItem(p.lines[p.i].text) {
		l := p.lines[p.i]
		rest := strings.TrimLeft(l.text[1:], " ")
		var v any
		var err error
		switch {
		case rest == "":
			if p.i+1 < len(p.lines) && p.lines[p.i+1].indent > indent {
				v, err = p.node(p.i+1, p.lines[p.i+1].indent)
			} else {
				p.i++
			}
		case isYAMLItem(rest) || splitYAMLKey(rest) != nil:
			// "- key: value": a mapping (or sequence) whose first line starts here.
			sub := indent + len(l.text) - len(rest)
			p.lines[p.i] = yline{sub, rest}
			v, err = p.node(p.i, sub)
		default:
			v, err = yamlScalar(rest)
			p.i++
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (p *yparser) mapping(indent int) (any, error) {
	out := map[string]any{}
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && !isYAMLItem(p.lines[p.i].text) {
		kv := splitYAMLKey(p.lines[p.i].text)
		if kv == nil {
			return nil, fmt.Errorf("want key: value, got %q", p.lines[p.i].text)
		}
		var v any
		var err error
		switch {
		case kv[1] != "":
			v, err = yamlScalar(kv[1])
			p.i++
		case p.i+1 < len(p.lines) && (p.lines[p.i+1].indent > indent ||
			(p.lines[p.i+1].indent == indent && isYAMLItem(p.lines[p.i+1].text))):
			v, err = p.node(p.i+1, p.lines[p.i+1].indent)
		default:
			p.i++
		}
		if err != nil {
			return nil, err
		}
		out[kv[0]] = v
	}
	return out, nil
}

// splitYAMLKey splits "key: rest" (key plain or quoted); nil if s is not one.
func splitYAMLKey(s string) []string {
	var key, rest string
	if s[0] == '\'' || s[0] == '"' {
		end := strings.IndexByte(s[1:], s[0])
		if end < 0 || !strings.HasPrefix(s[end+2:], ":") {
			return nil
		}
		key, rest = s[1:end+1], s[end+3:]
	} else {
		k := strings.Index(s, ": ")
		if k < 0 {
			if !strings.HasSuffix(s, ":") {
				return nil
			}
			k = len(s) - 1
		}
		key, rest = s[:k], s[k+1:]
	}
	if rest != "" && rest[0] != ' ' {
		return nil
	}
	return []string{strings.TrimSpace(key), strings.TrimSpace(rest)}
}

func yamlScalar(s string) (any, error) {
	switch {
	case s[0] == '"':
		if len(s) < 2 || !strings.HasSuffix(s, `"`) {
			return nil, fmt.Errorf("unterminated string %q", s)
		}
		var v string
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("string %q: %v", s, err)
		}
		return v, nil
	case s[0] == '\'':
		if len(s) < 2 || !strings.HasSuffix(s, "'") {
			return nil, fmt.Errorf("unterminated string %q", s)
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	case s == "{}":
		return map[string]any{}, nil
	case s == "[]":
		return []any{}, nil
	case strings.IndexByte("{[&*!|>", s[0]) >= 0:
		return nil, fmt.Errorf("unsupported YAML in a kubeconfig: %q", s)
	}
	switch s {
	case "null", "~", "Null", "NULL":
		return nil, nil
	case "true", "True", "TRUE":
		return true, nil
	case "false", "False", "FALSE":
		return false, nil
	}
	return s, nil
}
