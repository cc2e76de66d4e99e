package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/api/client"
	"github.com/shinken-rl/shinken/rollout"
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
	ResetP95       float64 `json:"reset_p95_ms"`
	// PhaseMS is the mean wall ms per counted step of each phase the
	// server reports in info.timings (act, settle, capture, encode,
	// observe, verify), plus http: the client's wall time outside them.
	PhaseMS map[string]float64 `json:"phase_ms_per_step,omitempty"`
	// CPUByProcess splits CPUPerStep (in ms) by command name: bench (the
	// client and the in-process server), guestd, Xvfb, the apps.
	CPUByProcess map[string]float64 `json:"cpu_ms_per_step_by_process,omitempty"`
	MeanReward   float64            `json:"mean_reward"`
	Errors       int64              `json:"errors"`
	BootSeconds  float64            `json:"boot_seconds"`
}

// scaleGain is the improvement below which a larger pool counts as not scaling.
const scaleGain = 1.10

func (b *runner) throughput(ctx context.Context) (*Throughput, error) {
	out := &Throughput{Method: fmt.Sprintf(
		"per pool size N: a fresh server with pool N (shipped config); N workers in this process, each owning one env of task %s, drive it with rollout's policies through the shared Go client, one request at a time (observe png, have = hashes the worker holds, like the Python client), and reset it when the episode ends; the warm-up ends once every worker has finished its first episode (goldens built), then steps and episodes finishing in a %s window are counted (a window is extended until its first step lands, for at most a minute; one without steps is an error). random: rollout's random policy until max_steps truncates; scripted: the task's reference solution ending in done. CPU from /proc: bench's process tree (client, in-process server, sandboxes; each process's utime+stime sampled every 250 ms), split by process, and the whole host's busy time from /proc/stat; phases are the means of the steps' info.timings",
		b.opts.Task, b.sz.window)}
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
	var pts []ThroughputPoint
	for _, name := range []string{"random", "scripted"} {
		// rollout's own policies: what a rollout run sends is what is measured.
		var pol rollout.Policy = &rollout.Random{}
		if name == "scripted" {
			pol = &rollout.Scripted{Tasks: b.tasks}
		}
		p, err := b.rollout(ctx, srv, n, pol)
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
	phases   map[string]float64 // summed wall ms of counted steps, by phase
}

// addPhases sums a counted step's info.timings (and the client's wall
// time outside them, "http") into the phase totals.
func (c *rolloutCounters) addPhases(res *api.Result, wall time.Duration) {
	if res.Info == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	inside := int64(0)
	for k, us := range res.Info.Timings {
		c.phases[strings.TrimSuffix(k, "_us")] += float64(us) / 1000
		if k == "act_us" || k == "observe_us" || k == "verify_us" {
			inside += us
		}
	}
	c.phases["http"] += float64(wall.Microseconds()-inside) / 1000
}

// warmupLimit bounds the wait for every worker's first episode.
const warmupLimit = 5 * time.Minute

// windowLimit bounds a measurement window that waits for its first step.
const windowLimit = time.Minute

// rollout runs n workers; the warm-up ends once every worker has finished
// its first episode (the task's golden is built, every env has been
// through a reset), then the window is measured.
func (b *runner) rollout(ctx context.Context, srv *server, n int, pol rollout.Policy) (ThroughputPoint, error) {
	task := b.tasks[b.opts.Task]
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cnt := rolloutCounters{phases: map[string]float64{}}
	errs := make(chan error, n)
	warm := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- b.worker(ctx, srv.c, task, pol, int64(n)<<32|int64(i)<<16, &cnt, warm)
		}(i)
	}
	stop := func() { cancel(); wg.Wait() }
	limit := time.NewTimer(warmupLimit)
	defer limit.Stop()
	for ready := 0; ready < n; {
		select {
		case <-warm:
			ready++
		case err := <-errs:
			stop()
			if err == nil {
				err = ctx.Err()
			}
			return ThroughputPoint{}, fmt.Errorf("warm-up: %w", err)
		case <-limit.C:
			stop()
			return ThroughputPoint{}, fmt.Errorf("warm-up: only %d of %d workers finished an episode in %s", ready, n, warmupLimit)
		}
	}
	sampler := StartCPUSampler(os.Getpid(), 250*time.Millisecond)
	host0, t0 := HostCPUSeconds(), time.Now()
	cnt.counting.Store(true)
	// The window lasts b.sz.window, and past it until a step lands (one
	// step slower than the window, on a loaded machine, would otherwise
	// leave it empty), for at most windowLimit.
	window := time.NewTimer(b.sz.window)
	defer window.Stop()
wait:
	for {
		select {
		case <-window.C:
			if cnt.steps.Load() > 0 || time.Since(t0) >= windowLimit {
				break wait
			}
			window.Reset(20 * time.Millisecond)
		case err := <-errs:
			sampler.Stop()
			stop()
			return ThroughputPoint{}, err
		}
	}
	cnt.counting.Store(false)
	secs := time.Since(t0).Seconds()
	cpu, host1 := sampler.Stop(), HostCPUSeconds()
	steps, eps := cnt.steps.Load(), cnt.episodes.Load()
	stop()
	if steps == 0 {
		return ThroughputPoint{}, fmt.Errorf("no step completed in %s (%d errors)", windowLimit, cnt.errors.Load())
	}
	cnt.mu.Lock()
	d, rd := Summarize(cnt.lat), Summarize(cnt.resets)
	p := ThroughputPoint{
		Seconds: secs, Steps: steps, Episodes: eps, Errors: cnt.errors.Load(),
		StepsPerSec: float64(steps) / secs, EpisodesPerMin: float64(eps) / secs * 60,
		StepP50: d.P50, StepP95: d.P95, ResetP50: rd.P50, ResetP95: rd.P95,
		CPUPerStep:     cpu / float64(steps),
		HostCPUPerStep: (host1 - host0) / float64(steps),
		PhaseMS:        map[string]float64{}, CPUByProcess: map[string]float64{},
	}
	for k, v := range cnt.phases {
		p.PhaseMS[k] = v / float64(steps)
	}
	cnt.mu.Unlock()
	for k, v := range sampler.ByCommand() {
		p.CPUByProcess[k] = v * 1000 / float64(steps)
	}
	if eps > 0 {
		p.MeanReward = cnt.rewards / float64(eps)
	}
	return p, nil
}

// worker owns one env: reset, step with pol until the episode ends, repeat,
// until ctx ends. It signals warm once, when its first episode ends. It
// returns nil when ctx ends and an error only when the env cannot be reset
// or the policy fails.
func (b *runner) worker(ctx context.Context, c *client.Client, task *configs.Task, pol rollout.Policy, seed int64, cnt *rolloutCounters, warm chan<- struct{}) error {
	env := ""
	defer func() {
		if env != "" {
			c.Close(context.WithoutCancel(ctx), env)
		}
	}()
	info := api.TaskInfo{ID: task.ID, Instruction: task.Instruction, MaxSteps: task.MaxSteps}
	have := newHaveSet(32)
	obs := &api.Observe{Format: aci.FormatPNG}
	first := true
	for episode := int64(0); ctx.Err() == nil; episode++ {
		t0 := time.Now()
		rr, err := reset(ctx, c, &api.ResetRequest{Envs: []api.ResetEnv{{EnvID: env, Task: task.ID}}, Observe: obs, Have: have.list()})
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
		res := rr.Results[0]
		env = res.EnvID
		have.addReply(rr)
		agent, err := pol.Start(ctx, info, seed+episode)
		if err != nil {
			return fmt.Errorf("policy: %w", err)
		}
		turn := rollout.Turn{Task: info, EnvID: env, EpisodeID: res.EpisodeID, Obs: res.Obs}
		for ctx.Err() == nil {
			dec, err := agent.Act(ctx, turn)
			if err != nil {
				return fmt.Errorf("policy: %w", err)
			}
			t0 := time.Now()
			rep, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: dec.Actions}}, Observe: obs, Have: have.list()})
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
				cnt.addPhases(&res, d)
			}
			turn.Step++
			turn.Obs, turn.LastError = res.Obs, nil
			if res.Info != nil {
				turn.LastError = res.Info.Error
			}
			if res.Terminated || res.Truncated {
				if cnt.counting.Load() {
					cnt.episodes.Add(1)
					v, _ := res.Scored()
					cnt.mu.Lock()
					cnt.rewards += v
					cnt.mu.Unlock()
				}
				break
			}
		}
		if first {
			first = false
			warm <- struct{}{}
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
