package envserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/aci/dialect"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

func (s *Server) step(ctx context.Context, req *api.StepRequest) (*api.BatchReply, error) {
	if err := s.checkBatch(len(req.Steps)); err != nil {
		return nil, err
	}
	b, err := s.newBatch(req.Observe, req.Have)
	if err != nil {
		return nil, err
	}
	if err := distinctEnvs(len(req.Steps), func(i int) string { return req.Steps[i].EnvID }); err != nil {
		return nil, err
	}
	slots := make([]slot, len(req.Steps))
	s.fanOut(ctx, len(req.Steps), s.stepGroups(req), func(ctx context.Context, i int) {
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(ctx, s.cfg.StepTimeout)
		defer cancel()
		slots[i] = s.stepOne(ctx, b, &req.Steps[i])
		s.m.stepSecs.Observe(time.Since(t0).Seconds())
		oc := outcomeOf(slots[i].res.Error)
		if oc == "ok" && slots[i].res.Info != nil && slots[i].res.Info.Error != nil {
			oc = string(slots[i].res.Info.Error.Code)
		}
		s.m.steps.WithLabelValues(oc).Inc()
	})
	s.syncEpisodes(func(i int) string { return req.Steps[i].EnvID }, slots)
	return s.reply(b, slots), nil
}

// stepGroups keys each step by its env's current frame and its actions: envs
// that show the same screen and do the same thing (replicas in lockstep)
// most likely end on the same screen.
func (s *Server) stepGroups(req *api.StepRequest) []string {
	groups := make([]string, len(req.Steps))
	for i := range req.Steps {
		st := &req.Steps[i]
		s.mu.Lock()
		e := s.envs[st.EnvID]
		s.mu.Unlock()
		if e == nil {
			continue
		}
		e.mu.Lock()
		frame := e.lastFrame
		e.mu.Unlock()
		acts, err := msgpack.Marshal([]any{st.Action, st.Actions, st.Text, st.Dialect})
		if frame == "" || err != nil {
			continue
		}
		groups[i] = frame + string(acts)
	}
	return groups
}

// actionsOf resolves a step's one-of action/actions/text into actions. A
// malformed request is a bad_request; unparsable model text is an agent error
// (dialect_error) that the step records.
func actionsOf(st *api.StepEnv) (acts []aci.Action, agentErr, reqErr error) {
	n := 0
	if st.Action != nil {
		n++
		acts = []aci.Action{*st.Action}
	}
	if st.Actions != nil {
		n++
		acts = st.Actions
	}
	if st.Text != nil {
		n++
		d := st.Dialect
		if d == "" {
			d = "auto"
		}
		parsed, err := dialect.Parse(d, *st.Text)
		if err != nil {
			if aci.CodeOf(err) == aci.CodeDialectError {
				return nil, err, nil
			}
			return nil, nil, err
		}
		acts = parsed
	}
	if n != 1 {
		return nil, nil, aci.Errorf(aci.CodeBadRequest, "a step needs exactly one of action, actions or text")
	}
	if len(acts) == 0 {
		return nil, aci.Errorf(aci.CodeInvalidAction, "no actions"), nil
	}
	for i := range acts {
		if !acts[i].Verb.Known() {
			return nil, aci.Errorf(aci.CodeUnknownVerb, "unknown verb %q (known: %s)", acts[i].Verb, verbList()), nil
		}
	}
	return acts, nil, nil
}

func verbList() string {
	vs := make([]string, len(aci.AgentVerbs))
	for i, v := range aci.AgentVerbs {
		vs[i] = string(v)
	}
	return strings.Join(vs, " ")
}

func (s *Server) stepOne(ctx context.Context, b *batch, st *api.StepEnv) slot {
	fail := func(err error) slot { return slot{res: api.Result{EnvID: st.EnvID, Error: wireError(err)}} }
	e, err := s.getEnv(st.EnvID)
	if err != nil {
		return fail(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return fail(aci.Errorf(aci.CodeNotFound, "env %q was closed", e.id))
	case e.ep == nil:
		return fail(aci.Errorf(aci.CodeBadRequest, "env %q has no episode: reset it first", e.id))
	case e.ep.over:
		return fail(aci.Errorf(aci.CodeEpisodeOver, "episode %s is over (%s): reset the env", e.ep.traj.EpisodeID, e.ep.traj.ExitReason))
	}
	acts, agentErr, reqErr := actionsOf(st)
	if reqErr != nil {
		return fail(reqErr)
	}
	if e.lease == nil || e.lease.Err() != nil {
		s.died(e, e.leaseErr())
		return fail(fmt.Errorf("env %s: %w", e.id, pool.ErrSandboxDied))
	}
	ep := e.ep
	t0 := time.Now()
	var (
		terminal aci.Verb
		actShot  *wire.Shot
	)
	if agentErr == nil {
		terminal, actShot, agentErr, err = s.runActions(ctx, e, b, acts)
		if err != nil {
			if isDeath(err, e.lease) {
				s.died(e, err)
				return s.diedSlot(e, ep, err)
			}
			return fail(err)
		}
	}
	tAct := time.Since(t0)
	t1 := time.Now()
	obs, data, err := s.observe(ctx, e, b, actShot)
	if err != nil {
		if isDeath(err, e.lease) {
			s.died(e, err)
			return s.diedSlot(e, ep, err)
		}
		return fail(err)
	}
	tObs := time.Since(t1)
	ep.step++
	rec := trajectory.Step{
		Index: ep.step - 1, Actions: acts, Dialect: st.Dialect, ObsFrame: obs.Frame,
		Error: aci.AsError(agentErr), TMS: time.Since(ep.start).Milliseconds(),
	}
	if st.Text != nil {
		rec.Text = *st.Text
	}
	if tk := st.Tokens; tk != nil {
		rec.PromptIDs, rec.ResponseIDs = tk.PromptIDs, tk.ResponseIDs
		rec.ResponseLogprobs, rec.FinishReason = tk.ResponseLogprobs, tk.FinishReason
		rec.ResponseMask = make([]int, len(tk.ResponseIDs))
		for i := range rec.ResponseMask {
			rec.ResponseMask[i] = 1
		}
	}
	res := api.Result{EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Obs: obs,
		Info: &api.Info{Step: ep.step, Task: e.task.ID, Error: aci.AsError(agentErr),
			Timings: map[string]int64{"act_us": tAct.Microseconds(), "observe_us": tObs.Microseconds()}}}
	var reason trajectory.ExitReason
	switch {
	case terminal != "":
		res.Terminated = true
	case ep.step >= e.task.MaxSteps:
		res.Truncated = true
		reason = trajectory.MaxSteps
	}
	if agentErr != nil && (res.Terminated || res.Truncated) {
		reason = trajectory.Resolve(reason, trajectory.AgentError)
	}
	if res.Terminated || res.Truncated {
		t2 := time.Now()
		reward, verr := s.verify(ctx, e)
		res.Info.Timings["verify_us"] = time.Since(t2).Microseconds()
		switch {
		case verr != nil && isDeath(verr, e.lease):
			reason = trajectory.Resolve(reason, trajectory.SandboxDied)
			res.Info.Error = wireError(verr)
		case verr != nil:
			reason = trajectory.Resolve(reason, trajectory.ScorerError)
			res.Info.Error = &aci.Error{Code: codeOf(verr), Message: "scorer_error: " + verr.Error()}
		default:
			res.Reward = reward
			reason = trajectory.Resolve(reason, trajectory.TaskComplete)
		}
		rec.Reward = res.Reward
		res.Info.ExitReason = string(reason)
	}
	ep.mu.Lock()
	ep.traj.Steps = append(ep.traj.Steps, rec)
	ep.traj.Reward += rec.Reward
	ep.mu.Unlock()
	s.journalStep(ep, &rec)
	if reason != "" {
		s.finishEpisode(e, reason)
	}
	return slot{res: res, data: data}
}

func (e *env) leaseErr() error {
	if e.lease == nil {
		return pool.ErrSandboxDied
	}
	return e.lease.Err()
}

// diedSlot is the result of a step whose sandbox died mid-way.
func (s *Server) diedSlot(e *env, ep *episode, err error) slot {
	return slot{res: api.Result{
		EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Truncated: true,
		Info:  &api.Info{Step: ep.step, Task: ep.traj.Task, ExitReason: string(trajectory.SandboxDied)},
		Error: &aci.Error{Code: aci.CodeSandboxDied, Message: err.Error()},
	}}
}

// runActions executes acts in order and returns the terminal verb (done or
// fail) if one was reached, the observation that came back with the last
// action, an agent error (the action was refused: the step still counts) or
// an infrastructure error.
func (s *Server) runActions(ctx context.Context, e *env, b *batch, acts []aci.Action) (terminal aci.Verb, shot *wire.Shot, agentErr, err error) {
	g := e.lease.Guest()
	for i := range acts {
		a := acts[i]
		if a.Verb == aci.Done || a.Verb == aci.Fail {
			if i != len(acts)-1 {
				return "", nil, aci.Errorf(aci.CodeInvalidAction, "%s must be the last action of a step", a.Verb), nil
			}
			return a.Verb, shot, nil, nil
		}
		args := wire.ActArgs{Action: a}
		last := i == len(acts)-1
		if last && a.Verb != aci.Screenshot {
			oa := s.observeArgs(e, b)
			args.Observe = &oa
		}
		res, err := g.Act(ctx, args)
		if err != nil {
			switch codeOf(err) {
			case aci.CodeInvalidAction, aci.CodeUnknownVerb, aci.CodeUnsupported, aci.CodeTooLarge, aci.CodeBadRequest:
				return "", nil, err, nil
			}
			return "", nil, nil, err
		}
		shot = res.Obs
	}
	return "", shot, nil, nil
}

// verify runs the task's verifier inside the sandbox; its last stdout line is
// the reward. A crash, timeout or unparsable output is an error (scorer_error).
func (s *Server) verify(ctx context.Context, e *env) (float64, error) {
	v := e.task.Verifier
	timeout := v.TimeoutMS
	if timeout <= 0 {
		timeout = 30000
	}
	res, err := e.lease.Guest().Exec(ctx, wire.ExecArgs{Argv: v.Argv, Shell: v.Shell, TimeoutMS: timeout})
	if err != nil {
		return 0, err
	}
	if res.TimedOut {
		return 0, fmt.Errorf("verifier timed out after %d ms", timeout)
	}
	if res.ExitCode == nil || *res.ExitCode != 0 {
		return 0, fmt.Errorf("verifier failed (exit %v, signal %q): %s", exitStr(res.ExitCode), res.Signal, tail(res.Stderr))
	}
	lines := strings.Fields(strings.TrimSpace(string(res.Stdout)))
	if len(lines) == 0 {
		return 0, errors.New("verifier printed no reward")
	}
	r, err := strconv.ParseFloat(lines[len(lines)-1], 64)
	if err != nil || math.IsNaN(r) || math.IsInf(r, 0) {
		return 0, fmt.Errorf("verifier printed %q, not a reward", lines[len(lines)-1])
	}
	return r, nil
}

func exitStr(c *int) string {
	if c == nil {
		return "none"
	}
	return strconv.Itoa(*c)
}

func tail(b []byte) string {
	const n = 512
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
