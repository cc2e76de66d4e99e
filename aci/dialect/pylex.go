package dialect

import (
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The Python subset the pyautogui-family parsers read: a lexer for
// statements and a reader for literal values.
// Token kinds.
const (
	tName = iota + 1
	tNum
	tStr
	tOp
)

type token struct {
	kind int
	s    string // name, operator, or decoded string
	n    float64
}

// lexer tokenizes the Python subset the parser understands.
type lexer struct {
	s   string
	pos int
}

// statement reads tokens up to a newline or ';' outside brackets (consumed).
func (l *lexer) statement() ([]token, error) {
	var toks []token
	depth := 0
	for l.pos < len(l.s) {
		c := l.s[l.pos]
		switch {
		case c == '\n' || c == ';':
			l.pos++
			if depth == 0 {
				return toks, nil
			}
		case c == ' ' || c == '\t' || c == '\r':
			l.pos++
		case c == '\\' && l.pos+1 < len(l.s) && l.s[l.pos+1] == '\n':
			l.pos += 2
		case c == '#':
			for l.pos < len(l.s) && l.s[l.pos] != '\n' {
				l.pos++
			}
		case c == '"' || c == '\'':
			s, err := l.str("")
			if err != nil {
				return nil, err
			}
			toks = append(toks, token{kind: tStr, s: s})
		case isWordByte(c) && !(c >= '0' && c <= '9'):
			st := l.pos
			for l.pos < len(l.s) && isWordByte(l.s[l.pos]) {
				l.pos++
			}
			w := l.s[st:l.pos]
			if l.pos < len(l.s) && (l.s[l.pos] == '"' || l.s[l.pos] == '\'') && isStrPrefix(w) {
				s, err := l.str(strings.ToLower(w))
				if err != nil {
					return nil, err
				}
				toks = append(toks, token{kind: tStr, s: s})
				continue
			}
			toks = append(toks, token{kind: tName, s: w})
		case c >= '0' && c <= '9' || c == '.' && l.pos+1 < len(l.s) && l.s[l.pos+1] >= '0' && l.s[l.pos+1] <= '9':
			st := l.pos
			for l.pos < len(l.s) && (isWordByte(l.s[l.pos]) || l.s[l.pos] == '.') {
				l.pos++
			}
			lit := strings.ReplaceAll(l.s[st:l.pos], "_", "")
			n, err := strconv.ParseFloat(lit, 64)
			if err != nil {
				if i, ierr := strconv.ParseInt(lit, 0, 64); ierr == nil {
					n, err = float64(i), nil
				}
			}
			if err != nil {
				return nil, dialectErr(l.s[st:l.pos], "bad number %q", l.s[st:l.pos])
			}
			toks = append(toks, token{kind: tNum, n: n})
		case strings.IndexByte("()[]{},=.+-:*", c) >= 0:
			switch c {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth--
			}
			toks = append(toks, token{kind: tOp, s: string(c)})
			l.pos++
		default:
			r, size := utf8.DecodeRuneInString(l.s[l.pos:])
			st := l.pos
			l.pos += size
			return nil, dialectErr(lineAround(l.s, st), "unexpected %q in code", r)
		}
	}
	if depth > 0 {
		return nil, dialectErr(string(tokSrc(toks)), "unclosed bracket in code")
	}
	return toks, nil
}

func tokSrc(toks []token) string {
	var b strings.Builder
	for _, t := range toks {
		switch t.kind {
		case tStr:
			b.WriteString(strconv.Quote(t.s))
		case tNum:
			b.WriteString(strconv.FormatFloat(t.n, 'g', -1, 64))
		default:
			b.WriteString(t.s)
		}
	}
	return b.String()
}

func lineAround(s string, i int) string {
	st := strings.LastIndexByte(s[:i], '\n') + 1
	end := strings.IndexByte(s[i:], '\n')
	if end < 0 {
		return s[st:]
	}
	return s[st : i+end]
}

func isStrPrefix(w string) bool {
	switch strings.ToLower(w) {
	case "r", "u", "b", "f", "rb", "br", "fr", "rf":
		return true
	}
	return false
}

// str reads a string literal (single, double or triple quoted) at l.pos.
func (l *lexer) str(prefix string) (string, error) {
	st := l.pos
	q := l.s[l.pos]
	delim := string(q)
	if strings.HasPrefix(l.s[l.pos:], strings.Repeat(delim, 3)) {
		delim = strings.Repeat(delim, 3)
	}
	l.pos += len(delim)
	raw := strings.Contains(prefix, "r")
	var b strings.Builder
	for {
		if l.pos >= len(l.s) {
			return "", dialectErr(lineAround(l.s, st), "unterminated string")
		}
		if strings.HasPrefix(l.s[l.pos:], delim) {
			l.pos += len(delim)
			break
		}
		c := l.s[l.pos]
		if c == '\n' && len(delim) == 1 {
			return "", dialectErr(lineAround(l.s, st), "unterminated string")
		}
		if c == '\\' && l.pos+1 < len(l.s) {
			if raw {
				b.WriteString(l.s[l.pos : l.pos+2])
				l.pos += 2
				continue
			}
			n, err := l.escape(&b)
			if err != nil {
				return "", err
			}
			l.pos += n
			continue
		}
		b.WriteByte(c)
		l.pos++
	}
	s := b.String()
	if strings.Contains(prefix, "f") && strings.ContainsAny(s, "{}") {
		return "", dialectErr(l.s[st:l.pos], "f-string with fields cannot be evaluated")
	}
	return s, nil
}

// escape decodes the escape at l.pos into b and returns its length.
func (l *lexer) escape(b *strings.Builder) (int, error) {
	e := l.s[l.pos+1]
	simple := map[byte]string{'n': "\n", 't': "\t", 'r': "\r", '\\': "\\", '\'': "'", '"': "\"",
		'a': "\a", 'b': "\b", 'f': "\f", 'v': "\v", '0': "\x00", '\n': ""}
	if s, ok := simple[e]; ok {
		b.WriteString(s)
		return 2, nil
	}
	width := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
	if width == 0 {
		b.WriteString(l.s[l.pos : l.pos+2]) // Python keeps unknown escapes
		return 2, nil
	}
	if l.pos+2+width > len(l.s) {
		return 0, dialectErr(l.s[l.pos:], "bad escape")
	}
	v, err := strconv.ParseUint(l.s[l.pos+2:l.pos+2+width], 16, 32)
	if err != nil || !utf8.ValidRune(rune(v)) {
		return 0, dialectErr(l.s[l.pos:l.pos+2+width], "bad escape")
	}
	b.WriteRune(rune(v))
	return 2 + width, nil
}

func dotted(toks []token, i int) (string, int, bool) {
	if i >= len(toks) || toks[i].kind != tName {
		return "", i, false
	}
	name := toks[i].s
	i++
	for i+1 < len(toks) && toks[i].kind == tOp && toks[i].s == "." && toks[i+1].kind == tName {
		name += "." + toks[i+1].s
		i += 2
	}
	return name, i, true
}

// value reads a literal: number (with sign), string (adjacent ones joined),
// True/False/None, a tuple/list of literals, or a name bound in names.
func value(toks []token, i int, src string, names map[string]any) (any, int, error) {
	if i >= len(toks) {
		return nil, i, dialectErr(src, "missing value")
	}
	t := toks[i]
	switch {
	case t.kind == tNum:
		return t.n, i + 1, nil
	case t.kind == tOp && (t.s == "-" || t.s == "+") && i+1 < len(toks) && toks[i+1].kind == tNum:
		if t.s == "-" {
			return -toks[i+1].n, i + 2, nil
		}
		return toks[i+1].n, i + 2, nil
	case t.kind == tStr:
		s := t.s
		i++
		for i < len(toks) && toks[i].kind == tStr {
			s += toks[i].s
			i++
		}
		return s, i, nil
	case t.kind == tName && (t.s == "True" || t.s == "False"):
		return t.s == "True", i + 1, nil
	case t.kind == tName && t.s == "None":
		return nil, i + 1, nil
	case t.kind == tOp && (t.s == "(" || t.s == "["):
		closer := map[string]string{"(": ")", "[": "]"}[t.s]
		var list []any
		i++
		for {
			if i >= len(toks) {
				return nil, i, dialectErr(src, "unclosed %s", t.s)
			}
			if toks[i].kind == tOp && toks[i].s == closer {
				return list, i + 1, nil
			}
			v, j, err := value(toks, i, src, names)
			if err != nil {
				return nil, i, err
			}
			list = append(list, v)
			i = j
			if i < len(toks) && toks[i].kind == tOp && toks[i].s == "," {
				i++
			}
		}
	case t.kind == tName:
		if v, ok := names[t.s]; ok {
			return v, i + 1, nil
		}
		if somTag.MatchString(t.s) {
			if names != nil { // the osworld dialect: a mark target, refused when mapped
				return markLabel(strings.TrimPrefix(t.s, "tag_")), i + 1, nil
			}
			return nil, i, dialectErr(src, "Set-of-Mark label %s is not defined: the server draws no marks, so write %s = (x, y) first or give coordinates", t.s, t.s)
		}
	}
	return nil, i, dialectErr(src, "only literal arguments are supported")
}

// markLabel is an unbound Set-of-Mark label (tag_3 → "3") where the osworld
// dialect reads a point: it becomes an aci.Mark target.
type markLabel string

// somTag matches a Set-of-Mark label variable (OSWorld's som observation).
var somTag = regexp.MustCompile(`^tag_[0-9]+$`)
