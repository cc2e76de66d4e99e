package dialect

import (
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

// fuzzFamily seeds a fuzz target with the family's corpus (samples and
// errors) and checks, for the family's dialect and auto, that no input
// panics, every failure is a dialect_error, every action has a known verb,
// and every point maps through the default space without panicking (a
// point outside it is invalid_action, nothing else).
func fuzzFamily(f *testing.F, family string) {
	for _, c := range loadCorpus(f) {
		if c.Family != family {
			continue
		}
		for _, s := range c.Samples {
			f.Add(s.Text)
		}
		for _, e := range c.Errors {
			f.Add(e.Text)
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, d := range []string{family, Auto} {
			p, err := Parse(d, text)
			if err != nil {
				if c := aci.CodeOf(err); c != aci.CodeDialectError {
					t.Fatalf("Parse(%s, %q) code %q; want dialect_error", d, text, c)
				}
				continue
			}
			for _, a := range p.Actions {
				if !a.Verb.Known() {
					t.Fatalf("Parse(%s, %q) produced unknown verb %q", d, text, a.Verb)
				}
				if err := p.Coords.MapAction(&a, sampleDisplay); err != nil && aci.CodeOf(err) != aci.CodeInvalidAction {
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
