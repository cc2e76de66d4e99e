package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
)

// Throughput is rollout throughput over pool sizes.
type Throughput struct {
	Method string            `json:"method"`
	Points []ThroughputPoint `json:"points"`
	// Knee is the largest pool size that still raised total steps/s by
	// more than 10% over every smaller size; 0 when unknown.
	Knee int `json:"knee_pool"`
	// Stopped says why the scenario did not try larger pools, if it stopped.
	Stopped string `json:"stopped,omitempty"`
}

// ThroughputPoint is one policy at one pool size.
type ThroughputPoint struct {
	Policy         string  `json:"policy"`
	Pool           int     `json:"pool"`
	Seconds        float64 `json:"seconds"`
	Steps          int64   `json:"steps"`
	Episodes       int64   `json:"episodes"`
	StepsPerSec    float64 `json:"steps_per_sec"`
	EpisodesPerMin float64 `json:"episodes_per_min"`
	// CPUPerStep is CPU seconds of bench's process tree (client, in-process
	// server, every sandbox) per step; HostCPUPerStep is the whole
	// machine's busy CPU per step, other users' load included.
	CPUPerStep     float64 `json:"cpu_sec_per_step"`
	HostCPUPerStep float64 `json:"host_cpu_sec_per_step"`
	StepP50        float64 `json:"step_p50_ms"`
	StepP95        float64 `json:"step_p95_ms"`
	ResetP50       float64 `json:"reset_p50_ms"` // client wall time of the workers' resets
	MeanReward     float64 `json:"mean_reward"`
	Errors         int64   `json:"errors"`
	BootSeconds    float64 `json:"boot_seconds"`
}

// scaleGain is the improvement below which a larger pool counts as not scaling.
const scaleGain = 1.10

func (b *runner) throughput(ctx context.Context) (*Throughput, error) {
	out := &Throughput{Method: fmt.Sprintf(
		"per pool size N: a fresh server with pool N (shipped config); N workers in this process, each owning one env of task %s, step it one request at a time (observe png, have = hashes the worker holds, like the Python client) and reset it when the episode ends; after a %s warm-up, steps and episodes finishing in a %s window are counted. random: random clicks/moves/scrolls/letters/keys until max_steps truncates; scripted: the task's reference solution ending in done. CPU from /proc: bench's process tree (client, in-process server, sandboxes; each process's utime+stime sampled every 250 ms) and the whole host's busy time from /proc/stat",
		b.opts.Task, b.sz.warmup, b.sz.window)}
	best, flat := 0.0, 0
	for _, n := range b.sz.pools {
		pts, err := b.throughputAt(ctx, n)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if len(out.Points) == 0 {
				return nil, err
			}
			out.Stopped = fmt.Sprintf("pool %d failed, so larger pools were not tried: %v", n, err)
			break
		}
		out.Points = append(out.Points, pts...)
		total := 0.0
		for _, p := range pts {
			total += p.StepsPerSec
		}
		b.opts.Logf("bench: pool %d: %.1f steps/s (random+scripted)", n, total)
		if total > best*scaleGain {
			out.Knee, flat = n, 0
		} else {
			flat++
		}
		best = max(best, total)
		if flat >= 2 && n != b.sz.pools[len(b.sz.pools)-1] {
			out.Stopped = fmt.Sprintf("stopped after pool %d: total steps/s improved by less than 10%% for two sizes in a row", n)
			break
		}
	}
	return out, nil
}

// throughputAt measures both policies on a fresh server with pool n.
func (b *runner) throughputAt(ctx context.Context, n int) ([]ThroughputPoint, error) {
	srv, err := b.startServer(ctx, n, nil)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	spec, err := srv.c.Spec(ctx)
	if err != nil {
		return nil, err
	}
	w, h, _, err := configs.ParseScreen(b.report.Server.Screen)
	if err != nil {
		return nil, err
	}
	_ = spec
	var pts []ThroughputPoint
	for _, name := range []string{"random", "scripted"} {
		newPolicy := func(i int) Policy {
			if name == "random" {
				return &Random{W: w, H: h, Rand: rand.New(rand.NewPCG(uint64(n), uint64(i)))}
			}
			return &Scripted{}
		}
		p, err := b.rollout(ctx, srv, n, newPolicy)
		if err != nil {
			return nil, fmt.Errorf("%s policy, pool %d: %w", name, n, err)
		}
		p.Policy, p.Pool, p.BootSeconds = name, n, srv.booted.Seconds()
		pts = append(pts, p)
	}
	return pts, nil
}

// rolloutCounters are shared by a rollout's workers.
type rolloutCounters struct {
	counting atomic.Bool
	steps    atomic.Int64
	episodes atomic.Int64
	errors   atomic.Int64
	mu       sync.Mutex
	rewards  float64
	lat      []time.Duration
	resets   []time.Duration
}

// rollout runs n workers for warm-up plus window and measures the window.
func (b *runner) rollout(ctx context.Context, srv *server, n int, newPolicy func(i int) Policy) (ThroughputPoint, error) {
	task := b.tasks[b.opts.Task]
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cnt rolloutCounters
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- b.worker(ctx, srv.c, task, newPolicy(i), &cnt)
		}(i)
	}
	stop := func() { cancel(); wg.Wait() }
	select {
	case <-time.After(b.sz.warmup):
	case err := <-errs:
		stop()
		return ThroughputPoint{}, err
	}
	sampler := StartCPUSampler(os.Getpid(), 250*time.Millisecond)
	host0, t0 := HostCPUSeconds(), time.Now()
	cnt.counting.Store(true)
	select {
	case <-time.After(b.sz.window):
	case err := <-errs:
		sampler.Stop()
		stop()
		return ThroughputPoint{}, err
	}
	cnt.counting.Store(false)
	secs := time.Since(t0).Seconds()
	cpu, host1 := sampler.Stop(), HostCPUSeconds()
	steps, eps := cnt.steps.Load(), cnt.episodes.Load()
	stop()
	cnt.mu.Lock()
	d, rd := Summarize(cnt.lat), Summarize(cnt.resets)
	cnt.mu.Unlock()
	p := ThroughputPoint{
		Seconds: secs, Steps: steps, Episodes: eps, Errors: cnt.errors.Load(),
		StepsPerSec: float64(steps) / secs, EpisodesPerMin: float64(eps) / secs * 60,
		StepP50: d.P50, StepP95: d.P95, ResetP50: rd.P50,
	}
	if steps > 0 {
		p.CPUPerStep = cpu / float64(steps)
		p.HostCPUPerStep = (host1 - host0) / float64(steps)
	}
	if eps > 0 {
		p.MeanReward = cnt.rewards / float64(eps)
	}
	if steps == 0 && p.Errors > 0 {
		return p, fmt.Errorf("no step completed in %s (%d errors)", b.sz.window, p.Errors)
	}
	return p, nil
}

// worker owns one env: reset, step until the episode ends, repeat, until
// ctx ends. It returns nil when ctx ends and an error only when the env
// cannot be reset at all.
func (b *runner) worker(ctx context.Context, c *Client, task *configs.Task, pol Policy, cnt *rolloutCounters) error {
	env := ""
	defer func() {
		if env != "" {
			c.Close(context.WithoutCancel(ctx), env)
		}
	}()
	have := newHaveSet(32)
	obs := &api.Observe{Format: aci.FormatPNG}
	for ctx.Err() == nil {
		t0 := time.Now()
		rr, err := c.Reset(ctx, &api.ResetRequest{Envs: []api.ResetEnv{{EnvID: env, Task: task.ID}}, Observe: obs, Have: have.list()})
		if err == nil && cnt.counting.Load() {
			cnt.mu.Lock()
			cnt.resets = append(cnt.resets, time.Since(t0))
			cnt.mu.Unlock()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("reset: %w", err)
		}
		env = rr.Results[0].EnvID
		have.addReply(rr)
		pol.Begin(task)
		for ctx.Err() == nil {
			acts := pol.Next()
			if acts == nil {
				acts = []aci.Action{{Verb: aci.Done}}
			}
			t0 := time.Now()
			rep, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: acts}}, Observe: obs, Have: have.list()})
			d := time.Since(t0)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				cnt.errors.Add(1)
				break
			}
			res := rep.Results[0]
			if res.Error != nil {
				cnt.errors.Add(1)
				break
			}
			have.addReply(rep)
			if cnt.counting.Load() {
				cnt.steps.Add(1)
				cnt.mu.Lock()
				cnt.lat = append(cnt.lat, d)
				cnt.mu.Unlock()
			}
			if res.Terminated || res.Truncated {
				if cnt.counting.Load() {
					cnt.episodes.Add(1)
					cnt.mu.Lock()
					cnt.rewards += res.Reward
					cnt.mu.Unlock()
				}
				break
			}
		}
	}
	return nil
}

// haveSet is a worker's frame cache by hash, bounded, oldest dropped.
type haveSet struct {
	max   int
	order []string
	set   map[string]bool
}

func newHaveSet(n int) *haveSet { return &haveSet{max: n, set: map[string]bool{}} }

func (h *haveSet) addReply(r *api.BatchReply) {
	for k := range r.Frames {
		if h.set[k] {
			continue
		}
		h.set[k] = true
		h.order = append(h.order, k)
		if len(h.order) > h.max {
			delete(h.set, h.order[0])
			h.order = h.order[1:]
		}
	}
}

func (h *haveSet) list() []string { return append([]string(nil), h.order...) }
