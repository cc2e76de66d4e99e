package envserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// env is one leased sandbox and the episode running on it. Calls on one env
// are serialized by mu; different envs run concurrently.
type env struct {
	id       string
	lastUsed atomic.Int64 // unix nanos

	mu        sync.Mutex
	closed    bool
	lease     *pool.Lease // nil after the sandbox died or was released
	task      *configs.Task
	ep        *episode
	lastFrame string
}

// episode is one run of a task on an env; traj is guarded by mu so that
// GET /v1/episodes can read a live episode while it steps.
type episode struct {
	mu    sync.Mutex
	traj  trajectory.Trajectory
	start time.Time
	step  int
	over  bool
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// observeFor resolves the request's observation settings and validates them.
func (s *Server) observeFor(o *api.Observe) (api.Observe, error) {
	obs := s.cfg.DefaultObserve
	if o != nil {
		obs = *o
		if obs.Format == "" {
			obs.Format = s.cfg.DefaultObserve.Format
		}
	}
	switch obs.Format {
	case aci.FormatPNG, aci.FormatRaw:
		obs.Quality = 0
	case aci.FormatJPEG:
		if obs.Quality == 0 {
			obs.Quality = 80
		}
		if obs.Quality < 1 || obs.Quality > 100 {
			return obs, aci.Errorf(aci.CodeBadRequest, "observe.quality %d: must be 1..100", obs.Quality)
		}
	default:
		return obs, aci.Errorf(aci.CodeBadRequest, "observe.format %q: want png, jpeg or raw", obs.Format)
	}
	if obs.MaxLongEdge < 0 || obs.SettleMS < 0 {
		return obs, aci.Errorf(aci.CodeBadRequest, "observe: negative max_long_edge or settle_ms")
	}
	return obs, nil
}

// batch is the shared state of one reset/step/fork request: its observation
// settings and the frames its reply will carry.
type batch struct {
	obs  api.Observe
	have map[string]bool
}

func (s *Server) newBatch(o *api.Observe, have []string) (*batch, error) {
	obs, err := s.observeFor(o)
	if err != nil {
		return nil, err
	}
	b := &batch{obs: obs, have: make(map[string]bool, len(have))}
	for _, h := range have {
		b.have[h] = true
	}
	return b, nil
}

// slot is one env's outcome within a batch: its result and, unless the
// client already has it, the encoded frame its observation shows.
type slot struct {
	res  api.Result
	data []byte
}

// reply assembles a batch reply: every frame once, none the client has.
func (s *Server) reply(b *batch, slots []slot) *api.BatchReply {
	r := &api.BatchReply{Results: make([]api.Result, len(slots)), Frames: map[string][]byte{}}
	for i, sl := range slots {
		r.Results[i] = sl.res
		if sl.res.Obs == nil {
			continue
		}
		h := sl.res.Obs.Frame
		if b.have[h] {
			s.m.framesSent.WithLabelValues("skipped_have").Inc()
			continue
		}
		if _, dup := r.Frames[h]; dup || sl.data == nil {
			continue
		}
		r.Frames[h] = sl.data
		s.m.framesSent.WithLabelValues("sent").Inc()
	}
	return r
}

// fanOut runs fn for each of n slots concurrently, bounded by the server's
// concurrency limit. fn reports failures inside its slot.
//
// groups (nil, or one key per slot) marks slots expected to show the same
// screen, such as replicas forked from one checkpoint: the first slot of each
// group runs alone first, so the others find its frame in the shared cache
// and N replicas cost one encode.
func (s *Server) fanOut(ctx context.Context, n int, groups []string, fn func(ctx context.Context, i int)) {
	var first, rest []int
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		if groups == nil || groups[i] == "" || !seen[groups[i]] {
			if groups != nil {
				seen[groups[i]] = true
			}
			first = append(first, i)
		} else {
			rest = append(rest, i)
		}
	}
	s.runWave(ctx, first, fn)
	s.runWave(ctx, rest, fn)
}

func (s *Server) runWave(ctx context.Context, idx []int, fn func(ctx context.Context, i int)) {
	var wg sync.WaitGroup
	for _, i := range idx {
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			// Shutting down: the remaining slots run inline and fail fast
			// on the cancelled context.
			fn(ctx, i)
			continue
		}
		wg.Add(1)
		go func(i int) {
			defer func() {
				if r := recover(); r != nil {
					s.cfg.Logf("envserver: panic in batch slot %d: %v", i, r)
				}
				<-s.sem
				wg.Done()
			}()
			fn(ctx, i)
		}(i)
	}
	wg.Wait()
}

func (s *Server) checkBatch(n int) error {
	if n == 0 {
		return aci.Errorf(aci.CodeBadRequest, "empty batch")
	}
	if n > s.cfg.MaxBatch {
		return aci.Errorf(aci.CodeBatchTooLarge, "batch of %d over the limit of %d (server setting max_batch)", n, s.cfg.MaxBatch)
	}
	return nil
}

// getEnv looks an env up and marks it used.
func (s *Server) getEnv(id string) (*env, error) {
	s.mu.Lock()
	e := s.envs[id]
	s.mu.Unlock()
	if e == nil {
		return nil, aci.Errorf(aci.CodeNotFound, "unknown env %q", id)
	}
	e.lastUsed.Store(time.Now().UnixNano())
	return e, nil
}

// ---- reset ----

func (s *Server) reset(ctx context.Context, req *api.ResetRequest) (*api.BatchReply, error) {
	if err := s.checkBatch(len(req.Envs)); err != nil {
		return nil, err
	}
	b, err := s.newBatch(req.Observe, req.Have)
	if err != nil {
		return nil, err
	}
	if err := distinctEnvs(len(req.Envs), func(i int) string { return req.Envs[i].EnvID }); err != nil {
		return nil, err
	}
	slots := make([]slot, len(req.Envs))
	groups := make([]string, len(req.Envs))
	for i, re := range req.Envs {
		groups[i] = re.Task
	}
	s.fanOut(ctx, len(req.Envs), groups, func(ctx context.Context, i int) {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.ResetTimeout)
		defer cancel()
		slots[i] = s.resetOne(ctx, b, &req.Envs[i])
		s.m.resets.WithLabelValues(outcomeOf(slots[i].res.Error)).Inc()
	})
	return s.reply(b, slots), nil
}

func outcomeOf(e *aci.Error) string {
	if e == nil {
		return "ok"
	}
	return string(e.Code)
}

// distinctEnvs rejects a batch that names one env twice.
func distinctEnvs(n int, id func(int) string) error {
	seen := make(map[string]bool, n)
	for i := 0; i < n; i++ {
		if v := id(i); v != "" {
			if seen[v] {
				return aci.Errorf(aci.CodeBadRequest, "env %q listed twice in one batch", v)
			}
			seen[v] = true
		}
	}
	return nil
}

func (s *Server) resetOne(ctx context.Context, b *batch, re *api.ResetEnv) slot {
	fail := func(envID string, err error) slot {
		return slot{res: api.Result{EnvID: envID, Error: wireError(err)}}
	}
	task := s.cfg.Tasks[re.Task]
	if task == nil {
		return fail(re.EnvID, aci.Errorf(aci.CodeNotFound, "unknown task %q", re.Task))
	}
	var e *env
	if re.EnvID != "" {
		var err error
		if e, err = s.getEnv(re.EnvID); err != nil {
			return fail(re.EnvID, err)
		}
	} else {
		e = &env{id: newID("env-")}
		e.lastUsed.Store(time.Now().UnixNano())
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fail(e.id, aci.Errorf(aci.CodeNotFound, "env %q was closed", e.id))
	}
	// A reset replaces the sandbox: the old one is dirty.
	s.endEpisode(e)
	if e.lease != nil {
		e.lease.Release(context.WithoutCancel(ctx))
		e.lease = nil
	}
	t0 := time.Now()
	lease, err := s.pool.LeaseGolden(ctx, task.ID, func(ctx context.Context, l *pool.Lease) error {
		return runSetup(ctx, l, task)
	})
	leaseDur := time.Since(t0)
	ep := s.startEpisode(e, task, re.Seed, "")
	if err != nil {
		reason := trajectory.SetupError
		if c := codeOf(err); c == aci.CodePoolExhausted || c == aci.CodeSandboxDied || c == aci.CodeTimeout {
			reason = trajectory.SandboxDied
			if c == aci.CodePoolExhausted {
				reason = "" // nothing started: no episode to score
			}
		}
		s.finishEpisode(e, reason)
		res := fail(e.id, fmt.Errorf("reset %s: %w", task.ID, err))
		res.res.EpisodeID = ep.traj.EpisodeID
		res.res.Info = &api.Info{Task: task.ID, ExitReason: string(reason)}
		s.register(e, re.EnvID == "")
		return res
	}
	e.lease = lease
	e.task = task
	if err := awaitWindows(ctx, lease, task); err != nil {
		s.finishEpisode(e, trajectory.SetupError)
		s.register(e, re.EnvID == "")
		return fail(e.id, fmt.Errorf("reset %s: %w", task.ID, err))
	}
	t1 := time.Now()
	quiesce(ctx, lease)
	obs, data, err := s.observe(ctx, e, b, nil)
	if err != nil {
		s.died(e, err)
		s.register(e, re.EnvID == "")
		return fail(e.id, err)
	}
	ep.traj.InitFrame = obs.Frame
	s.register(e, re.EnvID == "")
	return slot{
		res: api.Result{
			EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Obs: obs,
			Info: &api.Info{Step: 0, Task: task.ID, Timings: map[string]int64{
				"lease_us": leaseDur.Microseconds(), "observe_us": time.Since(t1).Microseconds()}},
		},
		data: data,
	}
}

// register makes a new env visible; a no-op for one already registered.
func (s *Server) register(e *env, isNew bool) {
	if !isNew {
		return
	}
	s.mu.Lock()
	s.envs[e.id] = e
	s.mu.Unlock()
}

// startEpisode begins a new episode on e (e.mu held).
func (s *Server) startEpisode(e *env, task *configs.Task, seed *int64, forkOf string) *episode {
	now := time.Now()
	ep := &episode{start: now, traj: trajectory.Trajectory{
		EpisodeID: newID("ep-"), EnvID: e.id, Task: task.ID, Seed: seed, ForkOf: forkOf,
		Steps: []trajectory.Step{}, StartedAt: now.UTC(),
	}}
	e.ep = ep
	s.mu.Lock()
	s.episodes[ep.traj.EpisodeID] = ep
	s.mu.Unlock()
	return ep
}

// finishEpisode ends e's episode with reason (e.mu held), saves it and counts it.
func (s *Server) finishEpisode(e *env, reason trajectory.ExitReason) {
	ep := e.ep
	if ep == nil || ep.over {
		return
	}
	ep.mu.Lock()
	ep.over = true
	now := time.Now().UTC()
	ep.traj.EndedAt = &now
	ep.traj.ExitReason = reason
	ep.traj.NumTurns = len(ep.traj.Steps)
	snapshot := ep.traj
	ep.mu.Unlock()
	label := string(reason)
	if label == "" {
		label = "closed"
	}
	s.m.episodes.WithLabelValues(label).Inc()
	if s.cfg.Store != nil {
		if err := s.cfg.Store.Save(&snapshot); err != nil {
			s.cfg.Logf("envserver: saving episode %s: %v", snapshot.EpisodeID, err)
			return
		}
		s.mu.Lock()
		delete(s.episodes, snapshot.EpisodeID)
		s.mu.Unlock()
	}
}

// endEpisode ends a still-running episode that the client abandoned (reset or
// close before it ended): it carries no exit reason, since it was not scored.
func (s *Server) endEpisode(e *env) {
	if e.ep != nil && !e.ep.over {
		s.finishEpisode(e, "")
	}
}

// died handles a sandbox death seen by e (e.mu held): the episode ends with
// sandbox_died and the lease goes back to the pool to be replaced.
func (s *Server) died(e *env, cause error) {
	if e.lease != nil {
		e.lease.Release(context.Background())
		e.lease = nil
	}
	s.finishEpisode(e, trajectory.SandboxDied)
	s.cfg.Logf("envserver: env %s: sandbox died: %v", e.id, cause)
}

// isDeath reports whether err means the sandbox is gone.
func isDeath(err error, l *pool.Lease) bool {
	switch codeOf(err) {
	case aci.CodeSandboxDied, aci.CodeDisplayError:
		return true
	}
	return l != nil && l.Err() != nil
}

// observe captures e's screen under b's settings, through the shared frame
// cache, and returns the observation and the encoded bytes (nil when the
// client already has them). act, when non-nil, is a capture that came back
// with an action and is used instead of a new one.
func (s *Server) observe(ctx context.Context, e *env, b *batch, act *wire.Shot) (*aci.Observation, []byte, error) {
	shot := act
	if shot == nil {
		var err error
		shot, err = e.lease.Guest().Screenshot(ctx, s.observeArgs(e, b))
		if err != nil {
			return nil, nil, err
		}
	}
	key := frameKey{hash: shot.Hash, format: b.obs.Format, quality: b.obs.Quality}
	var data []byte
	switch {
	case !shot.NotModified:
		data = shot.Data
		s.m.frames.WithLabelValues("encoded").Inc()
		s.cache.put(key, data)
		s.recordFrame(key, data)
	case b.have[shot.Hash]:
		s.m.frames.WithLabelValues("not_modified").Inc()
	default:
		s.m.frames.WithLabelValues("not_modified").Inc()
		var ok bool
		if data, ok = s.cache.get(key); ok {
			s.m.frames.WithLabelValues("cache_hit").Inc()
			break
		}
		// Evicted between the guest's answer and now: capture for real.
		s.m.frames.WithLabelValues("cache_miss").Inc()
		args := wire.ObserveArgs{Observe: b.obs}
		fresh, err := e.lease.Guest().Screenshot(ctx, args)
		if err != nil {
			return nil, nil, err
		}
		shot, data = fresh, fresh.Data
		s.m.frames.WithLabelValues("encoded").Inc()
		key.hash = fresh.Hash
		s.cache.put(key, data)
		s.recordFrame(key, data)
	}
	e.lastFrame = shot.Hash
	if b.have[shot.Hash] {
		data = nil
	}
	return &aci.Observation{
		Frame: shot.Hash, W: shot.W, H: shot.H, Format: b.obs.Format,
		Pointer: shot.Pointer, Display: shot.Display,
	}, data, nil
}

// observeArgs builds a capture request whose if_none_match lists every hash
// whose bytes the server or the client already holds in this encoding.
func (s *Server) observeArgs(e *env, b *batch) wire.ObserveArgs {
	args := wire.ObserveArgs{Observe: b.obs}
	inm := s.cache.recent(b.obs.Format, b.obs.Quality, 16)
	if e.lastFrame != "" {
		inm = append(inm, e.lastFrame)
	}
	for h := range b.have {
		if len(inm) >= 64 {
			break
		}
		inm = append(inm, h)
	}
	args.IfNoneMatch = inm
	return args
}

func (s *Server) recordFrame(k frameKey, data []byte) {
	if s.cfg.Store == nil || !s.cfg.RecordFrames || data == nil {
		return
	}
	if err := s.cfg.Store.PutFrame(k.hash, k.format, data); err != nil {
		s.cfg.Logf("envserver: storing frame %s: %v", k.hash, err)
	}
}

// ---- step ----

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

// ---- fork ----

func (s *Server) fork(ctx context.Context, req *api.ForkRequest) (*api.BatchReply, error) {
	if req.N < 1 {
		return nil, aci.Errorf(aci.CodeBadRequest, "fork n must be at least 1")
	}
	if err := s.checkBatch(req.N); err != nil {
		return nil, err
	}
	b, err := s.newBatch(req.Observe, req.Have)
	if err != nil {
		return nil, err
	}
	src, err := s.getEnv(req.EnvID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ResetTimeout)
	defer cancel()
	src.mu.Lock()
	switch {
	case src.closed || src.ep == nil:
		src.mu.Unlock()
		return nil, aci.Errorf(aci.CodeNotFound, "env %q has no episode to fork", req.EnvID)
	case src.ep.over:
		src.mu.Unlock()
		return nil, aci.Errorf(aci.CodeEpisodeOver, "episode %s is over: fork a live episode", src.ep.traj.EpisodeID)
	case src.lease == nil || src.lease.Err() != nil:
		s.died(src, src.leaseErr())
		src.mu.Unlock()
		return nil, aci.Errorf(aci.CodeSandboxDied, "env %q: sandbox died", req.EnvID)
	}
	leases, err := s.pool.Fork(ctx, src.lease, req.N)
	task, parentEp, parentStep, parentFrame := src.task, src.ep.traj.EpisodeID, src.ep.step, src.lastFrame
	seed := src.ep.traj.Seed
	src.mu.Unlock()
	if err != nil {
		s.m.forks.WithLabelValues(string(codeOf(err))).Add(float64(req.N))
		return nil, fmt.Errorf("fork %s: %w", req.EnvID, err)
	}
	slots := make([]slot, len(leases))
	groups := make([]string, len(leases))
	for i := range groups {
		groups[i] = "fork"
	}
	s.fanOut(ctx, len(leases), groups, func(ctx context.Context, i int) {
		e := &env{id: newID("env-"), lease: leases[i], task: task, lastFrame: parentFrame}
		e.lastUsed.Store(time.Now().UnixNano())
		e.mu.Lock()
		defer e.mu.Unlock()
		ep := s.startEpisode(e, task, seed, parentEp)
		ep.step = parentStep
		s.register(e, true)
		fail := func(err error) {
			s.died(e, err)
			slots[i] = slot{res: api.Result{EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Error: wireError(err)}}
		}
		if err := awaitWindows(ctx, e.lease, task); err != nil {
			fail(err)
			return
		}
		quiesce(ctx, e.lease)
		obs, data, err := s.observe(ctx, e, b, nil)
		if err != nil {
			fail(err)
			return
		}
		ep.traj.InitFrame = obs.Frame
		slots[i] = slot{res: api.Result{EnvID: e.id, EpisodeID: ep.traj.EpisodeID, Obs: obs,
			Info: &api.Info{Step: parentStep, Task: task.ID, ForkOf: req.EnvID}}, data: data}
	})
	for _, sl := range slots {
		s.m.forks.WithLabelValues(outcomeOf(sl.res.Error)).Inc()
	}
	return s.reply(b, slots), nil
}

// ---- close ----

func (s *Server) close(ctx context.Context, req *api.CloseRequest) (*api.CloseReply, error) {
	if err := s.checkBatch(len(req.EnvIDs)); err != nil {
		return nil, err
	}
	out := &api.CloseReply{Closed: []string{}}
	for _, id := range req.EnvIDs {
		if s.closeEnv(ctx, id) {
			out.Closed = append(out.Closed, id)
		}
	}
	return out, nil
}

// closeEnv ends an env: its episode is saved and its sandbox released.
func (s *Server) closeEnv(ctx context.Context, id string) bool {
	s.mu.Lock()
	e := s.envs[id]
	delete(s.envs, id)
	s.mu.Unlock()
	if e == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	s.endEpisode(e)
	if e.lease != nil {
		e.lease.Release(context.WithoutCancel(ctx))
		e.lease = nil
	}
	return true
}

// ---- episodes and spec ----

func (s *Server) episode(id string) (*trajectory.Trajectory, error) {
	s.mu.Lock()
	ep := s.episodes[id]
	s.mu.Unlock()
	if ep != nil {
		ep.mu.Lock()
		defer ep.mu.Unlock()
		t := ep.traj
		t.Steps = append([]trajectory.Step(nil), ep.traj.Steps...)
		t.NumTurns = len(t.Steps)
		return &t, nil
	}
	if s.cfg.Store != nil {
		t, err := s.cfg.Store.Load(id)
		if err == nil {
			return t, nil
		}
		if !errors.Is(err, trajectory.ErrNotFound) {
			return nil, aci.Errorf(aci.CodeNotFound, "episode %q: %v", id, err)
		}
	}
	return nil, aci.Errorf(aci.CodeNotFound, "unknown episode %q", id)
}

func (s *Server) spec() *api.Spec {
	caps := s.pool.Capabilities()
	st := s.pool.Stats()
	sp := &api.Spec{
		Protocol: api.Protocol,
		Dialects: dialect.Names(),
		Observation: api.ObservationSpec{
			Formats: []string{aci.FormatPNG, aci.FormatJPEG, aci.FormatRaw},
			Default: s.cfg.DefaultObserve,
		},
		Pool: api.PoolSpec{
			Provider: caps.Provider, Size: s.cfg.PoolSize, Warm: st.Warm,
			SnapshotKind: caps.SnapshotKind, Fork: caps.Fork, Confined: caps.Confined, Notes: caps.Notes,
		},
		Limits: api.Limits{MaxBatch: s.cfg.MaxBatch, MaxBodyBytes: s.cfg.MaxBodyBytes},
	}
	for _, v := range aci.AgentVerbs {
		sp.Verbs = append(sp.Verbs, string(v))
	}
	for _, id := range s.cfg.Tasks.IDs() {
		t := s.cfg.Tasks[id]
		sp.Tasks = append(sp.Tasks, api.TaskInfo{ID: t.ID, Instruction: t.Instruction, MaxSteps: t.MaxSteps})
	}
	return sp
}
