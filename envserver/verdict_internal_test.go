package envserver

import (
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/guest/wire"
)

func TestVerdictContract(t *testing.T) {
	zero, three := 0, 3
	ok := func(out string) *wire.ExecResult { return &wire.ExecResult{ExitCode: &zero, Stdout: []byte(out)} }
	unit := &configs.Verifier{}
	wide := &configs.Verifier{Range: &[2]float64{-1, 10}}
	for _, c := range []struct {
		v    *configs.Verifier
		r    *wire.ExecResult
		want float64
		bad  bool
	}{
		{unit, ok("1\n"), 1, false},
		{unit, ok("  0 "), 0, false},
		{unit, ok("0.5"), 0.5, false},
		{wide, ok("-1"), -1, false},
		{wide, ok("7.5\n"), 7.5, false},
		{unit, ok("1e308"), 0, true},
		{unit, ok("0\n1"), 0, true},
		{unit, ok("NaN"), 0, true},
		{unit, ok("+Inf"), 0, true},
		{unit, ok("-0.1"), 0, true},
		{unit, ok("yes"), 0, true},
		{unit, ok(""), 0, true},
		{unit, ok("1 " + strings.Repeat("x", 4000)), 0, true},
		{unit, &wire.ExecResult{ExitCode: &three, Stdout: []byte("1")}, 0, true},
		{unit, &wire.ExecResult{Signal: "SIGKILL", Stdout: []byte("1")}, 0, true},
		{unit, &wire.ExecResult{TimedOut: true, Signal: "SIGKILL", Stdout: []byte("1")}, 0, true},
		{unit, &wire.ExecResult{ExitCode: &zero, Stdout: []byte("1"), StdoutTruncated: true}, 0, true},
	} {
		got, err := parseVerdict(c.v, c.r)
		switch {
		case c.bad && (aci.CodeOf(err) != aci.CodeScorerError || got != 0):
			t.Errorf("%q: got %v, %v; want 0 and scorer_error", c.r.Stdout, got, err)
		case c.bad:
			d, _ := aci.AsError(err).Detail.(map[string]any)
			if s, _ := d["stdout"].(string); len(s) > verdictSnippet || s != snippet(string(c.r.Stdout)) {
				t.Errorf("%q: detail stdout %q; want the output's snippet", c.r.Stdout, s)
			}
		case err != nil || got != c.want:
			t.Errorf("%q: got %v, %v; want %v", c.r.Stdout, got, err, c.want)
		}
	}
}
