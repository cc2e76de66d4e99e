package dialect

import (
	"regexp"
	"strings"
)

// Seed's native tool-call wrapper (ByteDance Seed / Doubao models).
const (
	seedOpen  = "<seed:tool_call>"
	seedClose = "</seed:tool_call>"
)

var (
	seedFunction  = regexp.MustCompile(`(?s)<function(?:\s+name\s*=\s*"([^"]*)"[^>]*|=([^>\s]+))\s*>(.*?)</function>`)
	seedParameter = regexp.MustCompile(`(?s)<parameter(?:\s+name\s*=\s*"([^"]*)"[^>]*|=([^>\s]+))\s*>(.*?)</parameter>`)
)

// parseSeed reads the <seed:tool_call> blocks of a Seed GUI agent's
// output: each holds <function name="..."> (or <function=...>) elements
// whose <parameter name="..."> (or <parameter=...>) children are the
// arguments of the UI-TARS call of that name; text between the blocks is
// ignored. Parameter values are raw text, except that a content ending in
// a written \n ends in a newline (UI-TARS's submit convention). Anything
// else inside a block is a dialect_error.
func parseSeed(body string) (parsed, error) {
	u := &uitarsParser{p: &pyParser{}}
	for _, block := range taggedBlocks(body, seedOpen, seedClose) {
		rest := block
		for _, m := range seedFunction.FindAllStringSubmatchIndex(block, -1) {
			src := block[m[0]:m[1]]
			c := uitarsCall{name: strings.ToLower(strings.TrimSpace(sub(block, m, 1) + sub(block, m, 2))), args: map[string]string{}, src: src}
			inner := sub(block, m, 3)
			for _, pm := range seedParameter.FindAllStringSubmatch(inner, -1) {
				key := strings.TrimSpace(pm[1] + pm[2])
				if _, dup := c.args[key]; dup {
					return parsed{}, dialectErr(src, "argument %s given twice", key)
				}
				v := pm[3]
				if key == "content" { // UI-TARS convention: a trailing \n (here unescaped text) submits
					if t, ok := strings.CutSuffix(v, `\n`); ok {
						v = t + "\n"
					}
				}
				c.args[key] = v
			}
			if leftover := strings.TrimSpace(seedParameter.ReplaceAllString(inner, "")); leftover != "" {
				return parsed{}, dialectErr(src, "unexpected %q in a Seed function call", clip(leftover))
			}
			if u.ended {
				return parsed{}, dialectErr(src, "%s after the episode's end", c.name)
			}
			if err := u.apply(c); err != nil {
				return parsed{}, err
			}
			rest = strings.Replace(rest, src, "", 1)
		}
		if strings.TrimSpace(rest) != "" {
			return parsed{}, dialectErr(block, "unexpected %q in a seed:tool_call block", clip(rest))
		}
	}
	if err := u.p.finish(); err != nil {
		return parsed{}, err
	}
	return parsed{acts: u.p.out, answer: u.answer}, nil
}

// sub is submatch n of the index match m in s ("" when it did not take part).
func sub(s string, m []int, n int) string {
	if m[2*n] < 0 {
		return ""
	}
	return s[m[2*n]:m[2*n+1]]
}
