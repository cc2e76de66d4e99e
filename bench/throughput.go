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
	"github.com/shinken-rl/shinken/rollout"
)

// Throughput is rollout throughput over pool sizes and reset modes.
type Throughput struct {
	Method string            `json:"method"`
	Points []ThroughputPoint `json:"points"`
	// Knee is the largest pool size that still raised total steps/s by
	// more than 10% over every smaller size (first reset mode); 0 when
	// unknown.
	Knee int `json:"knee_pool"`
	// Stopped says why the scenario did not try larger pools, if it stopped.
	Stopped string `json:"stopped,omitempty"`
}

// ThroughputPoint is one policy at one pool size under one reset mode.
type ThroughputPoint struct {
	Policy         string  `json:"policy"`
	Pool           int     `json:"pool"`
	ResetMode      string  `json:"reset_mode"`
	Seconds        float64 `json:"seconds"`
	WarmupSeconds  float64 `json:"warmup_seconds"`
	Steps          int64   `json:"steps"`
	Episodes       int64   `json:"episodes"`
	StepsPerSec    float64 `json:"steps_per_sec"`
	EpisodesPerMin float64 `json:"episodes_per_min"`
	// CPUPerStep is CPU seconds of bench's process tree (client, in-process
	// server, every sandbox) per step; HostCPUPerStep is the whole
	// machine's busy CPU per step, other users' load included.
	CPUPerStep     float64 `json:"cpu_sec_per_step"`
	HostCPUPerStep float64 `json:"host_cpu_sec_per_step"`
	// CPUByPart splits CPUPerStep by process: server (bench's own process:
	// the in-process envserver and the client), guestd, xvfb, apps (window
	// manager and the task's apps).
	CPUByPart map[string]float64 `json:"cpu_sec_per_step_by_part,omitempty"`
	// PhaseMS is the mean wall time per step of each phase the server
	// reports (info.timings: act, observe with its settle, verify) and the
	// rest of the client's round trip (http).
	PhaseMS    map[string]float64 `json:"phase_ms,omitempty"`
	StepP50    float64            `json:"step_p50_ms"`
	StepP95    float64            `json:"step_p95_ms"`
	ResetP50   float64            `json:"reset_p50_ms"` // client wall time of the workers' resets
	ResetP95   float64            `json:"reset_p95_ms"`
	MeanReward float64            `json:"mean_reward"`
	Errors     int64              `json:"errors"`
	// BootSeconds is how long the server took to warm its pool.
	BootSeconds float64 `json:"boot_seconds"`
	// Resets and Boots count the pool's in-place resets and boots during
	// the window.
	Resets int64 `json:"pool_resets"`
	Boots  int64 `json:"pool_boots"`
}

// scaleGain is the improvement below which a larger pool counts as not scaling.
const scaleGain = 1.10

// maxWarmup bounds a point's warm-up: every worker must have finished one
// episode (goldens built) by then.
const maxWarmup = 3 * time.Minute

func (b *runner) throughput(ctx context.Context) (*Throughput, error) {
	out := &Throughput{Method: fmt.Sprintf(
		"per reset mode and pool size N: a fresh server with pool N (shipped config, reset_mode as stated); N workers in this process drive rollout's client and policies, each owning one env of task %s, stepping it one request at a time (observe png, have = hashes the worker holds, like the Python client) and resetting it when the episode ends; the warm-up ends when every worker has finished its first episode (at most %s), then steps and episodes finishing in a %s window are counted (a window without a step is an error, not a row). random: random moves/clicks/scrolls/words/keys until max_steps truncates; scripted: the task's reference solution ending in done. CPU from /proc: bench's process tree (client, in-process server, sandboxes; each process's utime+stime sampled every 250 ms), split by process, and the whole host's busy time from /proc/stat; phases from the server's info.timings",
		b.opts.Task, maxWarmup, b.sz.window)}
	for mi, mode := range b.resetModes() {
		best, flat := 0.0, 0
		for _, n := range b.sz.pools {
			pts, err := b.throughputAt(ctx, n, mode)
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				if len(out.Points) == 0 {
					return nil, err
				}
				out.Stopped = fmt.Sprintf("%s pool %d failed, so larger pools were not tried: %v", mode, n, err)
				break
			}
			out.Points = append(out.Points, pts...)
			total := 0.0
			for _, p := range pts {
				total += p.StepsPerSec
			}
			b.opts.Logf("bench: %s pool %d: %.1f steps/s (random+scripted)", mode, n, total)
			if total > best*scaleGain {
				if mi == 0 {
					out.Knee = n
				}
				flat = 0
			} else {
				flat++
			}
			best = max(best, total)
			if flat >= 2 && n != b.sz.pools[len(b.sz.pools)-1] {
				out.Stopped = fmt.Sprintf("%s stopped after pool %d: total steps/s improved by less than 10%% for two sizes in a row", mode, n)
				break
			}
		}
	}
	return out, nil
}

// resetModes are the modes the run compares (the first is the main one).
func (b *runner) resetModes() []string {
	if len(b.opts.ResetModes) > 0 {
		return b.opts.ResetModes
	}
	return []string{"in_place"}
}

// throughputAt measures both policies on a fresh server with pool n.
func (b *runner) throughputAt(ctx context.Context, n int, mode string) ([]ThroughputPoint, error) {
	srv, err := b.startServer(ctx, n, func(c *configs.Server) { c.ResetMode = mode })
	if err != nil {
		return nil, err
	}
	defer srv.close()
	spec, err := srv.c.Spec(ctx)
	if err != nil {
		return nil, err
	}
	var info api.TaskInfo
	for _, t := range spec.Tasks {
		if t.ID == b.opts.Task {
			info = t
		}
	}
	if info.ID == "" {
		return nil, fmt.Errorf("server does not list task %s", b.opts.Task)
	}
	var pts []ThroughputPoint
	for _, name := range []string{"random", "scripted"} {
		var pol rollout.Policy = &rollout.Random{}
		if name == "scripted" {
			pol = &rollout.Scripted{Tasks: b.tasks}
		}
		p, err := b.rollout(ctx, srv, n, info, pol)
		if err != nil {
			return nil, fmt.Errorf("%s policy, %s pool %d: %w", name, mode, n, err)
		}
		p.Policy, p.Pool, p.ResetMode, p.BootSeconds = name, n, mode, srv.booted.Seconds()
		pts = append(pts, p)
	}
	return pts, nil
}

// rolloutCounters are shared by a rollout's workers.
type rolloutCounters struct {
	counting  atomic.Bool
	firstDone atomic.Int64 // workers that finished their first episode
	steps     atomic.Int64
	episodes  atomic.Int64
	errors    atomic.Int64
	mu        sync.Mutex
	rewards   float64
	lat       []time.Duration
	resets    []time.Duration
	phases    map[string]float64 // summed microseconds per phase
}

// rollout runs n workers through their first episodes (warm-up), then
// for the window, and measures the window.
func (b *runner) rollout(ctx context.Context, srv *server, n int, task api.TaskInfo, pol rollout.Policy) (ThroughputPoint, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cnt := rolloutCounters{phases: map[string]float64{}}
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- b.worker(ctx, srv.c, task, pol, int64(i), &cnt)
		}(i)
	}
	stop := func() { cancel(); wg.Wait() }
	w0 := time.Now()
	warm := time.NewTimer(maxWarmup)
	defer warm.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for cnt.firstDone.Load() < int64(n) {
		select {
		case <-tick.C:
		case <-warm.C:
			stop()
			return ThroughputPoint{}, fmt.Errorf("warm-up: only %d of %d workers finished an episode in %s (%d errors)", cnt.firstDone.Load(), n, maxWarmup, cnt.errors.Load())
		case err := <-errs:
			stop()
			return ThroughputPoint{}, err
		case <-ctx.Done():
			stop()
			return ThroughputPoint{}, ctx.Err()
		}
	}
	warmup := time.Since(w0)
	st0 := srv.st.Pool.Stats()
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
	st1 := srv.st.Pool.Stats()
	steps, eps := cnt.steps.Load(), cnt.episodes.Load()
	stop()
	cnt.mu.Lock()
	d, rd := Summarize(cnt.lat), Summarize(cnt.resets)
	cnt.mu.Unlock()
	p := ThroughputPoint{
		Seconds: secs, WarmupSeconds: warmup.Seconds(), Steps: steps, Episodes: eps, Errors: cnt.errors.Load(),
		StepsPerSec: float64(steps) / secs, EpisodesPerMin: float64(eps) / secs * 60,
		StepP50: d.P50, StepP95: d.P95, ResetP50: rd.P50, ResetP95: rd.P95,
		Resets: int64(st1.Resets - st0.Resets), Boots: int64(st1.Boots - st0.Boots),
	}
	if steps == 0 {
		return p, fmt.Errorf("no step completed in the %s window (%d errors)", b.sz.window, p.Errors)
	}
	p.CPUPerStep = cpu / float64(steps)
	p.HostCPUPerStep = (host1 - host0) / float64(steps)
	p.CPUByPart = map[string]float64{}
	for part, v := range sampler.ByPart() {
		p.CPUByPart[part] = v / float64(steps)
	}
	p.PhaseMS = map[string]float64{}
	for ph, us := range cnt.phases {
		p.PhaseMS[ph] = us / 1000 / float64(steps)
	}
	if eps > 0 {
		p.MeanReward = cnt.rewards / float64(eps)
	}
	return p, nil
}

// worker owns one env: reset, step with the policy's agent until the
// episode ends, repeat, until ctx ends. It returns nil when ctx ends and an
// error only when the env cannot be reset at all.
func (b *runner) worker(ctx context.Context, c *Client, task api.TaskInfo, pol rollout.Policy, seed int64, cnt *rolloutCounters) error {
	env := ""
	defer func() {
		if env != "" {
			c.Close(context.WithoutCancel(ctx), env)
		}
	}()
	have := newHaveSet(32)
	obs := &api.Observe{Format: aci.FormatPNG}
	first := true
	for ep := int64(0); ctx.Err() == nil; ep++ {
		t0 := time.Now()
		rr, err := resetAll(ctx, c, &api.ResetRequest{Envs: []api.ResetEnv{{EnvID: env, Task: task.ID}}, Observe: obs, Have: have.list()})
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
		agent, err := pol.Start(ctx, task, seed<<20+ep)
		if err != nil {
			return err
		}
		turn := rollout.Turn{Task: task, EnvID: env, EpisodeID: res.EpisodeID, Obs: res.Obs}
		for ctx.Err() == nil {
			dec, err := agent.Act(ctx, turn)
			if err != nil {
				return err
			}
			se := api.StepEnv{EnvID: env, Actions: dec.Actions, Dialect: dec.Dialect, Coords: dec.Coords, Tokens: dec.Tokens}
			if dec.Text != "" {
				se.Text = &dec.Text
			}
			t0 := time.Now()
			rep, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{se}, Observe: obs, Have: have.list()})
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
				server := 0.0
				if res.Info != nil {
					for k, us := range res.Info.Timings {
						ph := strings.TrimSuffix(k, "_us")
						cnt.phases[ph] += float64(us)
						if ph == "act" || ph == "observe" || ph == "verify" {
							server += float64(us)
						}
					}
				}
				cnt.phases["http"] += max(0, float64(d.Microseconds())-server)
				cnt.mu.Unlock()
			}
			if res.Terminated || res.Truncated {
				if cnt.counting.Load() {
					cnt.episodes.Add(1)
					cnt.mu.Lock()
					cnt.rewards += res.Reward
					cnt.mu.Unlock()
				}
				if first {
					first = false
					cnt.firstDone.Add(1)
				}
				break
			}
			turn.Step++
			turn.Obs = res.Obs
			turn.LastError = nil
			if res.Info != nil {
				turn.LastError = res.Info.Error
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
