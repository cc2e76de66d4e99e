package envserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/aci/dialect"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

func (s *Server) step(ctx context.Context, req *api.StepRequest) (*batchReply, error) {
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
		if slots[i].replayed {
			oc = "replayed"
		}
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

// actionsOf resolves a step's one-of action/actions/text into actions and,
// for text, what the dialect read (its name, default coordinate space and
// any answer). A malformed request is a bad_request; unparsable model text is
// an agent error (dialect_error) that the step records.
func actionsOf(st *api.StepEnv) (acts []aci.Action, parsed *dialect.Parsed, agentErr, reqErr error) {
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
			d = dialect.Auto
		}
		p, err := dialect.Parse(d, *st.Text)
		if err != nil {
			// The model's text is the agent's: a form that does not read
			// (dialect_error) or one that asks for what a desktop cannot
			// do (unsupported: a phone button, a shell tool, a target
			// that needs grounding) counts as its step. Only the request's
			// own mistakes (an unknown dialect name) are the caller's.
			if c := aci.CodeOf(err); c == aci.CodeBadRequest || c == aci.CodePayloadTooLarge {
				return nil, nil, nil, err
			}
			return nil, nil, err, nil
		}
		acts, parsed = p.Actions, &p
	}
	if n != 1 {
		return nil, nil, nil, aci.Errorf(aci.CodeBadRequest, "a step needs exactly one of action, actions or text")
	}
	if len(acts) == 0 {
		return nil, nil, aci.Errorf(aci.CodeInvalidAction, "no actions"), nil
	}
	for i := range acts {
		if !acts[i].Verb.Known() {
			return acts, parsed, aci.Errorf(aci.CodeUnknownVerb, "unknown verb %q (known: %s)", acts[i].Verb, verbList()), nil
		}
	}
	return acts, parsed, nil, nil
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
	if err := s.checkRequestID(st.RequestID); err != nil {
		return fail(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fail(aci.Errorf(aci.CodeNotFound, "env %q was closed", e.id))
	}
	// A resent step (same request_id as the env's last) waited on e.mu for
	// the first to finish; it gets that reply, nothing runs twice.
	if sl, ok := s.replayed(e, b, st.RequestID); ok {
		return sl
	}
	ep, before := e.ep, -1
	if ep != nil {
		before = ep.step
	}
	sl := s.stepLocked(ctx, b, st, e, fail)
	if ep != nil && ep.step != before {
		// The step reached the trajectory: its reply is the env's last.
		s.remember(e, b, st.RequestID, sl)
	}
	return sl
}

// stepLocked runs one step on e (e.mu held).
func (s *Server) stepLocked(ctx context.Context, b *batch, st *api.StepEnv, e *env, fail func(error) slot) slot {
	switch {
	case e.ep == nil:
		return fail(aci.Errorf(aci.CodeBadRequest, "env %q has no episode: reset it first", e.id))
	case e.ep.over:
		return fail(aci.Errorf(aci.CodeEpisodeOver, "episode %s is over (%s): reset the env", e.ep.traj.EpisodeID, e.ep.traj.ExitReason))
	}
	acts, parsed, agentErr, reqErr := actionsOf(st)
	if reqErr != nil {
		return fail(reqErr)
	}
	var textCoords *aci.Coords
	if parsed != nil {
		textCoords = &parsed.Coords
	}
	coords, err := stepCoords(st, e.coords, textCoords)
	if err != nil {
		return fail(err)
	}
	results := newResults(len(acts))
	if agentErr == nil {
		if i, err := e.resolveMarks(acts); err != nil {
			agentErr = err
			failResult(results, i, err)
		} else if i, err := mapActions(acts, coords, e.display); err != nil {
			agentErr = err
			failResult(results, i, err)
		}
	} else {
		for i := range acts {
			if !acts[i].Verb.Known() {
				failResult(results, i, agentErr)
				break
			}
		}
	}
	if e.lease == nil || e.lease.Err() != nil {
		cause, ep := e.leaseErr(), e.ep
		if reason, _, _ := deathReason(e.lease); reason == trajectory.AgentError && ep != nil {
			return s.deathSlot(e, ep, cause)
		}
		s.died(e, cause, trajectory.SandboxDied)
		return fail(fmt.Errorf("env %s: %w", e.id, cause))
	}
	ep := e.ep
	t0 := time.Now()
	rec := trajectory.Step{Index: ep.step, Actions: acts, Dialect: st.Dialect}
	if parsed != nil {
		rec.Dialect, rec.Answer = parsed.Dialect, parsed.Answer
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
	var (
		terminal aci.Verb
		actShot  *wire.Shot
		ran      int
	)
	if agentErr == nil {
		terminal, actShot, ran, agentErr, err = s.runActions(ctx, e, b, acts, results)
		if err != nil {
			// The infrastructure failed midway: the trajectory keeps what ran.
			rec.Ran, rec.Error = &ran, wireError(err)
			s.recordStep(e, rec)
			if isDeath(err, e.lease) {
				return s.deathSlot(e, ep, err)
			}
			return fail(err)
		}
	}
	if agentErr != nil {
		rec.Ran = &ran
	}
	tAct := time.Since(t0)
	t1 := time.Now()
	obs, data, settle, err := s.observe(ctx, e, b, actShot, actedBeforeObserve(acts, results))
	if err != nil && agentErr == nil && codeOf(err).ActionFault() == aci.FaultAgent {
		// The agent's own clients stalled the display (a server grab) and
		// the guest ended them (docs/architecture.md, "Reward integrity"):
		// the step records that and observes the desktop they left.
		agentErr = err
		obs, data, settle, err = s.observe(ctx, e, b, nil, false)
	}
	if err != nil {
		rec.Error = wireError(err)
		s.recordStep(e, rec)
		if isDeath(err, e.lease) {
			return s.deathSlot(e, ep, err)
		}
		return fail(err)
	}
	tObs := time.Since(t1)
	rec.ObsFrame, rec.ObsTree, rec.Error = obs.Frame, obs.Tree, aci.AsError(agentErr)
	res := api.Result{EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Obs: obs, Reward: api.Score(0),
		Info: &api.Info{Step: ep.step + 1, Task: e.task.ID, Error: aci.AsError(agentErr), Settle: settle, Results: results,
			Coords: coords.Wire(), Timings: map[string]int64{"act_us": tAct.Microseconds(), "observe_us": tObs.Microseconds()}}}
	for k, us := range e.lastTimings {
		// The guest's split of the capture (settle, capture, encode);
		// with an action's capture it falls inside act_us.
		res.Info.Timings[k] = us
	}
	if parsed != nil {
		// What the model's text became, as it ran (screen coordinates).
		res.Info.Actions, res.Info.Dialect, res.Info.Answer = acts, parsed.Dialect, parsed.Answer
	}
	var reason trajectory.ExitReason
	switch {
	case agentErr != nil && e.task.EndOnAgentError:
		// The task ends at the agent's first error: reward 0, nothing to score.
		res.Terminated = true
		reason = trajectory.AgentError
	case terminal != "":
		res.Terminated = true
	case ep.step+1 >= ep.maxSteps:
		res.Truncated = true
		reason = trajectory.MaxSteps
	}
	if agentErr != nil && (res.Terminated || res.Truncated) {
		reason = trajectory.Resolve(reason, trajectory.AgentError)
	}
	if (res.Terminated || res.Truncated) && !(agentErr != nil && e.task.EndOnAgentError) {
		t2 := time.Now()
		v := s.verify(ctx, e, terminal)
		res.Info.Timings["verify_us"] = time.Since(t2).Microseconds()
		res.Info.Timings["freeze_us"] = v.freezeUS
		switch {
		case v.err != nil && isDeath(v.err, e.lease):
			reason = trajectory.Resolve(reason, trajectory.SandboxDied)
			res.Info.Error = wireError(v.err)
			res.Reward = nil // not a score
		case v.err != nil:
			res.Info.Error = aci.AsError(v.err) // scorer_error, with the output kept
			reason = trajectory.Resolve(reason, trajectory.ReasonFor(res.Info.Error.Code))
			res.Reward = nil // not a score
		default:
			res.Reward = api.Score(v.reward)
			reason = trajectory.Resolve(reason, trajectory.TaskComplete)
		}
		if v.err == nil {
			res.Info.Verdict = &api.Verdict{Reward: v.reward, Error: v.failed}
		}
		rec.Reward, _ = res.Scored()
		rec.Error = res.Info.Error
		if v.failed != nil {
			rec.Error = v.failed // what the verifier said of the agent's state
		}
	}
	if reason != "" {
		res.Info.ExitReason = string(reason)
	}
	s.recordStep(e, rec)
	if reason != "" {
		s.finishEpisode(e, reason)
	}
	return slot{res: res, data: data}
}

// recordStep appends rec to e's episode and counts it (e.mu held).
func (s *Server) recordStep(e *env, rec trajectory.Step) {
	ep := e.ep
	rec.Index = ep.step
	rec.TMS = time.Since(ep.start).Milliseconds()
	ep.step++
	ep.mu.Lock()
	ep.traj.Steps = append(ep.traj.Steps, rec)
	ep.traj.Reward += rec.Reward
	ep.mu.Unlock()
	s.journalStep(ep, &rec)
}

func (e *env) leaseErr() error {
	if e.lease == nil {
		return pool.ErrSandboxDied
	}
	return e.lease.Err()
}

// deathSlot ends e's episode on its sandbox's death and is the step's
// result (see deathReason).
func (s *Server) deathSlot(e *env, ep *episode, err error) slot {
	reason, code, detail := deathReason(e.lease)
	s.died(e, err, reason)
	return slot{res: api.Result{
		EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Truncated: true,
		Info:  &api.Info{Step: ep.step, Task: ep.traj.Task, ExitReason: string(reason)},
		Error: &aci.Error{Code: code, Message: err.Error(), Detail: detail},
	}}
}

// deathReason is how an episode whose sandbox died ends. A sandbox its
// provider ended at one of its limits (memory) died of what the agent ran
// in it: that is the agent's fault, agent_error with detail.reason, never
// retried (a retry would reroll the policy that exhausted it). Any other
// death is the infrastructure's, sandbox_died (docs/api.md, errors).
func deathReason(l *pool.Lease) (trajectory.ExitReason, aci.Code, any) {
	if d := limitDetail(l); d != nil {
		return trajectory.AgentError, aci.CodeAgentError, d
	}
	return trajectory.SandboxDied, aci.CodeSandboxDied, nil
}

// limitDetail is the detail of a sandbox_died whose sandbox reached one of
// its limits, {"reason": "oom"|"pids"}, or nil (docs/api.md, errors).
func limitDetail(l *pool.Lease) any {
	if l == nil {
		return nil
	}
	var d any
	if err := l.Err(); err != nil {
		var e *aci.Error
		if errors.As(err, &e) && e.Detail != nil {
			return e.Detail
		}
	}
	if sb := l.Sandbox(); sb != nil && sb.LimitHit != nil {
		if r := sb.LimitHit(); r != "" {
			d = map[string]any{"reason": r}
		}
	}
	return d
}

// runActions checks acts, then executes them in order. It returns the
// terminal verb (done or fail) if one was reached, the observation that came
// back with the last action, how many actions ran (a failed one included),
// and either an agent error (the action was the agent's fault: the step
// still counts) or an infrastructure error. Nothing runs when the step is
// invalid as a whole: a duration out of range or past the step budget, done
// or fail before the end, or an app the task does not offer. results (one
// per action) records what each did.
func (s *Server) runActions(ctx context.Context, e *env, b *batch, acts []aci.Action, results []aci.ActionResult) (terminal aci.Verb, shot *wire.Shot, ran int, agentErr, err error) {
	if _, err := aci.StepDuration(acts); err != nil {
		return "", nil, 0, err, nil
	}
	for i := range acts {
		a := &acts[i]
		if (a.Verb == aci.Done || a.Verb == aci.Fail) && i != len(acts)-1 {
			err := aci.Errorf(aci.CodeInvalidAction, "%s must be the last action of a step", a.Verb)
			failResult(results, i, err)
			return "", nil, 0, err, nil
		}
		if a.Verb == aci.LaunchApp {
			if err := appAllowed(e.task.Task, a.App); err != nil {
				failResult(results, i, err)
				return "", nil, 0, err, nil
			}
		}
	}
	g := e.lease.Guest()
	for i := range acts {
		a := acts[i]
		if a.Verb == aci.Done || a.Verb == aci.Fail {
			results[i] = okResult(a.Verb, nil)
			return a.Verb, shot, i + 1, nil, nil
		}
		args := wire.ActArgs{Action: a}
		last := i == len(acts)-1
		if last && a.Verb != aci.Screenshot {
			oa := s.observeArgs(e, b)
			args.Observe = &oa
		}
		res, err := g.Act(ctx, args)
		if err != nil {
			failResult(results, i, err)
			if codeOf(err).ActionFault() == aci.FaultAgent {
				return "", nil, i + 1, err, nil
			}
			return "", nil, i + 1, nil, err
		}
		results[i] = okResult(a.Verb, res)
		shot = res.Obs
	}
	return "", shot, len(acts), nil, nil
}

// appAllowed enforces Task.Apps for launch_app: a task that gives the agent
// a shell anyway (AllowShell) allows any program; otherwise only its apps,
// by exact name.
func appAllowed(t *configs.Task, app string) error {
	if t.AllowShell {
		return nil
	}
	for _, a := range t.Apps {
		if a == app {
			return nil
		}
	}
	return aci.Errorf(aci.CodeInvalidAction, "launch_app: %q is not one of this task's apps (%s)", app, strings.Join(t.Apps, ", "))
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
