package envserver

import (
	"context"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/aci/dialect"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/guest/wire"
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

// stepOne runs one env's step: it finds and locks the env, answers a
// resent step from its stored reply, and otherwise runs the stages.
func (s *Server) stepOne(ctx context.Context, b *batch, st *api.StepEnv) slot {
	e, err := s.getEnv(st.EnvID)
	if err != nil {
		return failSlot(st.EnvID, err)
	}
	if err := s.checkRequestID(st.RequestID); err != nil {
		return failSlot(st.EnvID, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return failSlot(st.EnvID, aci.Errorf(aci.CodeNotFound, "env %q was closed", e.id))
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
	sl := s.runStep(ctx, b, st, e)
	if ep != nil && ep.step != before {
		// The step reached the trajectory: its reply is the env's last.
		s.remember(e, b, st.RequestID, sl)
	}
	return sl
}

// stepRun is one step as it passes through the stages.
type stepRun struct {
	st      *api.StepEnv
	acts    []aci.Action
	parsed  *dialect.Parsed // what the model's text became; nil for actions
	coords  aci.Coords      // the space of the step's points
	results aci.Results     // one per action
	// agentErr is the agent's own failure: the step still counts, with
	// this error, and nothing after it runs.
	agentErr error
	terminal aci.Verb   // done or fail, where the step reached one
	shot     *wire.Shot // the capture that came back with the last action
	ran      int        // actions run, a failed one included
	actUS    int64
	rec      trajectory.Step       // the trajectory's record of the step
	res      api.Result            // the reply
	data     []byte                // the reply's frame bytes
	reason   trajectory.ExitReason // how the episode ends here; "" while it goes on
}

// runStep runs one step on e (e.mu held), stage by stage (docs/architecture.md,
// "The step path"): parse, map, act, observe, end, record. A failure of the
// request ends the step before anything ran; one of the infrastructure
// midway keeps what ran in the trajectory; the agent's own failures are the
// step's and it goes on to observe, end and record.
func (s *Server) runStep(ctx context.Context, b *batch, st *api.StepEnv, e *env) slot {
	r, err := parseStep(st, e)
	if err != nil {
		return failSlot(st.EnvID, err)
	}
	r.mapPoints(e)
	if e.lease == nil || e.lease.Err() != nil {
		return s.goneBeforeStep(e, st.EnvID)
	}
	if err := s.act(ctx, e, b, r); err != nil {
		return s.broken(e, r, err)
	}
	if err := s.observeStep(ctx, e, b, r); err != nil {
		return s.broken(e, r, err)
	}
	s.end(ctx, e, r)
	return s.record(e, r)
}

// parseStep is the parse stage: the episode must be live; the request
// becomes actions (model text through its dialect), the space of their
// points and the start of the step's record. A malformed request is its
// error; an agent's mistake (text that does not read, an unknown verb) is
// the step's.
func parseStep(st *api.StepEnv, e *env) (*stepRun, error) {
	switch {
	case e.ep == nil:
		return nil, aci.Errorf(aci.CodeBadRequest, "env %q has no episode: reset it first", e.id)
	case e.ep.over:
		return nil, aci.Errorf(aci.CodeEpisodeOver, "episode %s is over (%s): reset the env", e.ep.traj.EpisodeID, e.ep.traj.ExitReason)
	}
	acts, parsed, agentErr, err := actionsOf(st)
	if err != nil {
		return nil, err
	}
	var textCoords *aci.Coords
	if parsed != nil {
		textCoords = &parsed.Coords
	}
	coords, err := stepCoords(st, e.coords, textCoords)
	if err != nil {
		return nil, err
	}
	r := &stepRun{st: st, acts: acts, parsed: parsed, coords: coords, results: aci.NewResults(len(acts)), agentErr: agentErr}
	if agentErr != nil {
		for i := range acts {
			if !acts[i].Verb.Known() {
				r.results.Fail(i, agentErr)
				break
			}
		}
	}
	r.rec = trajectory.Step{Index: e.ep.step, Actions: acts, Dialect: st.Dialect}
	if parsed != nil {
		r.rec.Dialect, r.rec.Answer = parsed.Dialect, parsed.Answer
	}
	if st.Text != nil {
		r.rec.Text = *st.Text
	}
	if tk := st.Tokens; tk != nil {
		r.rec.PromptIDs, r.rec.ResponseIDs = tk.PromptIDs, tk.ResponseIDs
		r.rec.ResponseLogprobs, r.rec.FinishReason = tk.ResponseLogprobs, tk.FinishReason
		r.rec.ResponseMask = make([]int, len(tk.ResponseIDs))
		for i := range r.rec.ResponseMask {
			r.rec.ResponseMask[i] = 1
		}
	}
	return r, nil
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

// stepCoords resolves the coordinate space of a step's actions and text:
// the step's own coords, else the env's default (set at reset), else the
// dialect's default for model text, else screen. A malformed coords value
// fails the request (bad_request): it is the trainer's setting, not the
// model's output.
func stepCoords(st *api.StepEnv, envDefault *aci.Coords, dialectDefault *aci.Coords) (aci.Coords, error) {
	if st.Coords != nil {
		c, err := aci.ParseCoords(st.Coords)
		if err != nil {
			return aci.Coords{}, aci.Errorf(aci.CodeBadRequest, "step coords: %s", aci.AsError(err).Message)
		}
		return c, nil
	}
	if envDefault != nil {
		return *envDefault, nil
	}
	if dialectDefault != nil {
		return *dialectDefault, nil
	}
	return aci.Coords{Space: aci.CoordsScreen}, nil
}

// agentFailed records the agent's failure at action i.
func (r *stepRun) agentFailed(i int, err error) {
	r.agentErr = err
	r.results.Fail(i, err)
}

// mapPoints is the map stage: element marks (Set-of-Mark labels) become
// their elements and every point goes from the step's space onto screen
// pixels, through the display of the frame the env last delivered. The
// first that cannot is the agent's invalid_action.
func (r *stepRun) mapPoints(e *env) {
	if r.agentErr != nil {
		return
	}
	if i, err := e.resolveMarks(r.acts); err != nil {
		r.agentFailed(i, err)
	} else if i, err := mapActions(r.acts, r.coords, e.display); err != nil {
		r.agentFailed(i, err)
	}
}

// mapActions rewrites every point of acts from space c onto screen pixels
// through d, the display descriptor of the frame the env last delivered. The
// first point that cannot be mapped (no descriptor, outside the space) is an
// invalid_action for that action; results then say which one.
func mapActions(acts []aci.Action, c aci.Coords, d *aci.Display) (failed int, err error) {
	for i := range acts {
		if err := c.MapAction(&acts[i], d); err != nil {
			return i, err
		}
	}
	return -1, nil
}

// act is the act stage: unless the agent already failed, the actions run
// on the guest in order (runActions).
func (s *Server) act(ctx context.Context, e *env, b *batch, r *stepRun) error {
	t0 := time.Now()
	defer func() { r.actUS = time.Since(t0).Microseconds() }()
	if r.agentErr == nil {
		if err := s.runActions(ctx, e, b, r); err != nil {
			// The infrastructure failed midway: the trajectory keeps what ran.
			r.rec.Ran = &r.ran
			return err
		}
	}
	if r.agentErr != nil {
		r.rec.Ran = &r.ran
	}
	return nil
}

// runActions checks the step's actions, then executes them in order. It
// notes the terminal verb (done or fail) if one was reached, the capture
// that came back with the last action and how many actions ran (a failed
// one included); a failed action is the agent's error (the step still
// counts) or the infrastructure's, which it returns. Nothing runs when the
// step is invalid as a whole: a duration out of range or past the step
// budget, done or fail before the end, or an app the task does not offer.
func (s *Server) runActions(ctx context.Context, e *env, b *batch, r *stepRun) error {
	acts := r.acts
	if _, err := aci.StepDuration(acts); err != nil {
		r.agentErr = err
		return nil
	}
	for i := range acts {
		a := &acts[i]
		if (a.Verb == aci.Done || a.Verb == aci.Fail) && i != len(acts)-1 {
			r.agentFailed(i, aci.Errorf(aci.CodeInvalidAction, "%s must be the last action of a step", a.Verb))
			return nil
		}
		if a.Verb == aci.LaunchApp {
			if err := appAllowed(e.task.Task, a.App); err != nil {
				r.agentFailed(i, err)
				return nil
			}
		}
	}
	g := e.lease.Guest()
	for i := range acts {
		a := acts[i]
		r.ran = i + 1
		if a.Verb == aci.Done || a.Verb == aci.Fail {
			r.results.OK(i, a.Verb, nil)
			r.terminal = a.Verb
			return nil
		}
		args := wire.ActArgs{Action: a}
		if i == len(acts)-1 && a.Verb != aci.Screenshot {
			oa := s.observeArgs(e, b)
			args.Observe = &oa
		}
		res, err := g.Act(ctx, args)
		if err != nil {
			if codeOf(err).ActionFault() == aci.FaultAgent {
				r.agentFailed(i, err)
				return nil
			}
			r.results.Fail(i, err)
			return err
		}
		clip := res.Clipboard
		r.results.OK(i, a.Verb, &aci.ActionResult{Text: &clip, PID: res.PID, WindowID: res.WindowID, Windows: res.Windows})
		r.shot = res.Obs
	}
	return nil
}

// observeStep is the observe stage: the screen the actions left (the
// capture that came back with the last action, else a new one) and the
// reply that carries it.
func (s *Server) observeStep(ctx context.Context, e *env, b *batch, r *stepRun) error {
	t0 := time.Now()
	obs, data, settle, err := s.observe(ctx, e, b, r.shot, actedBeforeObserve(r.acts, r.results))
	if err != nil && r.agentErr == nil && codeOf(err).ActionFault() == aci.FaultAgent {
		// The agent's own clients stalled the display (a server grab) and
		// the guest ended them (docs/architecture.md, "Reward integrity"):
		// the step records that and observes the desktop they left.
		r.agentErr = err
		obs, data, settle, err = s.observe(ctx, e, b, nil, false)
	}
	if err != nil {
		return err
	}
	ep := e.ep
	r.rec.ObsFrame, r.rec.ObsTree, r.rec.Error = obs.Frame, obs.Tree, aci.AsError(r.agentErr)
	r.data = data
	r.res = api.Result{EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Obs: obs, Reward: api.Score(0),
		Info: &api.Info{Step: ep.step + 1, Task: e.task.ID, Error: aci.AsError(r.agentErr), Settle: settle, Results: r.results,
			Coords: r.coords.Wire(), Timings: map[string]int64{"act_us": r.actUS, "observe_us": time.Since(t0).Microseconds()}}}
	for k, us := range e.lastTimings {
		// The guest's split of the capture (settle, capture, encode);
		// with an action's capture it falls inside act_us.
		r.res.Info.Timings[k] = us
	}
	if r.parsed != nil {
		// What the model's text became, as it ran (screen coordinates).
		r.res.Info.Actions, r.res.Info.Dialect, r.res.Info.Answer = r.acts, r.parsed.Dialect, r.parsed.Answer
	}
	return nil
}

// actedBeforeObserve reports whether the step's own capture must settle as
// after an action although no action carried it: some input ran, and then
// the step ended on screenshot, done or fail (which capture separately) or
// on a refused action.
func actedBeforeObserve(acts []aci.Action, results []aci.ActionResult) bool {
	for i, a := range acts {
		switch a.Verb {
		case aci.Screenshot, aci.Done, aci.Fail:
		default:
			if i < len(results) && results[i].Status == aci.StatusOK {
				return true
			}
		}
	}
	return false
}

// end is the end stage: whether the episode ends with this step
// (terminated by done, fail or the agent's error where the task ends on
// one; truncated at its step budget), why (the exit reasons' precedence,
// trajectory.Resolve), and its verdict. An episode that ends on its own
// terms is scored by its verifier; the reward is null wherever there is no
// score (the verifier gave none, the sandbox died), never a made-up 0.
func (s *Server) end(ctx context.Context, e *env, r *stepRun) {
	res, ep := &r.res, e.ep
	agentEnds := r.agentErr != nil && e.task.EndOnAgentError
	var reason trajectory.ExitReason
	switch {
	case agentEnds:
		// The task ends at the agent's first error: reward 0, nothing to score.
		res.Terminated = true
		reason = trajectory.AgentError
	case r.terminal != "":
		res.Terminated = true
	case ep.step+1 >= ep.maxSteps:
		res.Truncated = true
		reason = trajectory.MaxSteps
	}
	if r.agentErr != nil && (res.Terminated || res.Truncated) {
		reason = trajectory.Resolve(reason, trajectory.AgentError)
	}
	if (res.Terminated || res.Truncated) && !agentEnds {
		t0 := time.Now()
		v := s.verify(ctx, e, r.terminal)
		res.Info.Timings["verify_us"] = time.Since(t0).Microseconds()
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
		r.rec.Reward, _ = res.Scored()
		r.rec.Error = res.Info.Error
		if v.failed != nil {
			r.rec.Error = v.failed // what the verifier said of the agent's state
		}
	}
	if reason != "" {
		res.Info.ExitReason = string(reason)
	}
	r.reason = reason
}

// record is the record stage: the step joins the trajectory and, where it
// ended the episode, the episode is finished and saved.
func (s *Server) record(e *env, r *stepRun) slot {
	s.recordStep(e, r.rec)
	if r.reason != "" {
		s.finishEpisode(e, r.reason)
	}
	return slot{res: r.res, data: r.data}
}

// broken ends a step that the infrastructure failed midway: the trajectory
// keeps what ran, with the error; a sandbox that died ends the episode
// (deathSlot), any other failure fails the step.
func (s *Server) broken(e *env, r *stepRun, err error) slot {
	ep := e.ep
	r.rec.Error = wireError(err)
	s.recordStep(e, r.rec)
	if isDeath(err, e.lease) {
		return s.deathSlot(e, ep, err)
	}
	return failSlot(r.st.EnvID, err)
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
