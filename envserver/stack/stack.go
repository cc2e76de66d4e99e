// Package stack wires a whole env server from a config: provider, warm pool,
// trajectory store and server. cmd/envserver, the bench and the end-to-end
// tests all start servers through it, so they run the same wiring.
package stack

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/process"
	"github.com/shinken-rl/shinken/trajectory"
)

// Options are what a config file does not say.
type Options struct {
	GuestdPath string // default: next to the executable, else PATH
	Logf       func(format string, args ...any)
}

// Stack is a running server with everything under it.
type Stack struct {
	Server *envserver.Server
	Pool   *pool.Pool
	// Screens are the pools of the extra screen sizes (config screens).
	Screens  map[api.Size]*pool.Pool
	Provider pool.Provider
	Store    *trajectory.Store
	Tasks    configs.Tasks
	Listener net.Listener
	URL      string

	served chan error
	lock   *os.File // the state directory's owner lock
}

// Open builds the provider, pool, store and server that cfg describes. It
// does not listen; Serve does.
func Open(ctx context.Context, cfg *configs.Server, opts Options) (_ *Stack, err error) {
	logf := opts.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	tasks, err := configs.LoadTasks(cfg.Tasks)
	if err != nil {
		return nil, err
	}
	rec, err := configs.LoadChecks(cfg.Tasks)
	if err != nil {
		return nil, err
	}
	tasks, refused := configs.Admit(tasks, rec, cfg.AllowUnchecked)
	for _, id := range slices.Sorted(maps.Keys(refused)) {
		if cfg.AllowUnchecked {
			logf("envserver: task %s is served unchecked: %s", id, refused[id])
		} else {
			logf("envserver: task %s refused: %s", id, refused[id])
		}
	}
	if len(tasks) == 0 {
		return nil, fmt.Errorf("no task passes its checks (--allow-unchecked serves them anyway)")
	}
	w, h, d, err := configs.ParseScreen(cfg.Screen)
	if err != nil {
		return nil, err
	}
	// Providers hand state paths to other processes (bind mounts, sandbox
	// inits) that do not share our working directory.
	state, err := filepath.Abs(cfg.State)
	if err != nil {
		return nil, err
	}
	c := *cfg
	c.State = state
	cfg = &c
	st := &Stack{Tasks: tasks}
	if st.lock, err = lockState(cfg.State); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			st.Close(context.Background())
		}
	}()
	name := cfg.Provider
	if name == "" {
		name = "process"
	}
	build, ok := providers[name]
	if !ok {
		err = fmt.Errorf("unknown provider (want one of %s)", strings.Join(Providers(), ", "))
	} else {
		st.Provider, err = build(ctx, cfg, opts, logf)
	}
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", cfg.Provider, err)
	}
	// A reset queues for its sandbox for as long as its own deadline allows
	// unless the config bounds the wait below it (docs/architecture.md, "Bursts").
	leaseTimeout := time.Duration(cfg.LeaseTimeout)
	if leaseTimeout <= 0 {
		leaseTimeout = time.Duration(cfg.ResetTimeout)
	}
	newPool := func(size, w, h int) (*pool.Pool, error) {
		return pool.New(ctx, st.Provider, pool.Config{
			Size: size, MaxSandboxes: cfg.MaxSandboxes, MaxConcurrentBoots: cfg.MaxConcurrentBoots,
			LeaseTimeout: leaseTimeout, ReplicasPerGolden: cfg.ReplicasPerGolden, ReplicaIdleTTL: time.Duration(cfg.ReplicaIdleTTL),
			ResetMode: cfg.ResetMode, ResetSettle: cfg.Observe.Settle,
			Spec: pool.Spec{Width: w, Height: h, Depth: d, GLX: cfg.GLX}, Logf: logf,
		})
	}
	if st.Pool, err = newPool(cfg.Pool, w, h); err != nil {
		return nil, err
	}
	// Each extra screen size has a pool of its own, its own goldens and
	// screen_warm warm sandboxes (docs/api.md, "Per-env screens").
	screens, err := extraScreens(cfg, w, h)
	if err != nil {
		return nil, err
	}
	for _, sz := range screens {
		p, err := newPool(cfg.ScreenWarm, sz.W, sz.H)
		if err != nil {
			return nil, fmt.Errorf("screen %dx%d: %w", sz.W, sz.H, err)
		}
		if st.Screens == nil {
			st.Screens = map[api.Size]*pool.Pool{}
		}
		st.Screens[sz] = p
	}
	st.Store, err = trajectory.NewStore(filepath.Join(cfg.State, "episodes"), trajectory.StoreOptions{MaxEpisodes: cfg.MaxEpisodes, Logf: logf})
	if err != nil {
		return nil, err
	}
	st.Server, err = envserver.New(envserver.Config{
		Pool: st.Pool, Tasks: tasks, Store: st.Store, Token: cfg.Token,
		MaxBatch: cfg.MaxBatch, MaxBodyBytes: cfg.MaxBodyBytes, FrameCacheBytes: cfg.FrameCacheBytes,
		Concurrency: cfg.Concurrency, IdleTTL: time.Duration(cfg.IdleTTL),
		StepTimeout: time.Duration(cfg.StepTimeout), ResetTimeout: time.Duration(cfg.ResetTimeout),
		RecordFrames: cfg.RecordFrames, DefaultObserve: cfg.Observe, MaxSteps: cfg.MaxSteps, PoolSize: cfg.Pool, Logf: logf,
		MaxConns: cfg.MaxConns, MaxConnsPerIP: cfg.MaxConnsPerIP, ReadTimeout: time.Duration(cfg.ReadTimeout),
		WriteTimeout: time.Duration(cfg.WriteTimeout), ConnIdleTimeout: time.Duration(cfg.ConnIdleTimeout),
		Screen:         api.Size{W: w, H: h},
		Screens:        st.Screens,
		MaxCheckpoints: cfg.MaxCheckpoints, MaxCheckpointBytes: cfg.MaxCheckpointBytes, CheckpointTTL: time.Duration(cfg.CheckpointTTL),
		TrainerExec: cfg.TrainerExec,
		Ffmpeg:      cfg.Ffmpeg, VideoDir: filepath.Join(cfg.State, "videos"), VideoCacheBytes: cfg.VideoCacheBytes,
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// maxScreens bounds the extra screen sizes (each is a pool of its own).
const maxScreens = 8

// extraScreens parses config screens: sizes other than the default one,
// each once, at most maxScreens.
func extraScreens(cfg *configs.Server, w, h int) ([]api.Size, error) {
	var out []api.Size
	for _, s := range cfg.Screens {
		sw, sh, _, err := configs.ParseScreen(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("screens: %w", err)
		}
		sz := api.Size{W: sw, H: sh}
		if (sw == w && sh == h) || slices.Contains(out, sz) {
			continue
		}
		out = append(out, sz)
	}
	if len(out) > maxScreens {
		return nil, fmt.Errorf("screens: %d extra sizes, at most %d (each keeps a pool)", len(out), maxScreens)
	}
	if len(out) > 0 && cfg.ScreenWarm < 1 {
		return nil, fmt.Errorf("screen_warm %d: want 1 or more (each extra size keeps that many warm)", cfg.ScreenWarm)
	}
	return out, nil
}

// ProviderFunc builds a sandbox provider for cfg. It returns a nil
// interface with its error, never a typed nil that Close would call.
type ProviderFunc func(ctx context.Context, cfg *configs.Server, opts Options, logf func(string, ...any)) (pool.Provider, error)

// providers is the registry config provider (flag --provider) selects from.
var providers = map[string]ProviderFunc{}

// Register adds a provider under name; each provider registers itself in
// its own file's init. A name registered twice panics: a second provider
// must never silently replace the first.
func Register(name string, f ProviderFunc) {
	if _, dup := providers[name]; dup {
		panic(fmt.Sprintf("stack: provider %q registered twice", name))
	}
	providers[name] = f
}

// Providers lists the registered providers' names, sorted.
func Providers() []string { return slices.Sorted(maps.Keys(providers)) }

func init() {
	Register("process", func(ctx context.Context, cfg *configs.Server, opts Options, logf func(string, ...any)) (pool.Provider, error) {
		p, err := process.New(ctx, process.Options{
			Root: filepath.Join(cfg.State, "sandboxes"), GuestdPath: opts.GuestdPath,
			MaxConcurrentBoots: cfg.MaxConcurrentBoots, SnapshotBytes: cfg.SnapshotBytes, Logf: logf,
		})
		if err != nil {
			return nil, err
		}
		return p, nil
	})
}

// Serve listens on addr (refusing a non-loopback address without a token)
// and serves in the background until Close.
func (st *Stack) Serve(addr, token string) error {
	if err := envserver.CheckListen(addr, token); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	st.Listener = ln
	st.URL = "http://" + ln.Addr().String()
	st.served = make(chan error, 1)
	go func() { st.served <- st.Server.Serve(ln) }()
	return nil
}

// Done returns the serve loop's result channel (nil before Serve).
func (st *Stack) Done() <-chan error { return st.served }

// Close shuts everything down in order: server (saving open episodes), pool,
// provider. Safe on a partly built stack.
func (st *Stack) Close(ctx context.Context) error {
	var errs []error
	if st.Server != nil {
		errs = append(errs, st.Server.Shutdown(ctx))
		if st.served != nil {
			<-st.served
		}
	}
	// Teardown gets its own deadline: a shutdown that spent ctx waiting
	// for in-flight requests must still destroy every sandbox.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if st.Pool != nil {
		errs = append(errs, st.Pool.Close(tctx))
	}
	for _, p := range st.Screens {
		errs = append(errs, p.Close(tctx))
	}
	if st.Provider != nil {
		errs = append(errs, st.Provider.Close(tctx))
	}
	if st.lock != nil {
		st.lock.Close() // last: everything under the state dir is settled
		st.lock = nil
	}
	return errors.Join(errs...)
}
