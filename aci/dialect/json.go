package dialect

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

// parseJSON reads computer_use-style JSON: the objects inside ```json (or
// bare ```) fences when there are any, else every top-level object or list
// in the text that starts like JSON ({" or [{ / ["). Trailing commas are
// forgiven; an object that still does not decode is a dialect_error.
func parseJSON(text string) ([]aci.Action, error) {
	var chunks []string
	for _, f := range fences(text) {
		if f.lang == "json" || f.lang == "" && startsJSON(f.body) {
			chunks = append(chunks, f.body)
		}
	}
	if len(chunks) == 0 {
		chunks = []string{text}
	}
	var out []aci.Action
	for _, chunk := range chunks {
		vals, err := scanJSON(chunk)
		if err != nil {
			return nil, err
		}
		for _, v := range vals {
			acts, err := jsonActions(v.val, v.src)
			if err != nil {
				return nil, err
			}
			out = append(out, acts...)
		}
	}
	return out, nil
}

func startsJSON(s string) bool {
	s = strings.TrimSpace(s)
	return strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")
}

type jsonValue struct {
	val any
	src string
}

// scanJSON finds every top-level JSON object or list in s.
func scanJSON(s string) ([]jsonValue, error) {
	var out []jsonValue
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '{' && c != '[' {
			continue
		}
		j := i + 1
		for j < len(s) && (s[j] == ' ' || s[j] == '\n' || s[j] == '\t' || s[j] == '\r') {
			j++
		}
		if j >= len(s) || (s[j] != '"' && s[j] != '{' && !(c == '{' && s[j] == '}')) {
			continue // prose braces, not JSON
		}
		end, ok := matchBracket(s, i)
		if !ok {
			return nil, dialectErr(s[i:], "unclosed JSON value")
		}
		src := s[i:end]
		v, err := decodeLoose(src)
		if err != nil {
			return nil, dialectErr(src, "bad JSON: %v", err)
		}
		out = append(out, jsonValue{val: v, src: src})
		i = end - 1
	}
	return out, nil
}

// matchBracket returns the index just past the bracket that closes s[start],
// skipping JSON strings.
func matchBracket(s string, start int) (int, bool) {
	depth, inStr := 0, false
	for i := start; i < len(s); i++ {
		c := s[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// decodeLoose decodes JSON after dropping trailing commas before } and ].
func decodeLoose(src string) (any, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(stripTrailingCommas(src)))
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errTrailing
	}
	return v, nil
}

var errTrailing = &aci.Error{Code: aci.CodeDialectError, Message: "trailing data after JSON value"}

func stripTrailingCommas(s string) string {
	if !hasTrailingComma(s) {
		return s
	}
	var b bytes.Buffer
	b.Grow(len(s))
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			b.WriteByte(c)
			if c == '\\' && i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
		}
		if c == ',' {
			j := i + 1
			for j < len(s) && strings.IndexByte(" \t\r\n", s[j]) >= 0 {
				j++
			}
			if j < len(s) && (s[j] == '}' || s[j] == ']') {
				continue
			}
		}
		b.WriteByte(c)
	}
	return b.String()
}

// hasTrailingComma reports a ',' that only whitespace separates from a '}'
// or ']' (inside a string or not: a false alarm only costs the copy).
func hasTrailingComma(s string) bool {
	for i := strings.IndexByte(s, ','); i >= 0; {
		j := i + 1
		for j < len(s) && strings.IndexByte(" \t\r\n", s[j]) >= 0 {
			j++
		}
		if j < len(s) && (s[j] == '}' || s[j] == ']') {
			return true
		}
		k := strings.IndexByte(s[j:], ',')
		if k < 0 {
			return false
		}
		i = j + k
	}
	return false
}

// jsonActions maps one decoded JSON value onto actions.
func jsonActions(v any, src string) ([]aci.Action, error) {
	switch x := v.(type) {
	case []any:
		var out []aci.Action
		for _, e := range x {
			acts, err := jsonActions(e, src)
			if err != nil {
				return nil, err
			}
			out = append(out, acts...)
		}
		return out, nil
	case map[string]any:
		return objectActions(x, src)
	}
	return nil, dialectErr(src, "want an action object, got %T", v)
}

func objectActions(m map[string]any, src string) ([]aci.Action, error) {
	if list, ok := m["tool_calls"]; ok && len(m) == 1 {
		return jsonActions(list, src)
	}
	if list, ok := m["actions"]; ok && len(m) == 1 {
		return jsonActions(list, src)
	}
	if fn, ok := m["function"].(map[string]any); ok { // OpenAI tool call entry
		name, _ := fn["name"].(string)
		args, err := argsOf(fn["arguments"], src)
		if err != nil {
			return nil, err
		}
		return call{name: name, args: args, snippet: src}.actions()
	}
	if name, ok := m["name"].(string); ok {
		for _, k := range []string{"arguments", "parameters", "args", "input"} {
			if raw, ok := m[k]; ok {
				args, err := argsOf(raw, src)
				if err != nil {
					return nil, err
				}
				return call{name: name, args: args, snippet: src}.actions()
			}
		}
		if len(m) == 1 {
			return call{name: name, args: map[string]any{}, snippet: src}.actions()
		}
	}
	return call{args: m, snippet: src}.actions()
}

// argsOf reads tool-call arguments: an object, or a string holding one.
func argsOf(raw any, src string) (map[string]any, error) {
	switch a := raw.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return a, nil
	case string:
		if strings.TrimSpace(a) == "" {
			return map[string]any{}, nil
		}
		v, err := decodeLoose(a)
		if err != nil {
			return nil, dialectErr(src, "bad arguments JSON: %v", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, dialectErr(src, "arguments must be an object")
		}
		return m, nil
	}
	return nil, dialectErr(src, "arguments must be an object")
}

// fence is one ``` block: its language tag and body.
type fence struct {
	lang string
	body string
}

// fences returns the ``` blocks of text in order. A fence left open runs to
// the end of the text. The language tag is the word right after the opening
// ``` when a newline follows it (so ```DONE``` is a body, not a tag).
func fences(text string) []fence {
	var out []fence
	for {
		i := strings.Index(text, "```")
		if i < 0 {
			return out
		}
		rest := text[i+3:]
		lang := ""
		j := 0
		for j < len(rest) && (isWordByte(rest[j]) || rest[j] == '+' || rest[j] == '-') {
			j++
		}
		k := j
		for k < len(rest) && (rest[k] == ' ' || rest[k] == '\t' || rest[k] == '\r') {
			k++
		}
		if j > 0 && (k >= len(rest) || rest[k] == '\n') {
			lang = strings.ToLower(rest[:j])
			rest = rest[k:]
		}
		end := strings.Index(rest, "```")
		if end < 0 {
			return append(out, fence{lang: lang, body: rest})
		}
		out = append(out, fence{lang: lang, body: rest[:end]})
		text = rest[end+3:]
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
