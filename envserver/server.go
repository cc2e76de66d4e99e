// Package envserver is the server a trainer talks to: batch reset/step/fork
// over fasthttp with msgpack (or JSON) bodies, envs leased from a warm pool,
// tasks with setup and verifiers, one frame cache shared by every env,
// recorded trajectories and Prometheus metrics (docs/api.md).
package envserver

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/valyala/fasthttp"
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

// ---- replies ----

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
