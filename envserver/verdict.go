package envserver

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/guest/wire"
)

const (
	defaultVerifierTimeout = 10 * time.Second
	// verdictSnippet bounds how much of a bad verdict's output is kept in
	// the trajectory for the operator.
	verdictSnippet = 512
)

// verdict is one verifier run: the reward, or why there is none.
type verdict struct {
	reward   float64
	err      error // scorer_error (or the sandbox's death); reward is 0
	freezeUS int64 // how long stopping the agent's processes took
}

// verify scores e's episode: guestd stops the agent's processes and runs the
// task's verifier out of their reach; the output must be exactly one number
// in the task's reward range. The verifier gets its own deadline, not what
// the agent's step left.
func (s *Server) verify(ctx context.Context, e *env) verdict {
	v := &e.task.Verifier
	timeout := time.Duration(v.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultVerifierTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout+freezeAllowance)
	defer cancel()
	res, err := e.lease.Guest().Score(ctx, wire.ScoreArgs{Argv: v.Argv, Shell: v.Shell, TimeoutMS: int(timeout.Milliseconds())})
	if err != nil {
		if isDeath(err, e.lease) {
			return verdict{err: err}
		}
		return verdict{err: &aci.Error{Code: aci.CodeScorerError, Message: "verifier did not run: " + err.Error()}}
	}
	out := verdict{freezeUS: res.FreezeUS}
	out.reward, out.err = parseVerdict(v, &res.ExecResult)
	return out
}

// freezeAllowance is the time the guest may spend stopping the agent's
// processes before the verifier's own timeout starts.
const freezeAllowance = 6 * time.Second

// parseVerdict applies the verdict contract to a verifier's run.
func parseVerdict(v *configs.Verifier, r *wire.ExecResult) (float64, error) {
	bad := func(format string, args ...any) (float64, error) {
		return 0, &aci.Error{Code: aci.CodeScorerError, Message: fmt.Sprintf(format, args...), Detail: verdictDetail(r)}
	}
	switch {
	case r.TimedOut:
		return bad("verifier timed out after %d ms", r.DurationMS)
	case r.ExitCode == nil:
		return bad("verifier killed by %s", r.Signal)
	case *r.ExitCode != 0:
		return bad("verifier exited %d", *r.ExitCode)
	case r.StdoutTruncated:
		return bad("verifier output over the cap")
	}
	fields := strings.Fields(string(r.Stdout))
	if len(fields) != 1 {
		return bad("verifier printed %d fields; want exactly one number", len(fields))
	}
	x, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return bad("verifier printed %q, not a finite number", snippet(fields[0]))
	}
	if lo, hi := v.RewardRange(); x < lo || x > hi {
		return bad("verifier printed %v, outside the reward range [%v, %v]", x, lo, hi)
	}
	return x, nil
}

// verdictDetail keeps what the operator needs to see of a bad verdict.
func verdictDetail(r *wire.ExecResult) map[string]any {
	d := map[string]any{
		"stdout": snippet(string(r.Stdout)), "stderr": snippet(string(r.Stderr)),
		"timed_out": r.TimedOut, "duration_ms": r.DurationMS,
	}
	if r.ExitCode != nil {
		d["exit_code"] = *r.ExitCode
	}
	if r.Signal != "" {
		d["signal"] = r.Signal
	}
	return d
}

// snippet bounds s to verdictSnippet bytes of valid UTF-8.
func snippet(s string) string {
	if len(s) > verdictSnippet {
		s = s[:verdictSnippet]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
