package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
)

// Lifecycle holds reset, fork, boot and memory figures.
type Lifecycle struct {
	Method      string  `json:"method"`
	Pool        int     `json:"pool"`
	BootSeconds float64 `json:"boot_seconds"`
	BootMethod  string  `json:"boot_method"`
	ResetCold   Timed   `json:"reset_cold"`
	ResetWarm   Timed   `json:"reset_warm"`
	WarmSpeedup float64 `json:"warm_speedup_p50"` // cold p50 / warm p50
	// Seeded is a warm reset that draws a new instance of a task family
	// each time, beside the fixed task's warm reset in the same loop.
	Seeded []SeededPoint `json:"seeded,omitempty"`
	Forks  []ForkPoint   `json:"forks"`
	Memory Memory        `json:"memory"`
}

// Timed is a latency distribution and how it was taken.
type Timed struct {
	Method string `json:"method"`
	Dist   Dist   `json:"latency"`
}

// SeededPoint compares, for one task family, a warm reset to a new seed
// each time with the fixed task's warm reset, alternated in one loop.
type SeededPoint struct {
	Task       string  `json:"task"`
	Method     string  `json:"method"`
	Fixed      Dist    `json:"fixed"`  // the fixed task's warm reset
	Seeded     Dist    `json:"seeded"` // the family's, a new seed each
	InstanceMS Dist    `json:"instance_ms"`
	Ratio      float64 `json:"ratio_p50"` // seeded p50 / fixed p50
	RatioP95   float64 `json:"ratio_p95"`
}

// seededTasks are the families the lifecycle measures seeded resets of:
// one that only puts files, one that opens its document in an app.
var seededTasks = []string{"xterm-count-lines", "mousepad-fix-config"}

// ForkPoint is the latency of POST /v1/fork for one n.
type ForkPoint struct {
	N          int     `json:"n"`
	Dist       Dist    `json:"latency"`
	PerReplica float64 `json:"ms_per_replica_p50"`
	Errors     int     `json:"errors,omitempty"`
}

// Memory is memory per sandbox, split by state.
type Memory struct {
	Method string   `json:"method"`
	Idle   MemPoint `json:"idle"`   // warm, not leased: Xvfb + openbox + guestd
	Leased MemPoint `json:"leased"` // leased, running the task's apps
}

// MemPoint is the mean memory of Sandboxes sandboxes, in MiB.
type MemPoint struct {
	Sandboxes int     `json:"sandboxes"`
	PSSMiB    float64 `json:"pss_mib_per_sandbox"`
	RSSMiB    float64 `json:"rss_mib_per_sandbox"`
	Procs     float64 `json:"procs_per_sandbox"`
}

func (b *runner) lifecycle(ctx context.Context) (*Lifecycle, error) {
	// The pool caps live sandboxes at 2*pool+8 and a fork does not evict
	// the warm general sandboxes, so a fork of n beside the pool, its
	// parent, the task's golden and replicas needs a pool of about n-3.
	pool := max(2, b.sz.forkNs[len(b.sz.forkNs)-1]-3)
	srv, err := b.startServer(ctx, pool, nil)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	c := srv.c
	out := &Lifecycle{Pool: pool, BootSeconds: srv.booted.Seconds(),
		Method:     fmt.Sprintf("one server, pool %d, shipped config; client wall time of each call from this process", pool),
		BootMethod: fmt.Sprintf("stack.Open until /v1/spec reports %d warm sandboxes (cold boots: Xvfb + openbox + guestd each)", pool),
	}

	// Cold: the first reset of a task on a fresh server, before any
	// checkpoint of it exists: lease, setup, checkpoint.
	ids := []string{b.opts.Task}
	for _, id := range b.tasks.IDs() {
		if len(ids) >= b.sz.coldTasks {
			break
		}
		if id != b.opts.Task {
			ids = append(ids, id)
		}
	}
	var cold []time.Duration
	var env string
	for _, id := range ids {
		t0 := time.Now()
		rr, err := reset(ctx, c, &api.ResetRequest{Envs: []api.ResetEnv{{Task: id}}})
		if err != nil {
			return nil, fmt.Errorf("cold reset %s: %w", id, err)
		}
		cold = append(cold, time.Since(t0))
		if id == b.opts.Task {
			env = rr.Results[0].EnvID
		} else {
			c.Close(ctx, rr.Results[0].EnvID)
		}
	}
	out.ResetCold = Timed{Dist: Summarize(cold), Method: fmt.Sprintf(
		"POST /v1/reset of a new env, first reset of each of %d tasks on a fresh server (no task checkpoint yet: lease + setup + checkpoint)", len(ids))}

	// Warm: restart the same env on the same task once the pool has a
	// pre-forked replica ready (the steady state a trainer sees).
	var warm []time.Duration
	for i := 0; i < b.sz.warmResets; i++ {
		srv.waitReplica(ctx, 20*time.Second)
		t0 := time.Now()
		if _, err := reset(ctx, c, &api.ResetRequest{Envs: []api.ResetEnv{{EnvID: env, Task: b.opts.Task}}}); err != nil {
			return nil, fmt.Errorf("warm reset: %w", err)
		}
		warm = append(warm, time.Since(t0))
	}
	out.ResetWarm = Timed{Dist: Summarize(warm), Method: "POST /v1/reset {env_id, task} restarting a live env on the same task, each after the pool reported a warm replica of the task's checkpoint (lease, no setup)"}
	out.WarmSpeedup = ratio(out.ResetCold.Dist.P50, out.ResetWarm.Dist.P50)
	for _, id := range seededTasks {
		if b.tasks[id] == nil || !b.tasks[id].Parameterized() {
			continue
		}
		sp, err := b.seeded(ctx, srv, env, id)
		if err != nil {
			return nil, fmt.Errorf("seeded resets of %s: %w", id, err)
		}
		out.Seeded = append(out.Seeded, *sp)
	}

	// Forks of the live env after one step, each after the pool refilled.
	if _, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: env,
		Action: &aci.Action{Verb: aci.Click, Target: aci.Px(clickX, clickY)}}}}); err != nil {
		return nil, err
	}
	var leasedMem []Mem
	for _, n := range b.sz.forkNs {
		fp := ForkPoint{N: n}
		var ds []time.Duration
		for rep := 0; rep < b.sz.forkReps; rep++ {
			srv.waitWarm(ctx, pool)
			t0 := time.Now()
			fr, err := fork(ctx, c, &api.ForkRequest{EnvID: env, N: n})
			d := time.Since(t0)
			if err != nil {
				fp.Errors++
				b.opts.Logf("bench: fork %d: %v", n, err)
				if fr != nil {
					c.Close(ctx, envIDs(fr)...)
				}
				continue
			}
			ds = append(ds, d)
			if rep == 0 && n == b.sz.forkNs[len(b.sz.forkNs)-1] {
				leasedMem = append(leasedMem, srv.envMemory(append(envIDs(fr), env))...)
			}
			c.Close(ctx, envIDs(fr)...)
		}
		fp.Dist = Summarize(ds)
		fp.PerReplica = fp.Dist.P50 / float64(n)
		out.Forks = append(out.Forks, fp)
	}

	// Memory: the leased sandboxes measured above, and every sandbox that is
	// not leased now (the warm pool and its replicas).
	srv.waitWarm(ctx, pool)
	leasedPIDs := map[int]bool{}
	for _, pid := range srv.envInitPIDs([]string{env}) {
		leasedPIDs[pid] = true
	}
	var idle []Mem
	for _, pid := range sandboxInits() {
		if !leasedPIDs[pid] {
			idle = append(idle, TreeMemory(pid))
		}
	}
	out.Memory = Memory{
		Method: "sum over each sandbox's process tree (its init, guestd, Xvfb, openbox, apps) of Pss and Rss from /proc/<pid>/smaps_rollup; Pss divides shared pages among their sharers, Rss counts them in full",
		Idle:   memPoint(idle), Leased: memPoint(leasedMem),
	}
	return out, nil
}

// seeded alternates, warmResets times, a warm reset of env (the fixed
// task) with a warm reset of another env to a new seed of family id, each
// once the pool holds a warm replica of that golden.
func (b *runner) seeded(ctx context.Context, srv *server, env, id string) (*SeededPoint, error) {
	c := srv.c
	seed := int64(0)
	rr, err := reset(ctx, c, &api.ResetRequest{Envs: []api.ResetEnv{{Task: id, Seed: &seed}}})
	if err != nil {
		return nil, err
	}
	senv := rr.Results[0].EnvID
	defer c.Close(ctx, senv)
	var fixed, seeded, inst []time.Duration
	n := 3 * b.sz.warmResets // resets of a few ms: more pairs than the warm row
	for i := 0; i < n; i++ {
		seed := int64(i + 1)
		for _, run := range []struct {
			env, task string
			seed      *int64
			into      *[]time.Duration
		}{{env, b.opts.Task, nil, &fixed}, {senv, id, &seed, &seeded}} {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			_ = srv.st.Pool.WaitReplicas(wctx, run.task, 1)
			cancel()
			t0 := time.Now()
			rr, err := reset(ctx, c, &api.ResetRequest{Envs: []api.ResetEnv{{EnvID: run.env, Task: run.task, Seed: run.seed}}})
			if err != nil {
				return nil, err
			}
			*run.into = append(*run.into, time.Since(t0))
			if run.seed != nil && rr.Results[0].Info != nil {
				inst = append(inst, time.Duration(rr.Results[0].Info.Timings["instance_us"])*time.Microsecond)
			}
		}
	}
	p := &SeededPoint{Task: id, Fixed: Summarize(fixed), Seeded: Summarize(seeded), InstanceMS: Summarize(inst),
		Method: fmt.Sprintf("POST /v1/reset {env_id, task, seed} of %s to seeds 1..%d, alternated with POST /v1/reset {env_id, task} of %s, each after the pool held a warm replica of that task's golden; instance_ms is the server's instance_us (the instance's own setup steps)", id, n, b.opts.Task)}
	p.Ratio = ratio(p.Seeded.P50, p.Fixed.P50)
	p.RatioP95 = ratio(p.Seeded.P95, p.Fixed.P95)
	return p, nil
}

func envIDs(r *api.BatchReply) []string {
	var ids []string
	for _, res := range r.Results {
		if res.EnvID != "" {
			ids = append(ids, res.EnvID)
		}
	}
	return ids
}

func memPoint(ms []Mem) MemPoint {
	if len(ms) == 0 {
		return MemPoint{}
	}
	var p MemPoint
	for _, m := range ms {
		p.PSSMiB += float64(m.PSS)
		p.RSSMiB += float64(m.RSS)
		p.Procs += float64(m.Procs)
	}
	n := float64(len(ms))
	p.Sandboxes = len(ms)
	p.PSSMiB /= n * (1 << 20)
	p.RSSMiB /= n * (1 << 20)
	p.Procs /= n
	return p
}

// initPIDer is the process provider's view of a sandbox's host pid.
type initPIDer interface{ InitPID(id string) int }

// envInitPIDs maps envs to the host pids of their sandboxes' inits (process
// provider only; other providers yield none).
func (s *server) envInitPIDs(envs []string) []int {
	p, ok := s.st.Provider.(initPIDer)
	if !ok {
		return nil
	}
	var pids []int
	for _, e := range envs {
		if id, ok := s.st.Server.EnvSandbox(e); ok {
			if pid := p.InitPID(id); pid > 0 {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// envMemory measures the sandboxes of envs.
func (s *server) envMemory(envs []string) []Mem {
	var ms []Mem
	for _, pid := range s.envInitPIDs(envs) {
		ms = append(ms, TreeMemory(pid))
	}
	return ms
}

// sandboxInits lists this process's children that are process-provider
// sandbox inits: they run guestd (the init execs it) or live in a pid
// namespace of their own.
func sandboxInits() []int {
	myNS, _ := os.Readlink("/proc/self/ns/pid")
	me := os.Getpid()
	var out []int
	for _, p := range allProcs() {
		if p.ppid != me {
			continue
		}
		dir := filepath.Join("/proc", strconv.Itoa(p.pid))
		exe, _ := os.Readlink(filepath.Join(dir, "exe"))
		ns, _ := os.Readlink(filepath.Join(dir, "ns", "pid"))
		if filepath.Base(exe) == "guestd" || (ns != "" && ns != myNS) {
			out = append(out, p.pid)
		}
	}
	return out
}

// waitReplica waits (at most d) until the pool reports a warm replica.
func (s *server) waitReplica(ctx context.Context, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		m, err := s.c.Metrics(ctx)
		if err == nil && m[`shinken_pool_sandboxes{state="replica"}`] >= 1 {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}
