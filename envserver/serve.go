package envserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/aci/dialect"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// serve.go is the server's protocol side: New wires the parts into a
// Server, handle and dispatch route each request, Serve and Shutdown run
// and end it. The Server itself and its reply writers are in server.go.

// New builds a server over a running pool.
func New(cfg Config) (*Server, error) {
	if cfg.Pool == nil {
		return nil, errors.New("envserver: config needs a pool")
	}
	if len(cfg.Tasks) == 0 {
		return nil, errors.New("envserver: config needs at least one task")
	}
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg:      cfg,
		proofs:   map[string]*proof{},
		lim:      DefaultLimits(cfg.MaxBatch, cfg.MaxBodyBytes),
		pool:     cfg.Pool,
		cache:    newFrameCache(cfg.FrameCacheBytes),
		sem:      make(chan struct{}, cfg.Concurrency),
		ctx:      ctx,
		cancel:   cancel,
		envs:     map[string]*env{},
		episodes: map[string]*episode{},
	}
	s.all = s.pools()
	s.m = newMetrics(s.all, s.cache, s.envCount)
	s.videos = newVideos(&s.cfg, s.m.reg)
	if cfg.Store != nil && cfg.RecordFrames {
		s.rec = newFrameRecorder(cfg.Store, cfg.Logf, s.m.reg)
	}
	s.metrics = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{}))
	s.http = &fasthttp.Server{
		Handler: s.handle,
		Name:    "shinken",
		// fasthttp reads bodies up to twice the cap so that a modestly
		// oversized one gets a typed payload_too_large from the handler
		// instead of a reset connection; beyond that fasthttp refuses it
		// (handleParseError) and closes.
		MaxRequestBodySize: 2 * cfg.MaxBodyBytes,
		Concurrency:        cfg.MaxConns,
		MaxConnsPerIP:      cfg.MaxConnsPerIP,
		ReadTimeout:        cfg.ReadTimeout,
		WriteTimeout:       cfg.WriteTimeout,
		IdleTimeout:        cfg.ConnIdleTimeout,
		ErrorHandler:       s.handleParseError,
		NoDefaultDate:      true,
		Logger:             printfLogger(cfg.Logf),
		// The token is checked once the headers are in, before the body is
		// read: an unauthenticated client cannot make the server buffer
		// up to MaxRequestBodySize.
		HeaderReceived:  s.headerReceived,
		ContinueHandler: s.authorizedHeader,
	}
	s.ui = s.startUI()
	s.ckpts.byID = map[string]*checkpoint{}
	s.checkpointGauges()
	if s.checkpointsServed() {
		s.lim.MaxCheckpoints, s.lim.MaxCheckpointBytes = cfg.MaxCheckpoints, cfg.MaxCheckpointBytes
		s.lim.CheckpointTTLS = int64(cfg.CheckpointTTL / time.Second)
		s.wg.Add(1)
		go s.reapCheckpoints()
	}
	s.wg.Add(1)
	go s.reapIdle()
	return s, nil
}

// printfLogger routes fasthttp's own messages to the server's log.
type printfLogger func(format string, args ...any)

func (l printfLogger) Printf(format string, args ...any) { l(format, args...) }

// CheckListen refuses a non-loopback address when no token is configured.
func CheckListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip != nil && ip.IsLoopback() {
		return nil
	}
	if token == "" {
		return fmt.Errorf("refusing to listen on %q without a token: pass --token (or bind 127.0.0.1)", addr)
	}
	return nil
}

// Serve answers requests on ln until Shutdown. It refuses a non-loopback
// listener when no token is configured.
func (s *Server) Serve(ln net.Listener) error {
	if err := CheckListen(ln.Addr().String(), s.cfg.Token); err != nil {
		return err
	}
	return s.http.Serve(ln)
}

// shutdownEpisode ends env id's live episode as the server's stop cut it:
// sandbox_died, detail server_shutdown (an infrastructure fault a trainer
// drops), where a client's close would leave it unscored and untyped.
func (s *Server) shutdownEpisode(id string) {
	s.mu.Lock()
	e := s.envs[id]
	s.mu.Unlock()
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ep == nil || e.ep.over {
		return
	}
	e.ep.mu.Lock()
	e.ep.traj.ExitDetail = trajectory.ExitDetailServerShutdown
	e.ep.mu.Unlock()
	s.finishEpisode(e, trajectory.SandboxDied)
}

// Handler is the request handler, for serving on a listener of one's own.
func (s *Server) Handler() fasthttp.RequestHandler { return s.handle }

// Shutdown stops accepting requests, waits for those in flight (bounded by
// ctx), closes every env (saving its trajectory) and joins the goroutines the
// server started. The pool is the caller's to close.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.http.ShutdownWithContext(ctx)
	s.cancel()
	s.mu.Lock()
	ids := make([]string, 0, len(s.envs))
	for id := range s.envs {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.shutdownEpisode(id)
		s.closeEnv(ctx, id)
	}
	s.wg.Wait()
	if s.rec != nil {
		s.rec.close() // every frame queued is on disk before Shutdown returns
	}
	s.deleteAllCheckpoints()
	s.videos.close()
	return err
}

// readyFailStreak is how many boots in a row must fail before the server
// says it is not ready.
const readyFailStreak = 3

// ready says whether this server should be given new envs (GET /readyz,
// docs/api.md): not before its pool has booted a sandbox, nor while its
// last readyFailStreak boots all failed (a missing privilege, a broken
// image). /healthz says only that it serves.
func (s *Server) ready() (bool, string) {
	st := s.pool.Stats() // the default screen's pool: a reset without a screen goes there
	switch {
	case st.BootFailStreak >= readyFailStreak:
		return false, fmt.Sprintf("not ready: the last %d sandbox boots failed (the server log has each cause)", st.BootFailStreak)
	case st.Boots == 0 && st.Warm == 0:
		return false, "not ready: no sandbox has booted yet"
	}
	return true, "ready"
}

func (s *Server) envCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.envs)
}

// reapIdle closes envs whose client has gone quiet for IdleTTL.
func (s *Server) reapIdle() {
	defer s.wg.Done()
	tick := time.NewTicker(s.cfg.IdleTTL / 4)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		cutoff := time.Now().Add(-s.cfg.IdleTTL).UnixNano()
		var idle []string
		s.mu.Lock()
		for id, e := range s.envs {
			if e.lastUsed.Load() < cutoff {
				idle = append(idle, id)
			}
		}
		s.mu.Unlock()
		for _, id := range idle {
			s.cfg.Logf("envserver: closing env %s: idle for %s", id, s.cfg.IdleTTL)
			s.closeEnv(s.ctx, id)
		}
	}
}

func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	start := time.Now()
	path := string(ctx.Path())
	route := routeOf(path)
	defer func() {
		if r := recover(); r != nil {
			s.cfg.Logf("envserver: panic serving %s: %v", path, r)
			s.writeError(ctx, codecFor(ctx.Request.Header.ContentType()), aci.Errorf(aci.CodeInternal, "internal error"))
		}
		s.m.requests.WithLabelValues(route, fmt.Sprint(ctx.Response.StatusCode())).Inc()
		s.m.reqSecs.WithLabelValues(route).Observe(time.Since(start).Seconds())
		// A streamed body (writeReply) is counted by its length: reading it
		// here would copy its frames.
		if ctx.Response.IsBodyStream() {
			s.m.bytesSent.Add(float64(ctx.Response.Header.ContentLength()))
		} else {
			s.m.bytesSent.Add(float64(len(ctx.Response.Body())))
		}
	}()
	if route == "healthz" {
		ctx.SetContentType("text/plain")
		ctx.SetBodyString("ok")
		return
	}
	if route == "readyz" {
		ctx.SetContentType("text/plain")
		ok, why := s.ready()
		if !ok {
			ctx.SetStatusCode(fasthttp.StatusServiceUnavailable)
		}
		ctx.SetBodyString(why)
		return
	}
	if route == "ui" {
		s.ui(ctx)
		return
	}
	c := codecFor(ctx.Request.Header.ContentType())
	if !ctx.IsPost() && !ctx.IsGet() && !(route == "checkpoint" && ctx.IsDelete()) {
		s.writeError(ctx, c, aci.Errorf(aci.CodeBadRequest, "method %s not allowed", ctx.Method()))
		return
	}
	if !s.authorized(ctx) {
		s.writeError(ctx, c, aci.Errorf(aci.CodeUnauthorized, "missing or wrong bearer token"))
		return
	}
	if !ctx.IsPost() && ctx.Request.Header.Peek("Accept") != nil && strings.Contains(string(ctx.Request.Header.Peek("Accept")), "json") {
		c = codecJSON
	}
	switch route {
	case "metrics":
		s.metrics(ctx)
	case "spec":
		sp := s.spec()
		sp.Trainer.Video = s.videos.spec()
		s.writeReply(ctx, c, sp)
	case "video":
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/v1/episodes/"), "/video.mp4")
		s.serveVideo(ctx, c, id)
	case "episodes":
		id := strings.TrimPrefix(path, "/v1/episodes/")
		t, err := s.episode(id)
		if err != nil {
			s.writeError(ctx, c, err)
			return
		}
		s.writeReply(ctx, c, t)
	case "checkpoint":
		s.m.inflight.Inc()
		defer s.m.inflight.Dec()
		s.serveCheckpoint(ctx, c, path)
	case "exec":
		s.m.inflight.Inc()
		defer s.m.inflight.Dec()
		s.serveExec(ctx, c)
	case "files":
		s.m.inflight.Inc()
		defer s.m.inflight.Dec()
		s.serveFiles(ctx, c, path)
	case "reset", "step", "fork", "close", "observe":
		if !ctx.IsPost() {
			s.writeError(ctx, c, aci.Errorf(aci.CodeBadRequest, "%s needs POST", path))
			return
		}
		if len(ctx.PostBody()) > s.cfg.MaxBodyBytes {
			s.writeError(ctx, c, aci.Errorf(aci.CodePayloadTooLarge, "body over %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		s.m.inflight.Inc()
		defer s.m.inflight.Dec()
		reply, err := s.dispatch(route, c, ctx.PostBody())
		if err != nil {
			s.writeError(ctx, c, err)
			return
		}
		s.writeReply(ctx, c, reply)
	default:
		s.writeError(ctx, c, aci.Errorf(aci.CodeNotFound, "no route %s", path))
	}
}

// routeOf names a path with a bounded label.
func routeOf(path string) string {
	switch path {
	case "/healthz":
		return "healthz"
	case "/readyz":
		return "readyz"
	case "/metrics":
		return "metrics"
	case "/v1/spec":
		return "spec"
	case "/v1/reset":
		return "reset"
	case "/v1/step":
		return "step"
	case "/v1/fork":
		return "fork"
	case "/v1/close":
		return "close"
	case "/v1/exec":
		return "exec"
	case "/v1/observe":
		return "observe"
	}
	if strings.HasPrefix(path, "/v1/episodes/") {
		if strings.HasSuffix(path, "/video.mp4") {
			return "video"
		}
		return "episodes"
	}
	if strings.HasPrefix(path, "/v1/files/") {
		return "files"
	}
	if path == "/v1/checkpoint" || strings.HasPrefix(path, "/v1/checkpoint/") {
		return "checkpoint"
	}
	if path == "/ui" || strings.HasPrefix(path, "/ui/") {
		return "ui"
	}
	return "other"
}

// dispatch decodes a batch request and runs it. The request context ends
// with the server, never with the fasthttp RequestCtx (which is recycled).
func (s *Server) dispatch(route string, c codec, body []byte) (any, error) {
	switch route {
	case "reset":
		var req api.ResetRequest
		if err := c.decodeWithin(body, &req, &s.lim); err != nil {
			return nil, err
		}
		return s.reset(s.ctx, &req)
	case "step":
		var req api.StepRequest
		if err := c.decodeWithin(body, &req, &s.lim); err != nil {
			return nil, err
		}
		return s.step(s.ctx, &req)
	case "fork":
		var req api.ForkRequest
		if err := c.decodeWithin(body, &req, &s.lim); err != nil {
			return nil, err
		}
		return s.fork(s.ctx, &req)
	case "observe":
		var req api.ObserveRequest
		if err := c.decodeWithin(body, &req, &s.lim); err != nil {
			return nil, err
		}
		return s.observeEnvs(s.ctx, &req)
	default:
		var req api.CloseRequest
		if err := c.decodeWithin(body, &req, &s.lim); err != nil {
			return nil, err
		}
		return s.close(s.ctx, &req)
	}
}

func (s *Server) authorized(ctx *fasthttp.RequestCtx) bool {
	return s.authorizedHeader(&ctx.Request.Header)
}

func (s *Server) authorizedHeader(h *fasthttp.RequestHeader) bool {
	if s.cfg.Token == "" {
		return true
	}
	got, ok := bytes.CutPrefix(h.Peek("Authorization"), []byte("Bearer "))
	return ok && subtle.ConstantTimeCompare(got, []byte(s.cfg.Token)) == 1
}

// uiMaxBody bounds a web UI request's body (the login form).
const uiMaxBody = 4 << 10

// headerReceived runs before a request's body is read: an unauthorized
// request may carry no body (it fails as too large, and handleParseError
// answers unauthorized, then fasthttp closes the connection).
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if s.authorizedHeader(h) || bytes.Equal(h.RequestURI(), []byte("/healthz")) || bytes.Equal(h.RequestURI(), []byte("/readyz")) {
		return fasthttp.RequestConfig{}
	}
	if path, _, _ := strings.Cut(string(h.RequestURI()), "?"); routeOf(path) == "ui" {
		// The web UI authenticates by its own cookie, and its login form
		// posts the token: a few bytes, never the API's bodies.
		return fasthttp.RequestConfig{MaxRequestBodySize: uiMaxBody}
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: 1}
}

// handleParseError answers requests fasthttp could not parse, the oversize
// body among them, with a typed error.
func (s *Server) handleParseError(ctx *fasthttp.RequestCtx, err error) {
	c := codecFor(ctx.Request.Header.ContentType())
	if !s.authorized(ctx) {
		s.writeError(ctx, c, aci.Errorf(aci.CodeUnauthorized, "missing or wrong bearer token"))
		return
	}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		s.writeError(ctx, c, aci.Errorf(aci.CodePayloadTooLarge, "body over %d bytes", s.cfg.MaxBodyBytes))
		return
	}
	s.writeError(ctx, c, aci.Errorf(aci.CodeBadRequest, "malformed request: %v", err))
}

// EnvSandbox names the sandbox an env runs on, for operators and tests
// (ok is false for an unknown env or one without a live sandbox).
func (s *Server) EnvSandbox(envID string) (sandboxID string, ok bool) {
	s.mu.Lock()
	e := s.envs[envID]
	s.mu.Unlock()
	if e == nil {
		return "", false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lease == nil {
		return "", false
	}
	return e.lease.ID(), true
}

func (s *Server) spec() *api.Spec {
	caps := s.pool.Capabilities()
	st := s.all.Stats()
	sp := &api.Spec{
		Protocol: api.Protocol,
		Dialects: dialect.Names(),
		Observation: api.ObservationSpec{
			Formats: slices.Clone(aci.Formats),
			Default: s.cfg.DefaultObserve,
		},
		Pool: api.PoolSpec{
			Provider: caps.Provider, Size: s.cfg.PoolSize, Warm: st.Warm, MaxSandboxes: s.all.MaxSandboxes(),
			SnapshotKind: caps.SnapshotKind, Fork: caps.Fork, ResetMode: s.pool.ResetMode(), Checkpoint: s.checkpointsServed(), Confined: caps.Confined, Isolation: caps.Isolation, Confinement: caps.Confinement, Notes: caps.Notes,
		},
		Limits:  s.lim,
		Trainer: s.trainerSpec(),
	}
	if s.cfg.Screen.W > 0 && s.cfg.Screen.H > 0 {
		sc := s.cfg.Screen
		sp.Observation.Screen = &sc
		if len(s.cfg.Screens) > 0 {
			sp.Observation.Screens = s.screens()
		}
	}
	for _, v := range aci.AgentVerbs {
		if a11yVerb(v) && !caps.A11y {
			continue // advertised only where sandboxes have the tree
		}
		sp.Verbs = append(sp.Verbs, string(v))
	}
	if caps.A11y {
		sp.Observation.A11y = []string{aci.A11yNone, aci.A11yFull, aci.A11yDiff}
		sp.Observation.SoM = true
	}
	for _, id := range s.cfg.Tasks.IDs() {
		t := s.cfg.Tasks[id]
		ti := api.TaskInfo{ID: t.ID, Instruction: t.Instruction, MaxSteps: t.MaxSteps, Version: t.FamilyVersion(), Apps: t.Apps,
			Splits: map[string]int{configs.SplitTrain: 100 - t.TestShare(), configs.SplitTest: t.TestShare()}}
		for _, p := range t.Params {
			kind, spec := p.Schema()
			ti.Params = append(ti.Params, api.ParamInfo{Name: p.Name, Kind: kind, Spec: spec})
		}
		sp.Tasks = append(sp.Tasks, ti)
	}
	return sp
}
