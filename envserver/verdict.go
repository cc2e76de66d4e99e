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
	"github.com/shinken-rl/shinken/pool"
)

const (
	defaultVerifierTimeout = 10 * time.Second
	// verdictSnippet bounds how much of a bad verdict's output is kept in
	// the trajectory for the operator.
	verdictSnippet = 512
)

// verdict is one verifier run: the reward, or why there is none.
type verdict struct {
	reward float64
	err    error // scorer_error (or the sandbox's death); reward is 0
	// failed, with err nil, is a verifier that gave no verdict on the state
	// the agent left although it gives one on the task's clean state: the
	// agent's outcome, scored at reward (the range's minimum).
	failed   *aci.Error
	freezeUS int64 // how long stopping the agent's processes took
}

// verify scores e's episode: guestd stops the agent's processes and runs the
// task's verifier out of their reach; the output must be exactly one number
// in the task's reward range. The verifier gets its own deadline, not what
// the agent's step left.
//
// A verifier that gives no verdict is blamed mechanically
// (docs/architecture.md, "Reward integrity"): where it gives one on the
// task's clean state (a replica of its golden, tried once per task), the
// state the agent left is what broke it, and the episode scores the reward
// range's minimum; where it fails there too, the task is broken:
// scorer_error.
//
// The verifier's environment carries the instance's expectations
// (SK_EXPECT_<KEY>) and how the agent ended the episode (SK_ENDED: done,
// fail, or empty when the step budget ran out): neither is in the sandbox
// before the agent is frozen.
func (s *Server) verify(ctx context.Context, e *env, ended aci.Verb) verdict {
	env := append(e.task.ExpectEnv(), "SK_ENDED="+string(ended))
	beforeScore(ctx, e.lease, e.task.Task, s.cfg.Logf)
	out := runVerifier(ctx, e.lease, &e.task.Verifier, env)
	if out.err == nil || isDeath(out.err, e.lease) || codeOf(out.err) != aci.CodeScorerError {
		return out
	}
	if err := s.verifierProven(ctx, e.task.Task, env); err != nil {
		s.cfg.Logf("envserver: task %s: %v; the verdict stays scorer_error", e.task.ID, err)
		return out
	}
	lo, _ := e.task.Verifier.RewardRange()
	ae := aci.AsError(out.err)
	return verdict{reward: lo, freezeUS: out.freezeUS, failed: &aci.Error{Code: aci.CodeAgentError,
		Message: "the verifier gave no verdict on the state the agent left (it gives one on the task's clean state): " + ae.Message,
		Detail:  ae.Detail}}
}

// runVerifier runs v in l's sandbox under v's own deadline, env added to
// its environment.
func runVerifier(ctx context.Context, l *pool.Lease, v *configs.Verifier, env []string) verdict {
	timeout := time.Duration(v.TimeoutMS) * time.Millisecond
	if timeout <= 0 {
		timeout = defaultVerifierTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout+freezeAllowance)
	defer cancel()
	res, err := l.Guest().Score(ctx, wire.ScoreArgs{Argv: v.Argv, Shell: v.Shell, Env: env, TimeoutMS: int(timeout.Milliseconds())})
	if err != nil {
		if isDeath(err, l) {
			return verdict{err: err}
		}
		return verdict{err: &aci.Error{Code: aci.CodeScorerError, Message: "verifier did not run: " + err.Error()}}
	}
	out := verdict{freezeUS: res.FreezeUS}
	out.reward, out.err = parseVerdict(v, &res.ExecResult)
	return out
}

// proof is whether a task's verifier gives a verdict on the task's clean
// state, found once per task and server.
type proof struct {
	done chan struct{}
	err  error // nil: it does
}

// verifierProven reports (nil) whether task's verifier gives a valid
// verdict on a clean replica of the task's golden, with the environment
// (expectations, ending) of the episode that asks first. The first caller leases
// the replica and runs the verifier; later ones wait for its answer. An
// answer that says nothing of the verifier (no sandbox came) is not kept.
func (s *Server) verifierProven(ctx context.Context, task *configs.Task, env []string) error {
	s.proofMu.Lock()
	p := s.proofs[task.ID]
	first := p == nil
	if first {
		p = &proof{done: make(chan struct{})}
		s.proofs[task.ID] = p
	}
	s.proofMu.Unlock()
	if !first {
		select {
		case <-p.done:
			return p.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	keep := true
	defer func() {
		if !keep {
			s.proofMu.Lock()
			delete(s.proofs, task.ID)
			s.proofMu.Unlock()
		}
		close(p.done)
	}()
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ResetTimeout)
	defer cancel()
	l, err := s.pool.LeaseGolden(lctx, task.ID, func(ctx context.Context, l *pool.Lease) error {
		return runSetup(ctx, l, task)
	})
	if err != nil {
		keep = false
		p.err = fmt.Errorf("no clean replica to try the verifier on: %w", err)
		return p.err
	}
	defer l.Release(context.WithoutCancel(ctx))
	v := runVerifier(lctx, l, &task.Verifier, env)
	switch {
	case v.err != nil && isDeath(v.err, l):
		keep = false
		p.err = fmt.Errorf("the clean replica died: %w", v.err)
	case v.err != nil:
		p.err = fmt.Errorf("the verifier gives no verdict on the task's clean state either (a task bug): %w", v.err)
	}
	return p.err
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
