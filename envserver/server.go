// Package envserver is the server a trainer talks to: batch reset/step/fork
// over fasthttp with msgpack (or JSON) bodies, envs leased from a warm pool,
// tasks with setup and verifiers, one frame cache shared by every env,
// recorded trajectories and Prometheus metrics (docs/api.md).
package envserver

import (
	"bytes"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// Config configures a Server. Zero values take the defaults documented on
// each field.
type Config struct {
	Pool  *pool.Pool        // required
	Tasks configs.Tasks     // required
	Store *trajectory.Store // nil: trajectories are kept in memory only

	Token           string        // bearer token; required to listen beyond loopback
	MaxBatch        int           // envs per request; default 64
	MaxBodyBytes    int           // request body cap; default 8 MiB
	FrameCacheBytes int64         // shared frame cache bound; default 256 MiB
	Concurrency     int           // envs worked on at once across requests; default 32
	IdleTTL         time.Duration // an env untouched this long is closed; default 10 min
	StepTimeout     time.Duration // one env's step (actions + observe); default 60 s
	ResetTimeout    time.Duration // one env's reset (lease + setup + observe); default 120 s
	RecordFrames    bool          // store every observed frame with the trajectory
	DefaultObserve  api.Observe   // used when a request carries none; default png, settled by configs.DefaultSettle
	MaxSteps        int           // cap on any episode's step budget; 0: the task's alone
	PoolSize        int           // the pool's warm size, as /v1/spec reports it
	// Named checkpoints (docs/api.md, "Checkpoints"): at most
	// MaxCheckpoints (default 64) live at once, holding MaxCheckpointBytes
	// (default 4 GiB) of snapshots in all; one unused for CheckpointTTL
	// (default 10 min) is deleted.
	MaxCheckpoints     int
	MaxCheckpointBytes int64
	CheckpointTTL      time.Duration
	// Connection limits: MaxConns bounds open connections (default 1024),
	// MaxConnsPerIP those from one address (default 256); ReadTimeout
	// bounds reading one request, headers and body (default 2 min: a
	// slow client is cut off), WriteTimeout writing one reply (default 2
	// min), ConnIdleTimeout a keep-alive connection's wait for its next
	// request (default 10 min).
	MaxConns, MaxConnsPerIP                    int
	ReadTimeout, WriteTimeout, ConnIdleTimeout time.Duration
	Screen                                     api.Size // the sandboxes' screen, as /v1/spec reports it (zero: unreported)
	// Screens are the pools of the other sizes a reset may ask for
	// (reset screen), each with its own goldens and warm sandboxes.
	Screens     map[api.Size]*pool.Pool
	TrainerExec bool // serve POST /v1/exec (docs/api.md, "Trainer exec")
	Logf        func(format string, args ...any)
	// Episode videos (docs/api.md, "Episode video"): Ffmpeg is the ffmpeg
	// to run ("" looks up ffmpeg on PATH, "off" serves none); VideoDir
	// keeps the encoded videos ("" a temp dir removed at Shutdown), at
	// most VideoCacheBytes of them (default 1 GiB); MaxVideoFrames bounds
	// the positions in one (default 300; longer episodes are sampled),
	// VideoEncodes the encodes at once (default 1), VideoTimeout one
	// encode (default 2 min).
	Ffmpeg          string
	VideoDir        string
	VideoCacheBytes int64
	MaxVideoFrames  int
	VideoEncodes    int
	VideoTimeout    time.Duration
}

func (c *Config) setDefaults() {
	if c.MaxBatch <= 0 {
		c.MaxBatch = 64
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 8 << 20
	}
	if c.FrameCacheBytes <= 0 {
		c.FrameCacheBytes = 256 << 20
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 32
	}
	if c.IdleTTL <= 0 {
		c.IdleTTL = 10 * time.Minute
	}
	if c.StepTimeout <= 0 {
		c.StepTimeout = 60 * time.Second
	}
	if c.ResetTimeout <= 0 {
		c.ResetTimeout = 120 * time.Second
	}
	if c.MaxCheckpoints <= 0 {
		c.MaxCheckpoints = 64
	}
	if c.MaxCheckpointBytes <= 0 {
		c.MaxCheckpointBytes = 4 << 30
	}
	if c.CheckpointTTL <= 0 {
		c.CheckpointTTL = 10 * time.Minute
	}
	if c.MaxConns <= 0 {
		c.MaxConns = 1024
	}
	if c.MaxConnsPerIP <= 0 {
		c.MaxConnsPerIP = 256
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = 2 * time.Minute
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = 2 * time.Minute
	}
	if c.ConnIdleTimeout <= 0 {
		c.ConnIdleTimeout = 10 * time.Minute
	}
	if c.DefaultObserve.Format == "" {
		c.DefaultObserve.Format = aci.FormatPNG
	}
	if c.DefaultObserve.Settle == nil {
		st := configs.DefaultSettle
		c.DefaultObserve.Settle = &st
	}
	if c.VideoCacheBytes <= 0 {
		c.VideoCacheBytes = 1 << 30
	}
	if c.MaxVideoFrames <= 0 {
		c.MaxVideoFrames = 300
	}
	c.MaxVideoFrames = min(c.MaxVideoFrames, videoMaxPerCall)
	if c.VideoEncodes <= 0 {
		c.VideoEncodes = 1
	}
	if c.VideoTimeout <= 0 {
		c.VideoTimeout = 2 * time.Minute
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
}

// Server serves the trainer-facing API. Create it with New, run it with
// Serve, end it with Shutdown.
type Server struct {
	cfg     Config
	proofMu sync.Mutex
	proofs  map[string]*proof // by task: does its verifier give a verdict on a clean state (verdict.go)
	lim     api.Limits        // the request caps, advertised in /v1/spec
	pool    *pool.Pool
	all     poolSet // every screen size's pool, the default first (fixed at New)
	cache   *frameCache
	rec     *frameRecorder // record_frames; nil when off
	m       *metrics
	sem     chan struct{} // bounds envs worked on at once
	ctx     context.Context
	cancel  context.CancelFunc
	http    *fasthttp.Server
	metrics fasthttp.RequestHandler
	ui      fasthttp.RequestHandler // the web UI at /ui; does its own auth (header or session cookie)

	ckpts  checkpoints // named checkpoints
	videos *videos     // episode videos

	mu       sync.Mutex
	envs     map[string]*env
	episodes map[string]*episode // live and recently finished, by episode id
	wg       sync.WaitGroup      // background goroutines
}

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

// codeOf maps any error to its wire code: the pool's and the context's
// kinds (pool.KindCode), a trajectory not found, else the code it carries.
// Whose fault a code is, the one error table says (aci.Codes).
func codeOf(err error) aci.Code {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, trajectory.ErrNotFound):
		return aci.CodeNotFound
	}
	if c := pool.KindCode(err); c != "" {
		return c
	}
	return aci.CodeOf(err)
}

// wireError turns any error into its wire form through codeOf.
func wireError(err error) *aci.Error {
	if err == nil {
		return nil
	}
	var e *aci.Error
	if errors.As(err, &e) && codeOf(err) == e.Code {
		if err == error(e) {
			return e
		}
		// Keep the whole chain: the outer layers say which sandbox and
		// why (a boot's log tail), the inner one only what kind.
		return &aci.Error{Code: e.Code, Message: chainMessage(err, e), Detail: e.Detail}
	}
	return &aci.Error{Code: codeOf(err), Message: err.Error()}
}

// chainMessage is err's message without the "code: " prefix its typed
// error e adds when it is the innermost link.
func chainMessage(err error, e *aci.Error) string {
	msg := err.Error()
	if full := e.Error(); strings.HasSuffix(msg, full) {
		return strings.TrimSuffix(msg, full) + e.Message
	}
	return msg
}

// ---- HTTP ----

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

// writeReply encodes v as the response. A batch reply's frames are
// written to the connection from the buffers they live in, which are handed
// back once the response is written (batchReply.release).
func (s *Server) writeReply(ctx *fasthttp.RequestCtx, c codec, v any) {
	var release func()
	if r, ok := v.(*batchReply); ok {
		release = r.release
	}
	if c != codecJSON {
		body := newSplicedBody(release)
		if err := api.MarshalTo(body, v); err != nil {
			body.Close()
			s.writeError(ctx, c, aci.Errorf(aci.CodeInternal, "encode reply: %v", err))
			return
		}
		ctx.SetContentType(c.contentType())
		ctx.Response.SetBodyStream(body, body.n)
		return
	}
	if release != nil {
		defer release()
	}
	b, err := c.encode(v)
	if err != nil {
		s.writeError(ctx, c, aci.Errorf(aci.CodeInternal, "encode reply: %v", err))
		return
	}
	ctx.SetContentType(c.contentType())
	ctx.SetBody(b)
}

func (s *Server) writeError(ctx *fasthttp.RequestCtx, c codec, err error) {
	e := wireError(err)
	b, merr := c.encode(api.ErrorReply{Error: e})
	if merr != nil {
		b = []byte(`{"error":{"code":"internal","message":"encode error"}}`)
		c = codecJSON
	}
	ctx.Response.Reset()
	ctx.SetStatusCode(e.Code.HTTPStatus())
	ctx.SetContentType(c.contentType())
	ctx.SetBody(b)
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
