package envserver

import (
	"context"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/trajectory"
)

// Trainer exec (docs/api.md, "Trainer exec"): POST /v1/exec runs one
// command in an env's sandbox for the trainer, as the agent's user (the
// trainer sees and changes what the agent could, no more: the verifier's
// and the helpers' identities stay out of reach). It is served only when
// the server's config allows it, never while a step of the env runs, and
// never on an episode that is over (its sandbox is frozen for scoring).
// The trajectory records it as an event between the agent's steps, never
// as an agent action.

const (
	// maxExecMS bounds one command's time (it holds its env meanwhile).
	maxExecMS = 60_000
	// defaultExecMS is a command's time when the request names none.
	defaultExecMS = 10_000
)

// trainerSpec is what /v1/spec says of the trainer's routes.
func (s *Server) trainerSpec() api.TrainerSpec {
	sp := api.TrainerSpec{Observe: true, Files: true, MaxPutBytes: wire.MaxPutFile, MaxGetBytes: wire.MaxGetFile, MaxTreeEntries: wire.MaxTreeEntries}
	if s.cfg.TrainerExec {
		sp.Exec, sp.MaxExecMS, sp.MaxExecOutputBytes = true, maxExecMS, wire.ExecOutputCap
	}
	return sp
}

// serveExec answers POST /v1/exec.
func (s *Server) serveExec(ctx *fasthttp.RequestCtx, c codec) {
	switch {
	case !s.cfg.TrainerExec:
		s.writeError(ctx, c, aci.Errorf(aci.CodeUnsupported, "trainer exec is off on this server (config trainer_exec, flag --allow-exec)"))
		return
	case !ctx.IsPost():
		s.writeError(ctx, c, aci.Errorf(aci.CodeBadRequest, "/v1/exec needs POST"))
		return
	case len(ctx.PostBody()) > s.cfg.MaxBodyBytes:
		s.writeError(ctx, c, aci.Errorf(aci.CodePayloadTooLarge, "body over %d bytes", s.cfg.MaxBodyBytes))
		return
	}
	var req api.ExecRequest
	if err := c.decodeWithin(ctx.PostBody(), &req, &s.lim); err != nil {
		s.writeError(ctx, c, err)
		return
	}
	reply, err := s.trainerExec(s.ctx, &req)
	if err != nil {
		s.writeError(ctx, c, err)
		return
	}
	s.writeReply(ctx, c, reply)
}

// checkExec refuses a malformed command before it reaches the sandbox.
func checkExec(req *api.ExecRequest) error {
	switch {
	case (len(req.Argv) > 0) == (req.Shell != ""):
		return aci.Errorf(aci.CodeBadRequest, "exec: exactly one of argv and shell")
	case len(req.Argv) > 0 && req.Argv[0] == "":
		return aci.Errorf(aci.CodeBadRequest, "exec: argv[0] is empty")
	case req.TimeoutMS < 0 || req.TimeoutMS > maxExecMS:
		return aci.Errorf(aci.CodeBadRequest, "exec: timeout_ms %d: want 0 (default %d) to %d", req.TimeoutMS, defaultExecMS, maxExecMS)
	}
	for _, kv := range req.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return aci.Errorf(aci.CodeBadRequest, "exec: env entry %q is not KEY=VALUE", kv)
		}
	}
	return nil
}

// trainerExec runs req in its env's sandbox and records it in the episode.
func (s *Server) trainerExec(ctx context.Context, req *api.ExecRequest) (*api.ExecReply, error) {
	if err := checkExec(req); err != nil {
		return nil, err
	}
	e, err := s.betweenSteps(req.EnvID, "exec")
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	ep := e.ep
	timeout := req.TimeoutMS
	if timeout == 0 {
		timeout = defaultExecMS
	}
	// The guest kills the command at its timeout; the call's own deadline
	// leaves it time to say so.
	cctx, cancel := context.WithTimeout(ctx, time.Duration(timeout)*time.Millisecond+10*time.Second)
	defer cancel()
	t0 := time.Now()
	res, err := e.lease.Guest().Exec(cctx, wire.ExecArgs{Argv: req.Argv, Shell: req.Shell, Stdin: req.Stdin, Cwd: req.Cwd,
		Env: req.Env, TimeoutMS: timeout})
	ev := trajectory.Event{Kind: trajectory.EventExec, AfterStep: ep.step, TMS: t0.Sub(ep.start).Milliseconds(),
		Argv: req.Argv, Shell: req.Shell, DurationMS: time.Since(t0).Milliseconds()}
	if err == nil {
		ev.Exit, ev.TimedOut, ev.StdoutBytes, ev.StderrBytes = res.ExitCode, res.TimedOut, len(res.Stdout), len(res.Stderr)
	}
	if err := s.endEvent(e, ev, err); err != nil {
		return nil, err
	}
	return &api.ExecReply{EnvID: e.id, Exit: res.ExitCode, Signal: res.Signal, Stdout: nonNil(res.Stdout), Stderr: nonNil(res.Stderr),
		Truncated: res.StdoutTruncated || res.StderrTruncated, TimedOut: res.TimedOut, DurationMS: res.DurationMS}, nil
}

// betweenSteps is env id locked for a trainer's call (what names the
// call): never beside a step or another call (busy), only in a live
// episode (its sandbox is frozen once it is over). The caller unlocks.
func (s *Server) betweenSteps(id, what string) (*env, error) {
	e, err := s.getEnv(id)
	if err != nil {
		return nil, err
	}
	if !e.mu.TryLock() {
		return nil, aci.Errorf(aci.CodeBusy, "env %s: a step or another call is running; %s runs between steps", e.id, what)
	}
	ep := e.ep
	switch {
	case e.closed || ep == nil:
		err = aci.Errorf(aci.CodeNotFound, "env %q has no episode", id)
	case ep.over:
		err = aci.Errorf(aci.CodeEpisodeOver, "episode %s is over (its sandbox is frozen for scoring): %s in a live episode", ep.traj.EpisodeID, what)
	case e.lease == nil || e.lease.Err() != nil:
		s.died(e, e.leaseErr(), trajectory.SandboxDied)
		err = aci.Errorf(aci.CodeSandboxDied, "env %q: sandbox died", id)
	}
	if err != nil {
		e.mu.Unlock()
		return nil, err
	}
	return e, nil
}

// endEvent records ev, the trainer's call on e (e.mu held), with err's
// code when the call failed; a sandbox that died in the call ends the
// episode. It returns err.
func (s *Server) endEvent(e *env, ev trajectory.Event, err error) error {
	if err != nil {
		ev.Error = string(codeOf(err))
	}
	s.recordEvent(e.ep, ev)
	if err != nil && isDeath(err, e.lease) {
		s.died(e, err, trajectory.SandboxDied)
	}
	return err
}

// maxEvents bounds the trainer events one trajectory keeps; past it they
// are counted (EventsDropped), not kept.
const maxEvents = 4096

// recordEvent appends ev to ep's trajectory.
func (s *Server) recordEvent(ep *episode, ev trajectory.Event) {
	ep.mu.Lock()
	if len(ep.traj.Events) < maxEvents {
		ep.traj.Events = append(ep.traj.Events, ev)
	} else {
		ep.traj.EventsDropped++
	}
	ep.mu.Unlock()
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
