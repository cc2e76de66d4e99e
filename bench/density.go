package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/api/client"
)

// Density is the density scenario: N live episodes of one task held at
// once on one server, each stepping slowly the way a trainer's policy
// does, and what holding them costs the host.
type Density struct {
	Method  string  `json:"method"`
	Task    string  `json:"task"`
	N       int     `json:"n"`
	Pool    int     `json:"pool"`
	Batch   int     `json:"batch"`
	PeriodS float64 `json:"step_period_s"`
	HoldS   float64 `json:"hold_s"`

	BootS   float64 `json:"boot_s"`     // server start until the pool is warm
	BootCPU float64 `json:"boot_cpu_s"` // bench's tree meanwhile

	ResetOK     int            `json:"reset_ok"`
	ResetFailed int            `json:"reset_failed"`
	ResetErrors map[string]int `json:"reset_errors,omitempty"` // by error code
	FirstError  string         `json:"first_reset_error,omitempty"`
	BurstS      float64        `json:"burst_s"`     // every batch, one after the other
	BatchWall   Dist           `json:"batch_wall"`  // each batch's POST /v1/reset
	ResetCPU    float64        `json:"reset_cpu_s"` // bench's tree during the burst
	ResetHost   float64        `json:"reset_host_cpu_s"`
	RefillS     float64        `json:"refill_s"` // waiting for the pool's refills before the hold
	RefillNote  string         `json:"refill_note,omitempty"`

	Steps      int            `json:"steps"`
	Expected   int            `json:"steps_expected"` // one per env per period
	StepErrors int            `json:"step_errors"`
	ErrorKinds map[string]int `json:"step_error_kinds,omitempty"`
	Step       Dist           `json:"step_latency"`
	Settle     SettleMix      `json:"settle"`
	HoldCPU    float64        `json:"hold_cpu_s"`      // bench's tree during the hold
	HoldHost   float64        `json:"hold_host_cpu_s"` // the whole host's busy CPU during the hold
	Load1      [2]float64     `json:"load1_hold"`      // load average at the hold's start and end

	Desktops      int     `json:"desktops_measured"`   // leased desktops measured
	PSSPerDesktop float64 `json:"pss_mib_per_desktop"` // mean over the leased desktops
	RSSPerDesktop float64 `json:"rss_mib_per_desktop"`
	Sandboxes     int     `json:"sandboxes"`     // every sandbox alive (leased, warm, replicas)
	TotalPSSMiB   float64 `json:"total_pss_mib"` // over them all
	ServerPSSMiB  float64 `json:"server_pss_mib"`

	MemAvailStartMiB float64 `json:"mem_available_start_mib"`
	MemAvailMinMiB   float64 `json:"mem_available_min_mib"`
	MemAvailMinAt    string  `json:"mem_available_min_phase"`
	MemAvailEndMiB   float64 `json:"mem_available_end_mib"` // at the end of the hold
}

// Density defaults.
const (
	DefaultDensityTask  = "shop-buy-cheapest"
	DefaultDensityN     = 48
	DefaultDensityHold  = 60 * time.Second
	DefaultDensityBatch = 8
	densityPeriod       = 3 * time.Second
	refillLimit         = 2 * time.Minute
)

func (b *runner) density(ctx context.Context) (*Density, error) {
	task, n, hold, batch := b.opts.DensityTask, b.opts.DensityN, b.opts.DensityHold, b.opts.DensityBatch
	if task == "" {
		task = DefaultDensityTask
	}
	if n <= 0 {
		n = DefaultDensityN
	}
	if hold <= 0 {
		hold = DefaultDensityHold
	}
	if batch <= 0 {
		batch = DefaultDensityBatch
	}
	t := b.tasks[task]
	if t == nil {
		return nil, fmt.Errorf("unknown task %q", task)
	}
	id := appCopy(task)
	at := clickFor(t)
	out := &Density{Task: task, N: n, Pool: n, Batch: batch, PeriodS: densityPeriod.Seconds(), HoldS: hold.Seconds(),
		ResetErrors: map[string]int{}, ErrorKinds: map[string]int{},
		Method: fmt.Sprintf("one server (shipped config, pool %d) and bench's copy of %s (the family with an unbounded step budget); "+
			"N envs reset through POST /v1/reset in batches of %d, one batch after the other, seeds 0..N-1; once the pool's refills are done (at most %s), "+
			"every env steps once per %s for %s, envs spread evenly over the period, alternately a click at (%d,%d) and the key Escape, observe png settled by the server's default, have = the env's last frame; "+
			"latency is each step's client wall time; CPU from /proc (bench's tree: client, in-process server, sandboxes; host: /proc/stat, other users' load included); "+
			"memory: each leased desktop's sandbox tree and every sandbox's, from smaps_rollup after the hold; MemAvailable sampled every 500 ms",
			n, task, batch, refillLimit, densityPeriod, hold, at[0], at[1]),
	}
	mw := startMemWatch(500 * time.Millisecond)
	defer mw.stop()
	out.MemAvailStartMiB = mib(mw.start)

	mw.setPhase("boot")
	cpu := StartCPUSampler(os.Getpid(), 250*time.Millisecond)
	srv, err := b.startServer(ctx, n, nil)
	out.BootCPU = cpu.Stop()
	if err != nil {
		return nil, err
	}
	defer srv.close()
	out.BootS = srv.booted.Seconds()
	c := srv.c

	// The burst, in batches.
	mw.setPhase("resets")
	var envs, all []string
	var walls []time.Duration
	cpu = StartCPUSampler(os.Getpid(), 250*time.Millisecond)
	host0, t0 := HostCPUSeconds(), time.Now()
	for start := 0; start < n; start += batch {
		k := min(batch, n-start)
		req := &api.ResetRequest{}
		for i := start; i < start+k; i++ {
			re := api.ResetEnv{Task: id}
			if t.Parameterized() {
				s := int64(i)
				re.Seed = &s
			}
			req.Envs = append(req.Envs, re)
		}
		b.opts.Logf("bench: density: resetting envs %d..%d of %d", start+1, start+k, n)
		tb := time.Now()
		rep, err := c.Reset(ctx, req)
		walls = append(walls, time.Since(tb))
		if err != nil {
			if ctx.Err() != nil {
				cpu.Stop()
				return nil, ctx.Err()
			}
			out.ResetFailed += k
			out.ResetErrors[errKind(err)] += k
			if out.FirstError == "" {
				out.FirstError = err.Error()
			}
			continue
		}
		for _, res := range rep.Results {
			if res.EnvID != "" {
				all = append(all, res.EnvID)
			}
			if res.Error != nil {
				out.ResetFailed++
				out.ResetErrors[errKind(res.Error)]++
				if out.FirstError == "" {
					out.FirstError = res.Error.Error()
				}
				continue
			}
			out.ResetOK++
			envs = append(envs, res.EnvID)
		}
		out.ResetFailed += max(0, k-len(rep.Results))
	}
	out.BurstS = time.Since(t0).Seconds()
	out.ResetCPU, out.ResetHost = cpu.Stop(), HostCPUSeconds()-host0
	out.BatchWall = Summarize(walls)
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		c.Close(cctx, all...)
	}()
	if len(envs) == 0 {
		return out, fmt.Errorf("no env reset (%s)", out.FirstError)
	}

	// Let the pool's refills finish so that the hold measures steady state.
	mw.setPhase("refill")
	tr := time.Now()
	if !srv.waitIdle(ctx, n, refillLimit) {
		out.RefillNote = fmt.Sprintf("the pool was still refilling after %s; the hold started anyway", refillLimit)
	}
	out.RefillS = time.Since(tr).Seconds()

	// The hold.
	mw.setPhase("hold")
	out.Load1[0] = load1()
	hc := newHoldCounters()
	cpu = StartCPUSampler(os.Getpid(), 250*time.Millisecond)
	host0, t0 = HostCPUSeconds(), time.Now()
	hctx, cancel := context.WithTimeout(ctx, hold)
	var wg sync.WaitGroup
	for i, env := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offset := densityPeriod * time.Duration(i) / time.Duration(len(envs))
			hc.stepper(hctx, c, env, offset, at)
		}()
	}
	wg.Wait()
	cancel()
	out.HoldCPU, out.HoldHost = cpu.Stop(), HostCPUSeconds()-host0
	held := time.Since(t0)
	out.HoldS = held.Seconds()
	out.Load1[1] = load1()
	out.MemAvailEndMiB = mib(memAvailable())
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out.Steps, out.StepErrors, out.ErrorKinds, out.Settle = len(hc.lat), hc.errors, hc.kinds, hc.settle
	out.Step = Summarize(hc.lat)
	out.Expected = expectedSteps(len(envs), hold, densityPeriod)

	// Memory, once the steps are over.
	mw.setPhase("measure")
	mems := srv.envMemory(envs)
	var pss, rss int64
	for _, m := range mems {
		pss, rss = pss+m.PSS, rss+m.RSS
	}
	if len(mems) > 0 {
		out.Desktops = len(mems)
		out.PSSPerDesktop, out.RSSPerDesktop = mib(pss)/float64(len(mems)), mib(rss)/float64(len(mems))
	}
	var total int64
	inits := sandboxInits()
	for _, pid := range inits {
		total += TreeMemory(pid).PSS
	}
	out.Sandboxes, out.TotalPSSMiB = len(inits), mib(total)
	_, self := procMem(os.Getpid())
	out.ServerPSSMiB = mib(self)
	out.MemAvailMinMiB, out.MemAvailMinAt = mib(mw.min()), mw.minPhase()
	return out, nil
}

// expectedSteps is how many steps envs steppers start within hold when
// each steps once per period from its offset (stepper's schedule).
func expectedSteps(envs int, hold, period time.Duration) int {
	total := 0
	for i := 0; i < envs; i++ {
		off := period * time.Duration(i) / time.Duration(envs)
		if hold > off {
			total += int((hold - off + period - 1) / period)
		}
	}
	return total
}

// clickFor is where the density steps click for t: the app's neutral
// point when t is one of the apps scenario's kinds, else the screen's
// middle.
func clickFor(t *configs.Task) [2]int {
	for _, k := range appKinds {
		if k.Match(t) {
			return k.Click
		}
	}
	return [2]int{640, 400}
}

// waitIdle waits (at most d) until the pool boots and resets nothing and
// holds n warm sandboxes.
func (s *server) waitIdle(ctx context.Context, n int, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		st := s.st.Pool.Stats()
		if st.Booting == 0 && st.Resetting == 0 && st.Warm >= n {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// holdCounters collect the hold's steps from every env's stepper.
type holdCounters struct {
	mu     sync.Mutex
	lat    []time.Duration
	errors int
	kinds  map[string]int
	settle SettleMix
}

func newHoldCounters() *holdCounters { return &holdCounters{kinds: map[string]int{}} }

// stepper steps env once per densityPeriod, starting offset into the
// hold, until ctx ends; a step still running when its next one is due
// delays it (the ticker drops the tick).
func (h *holdCounters) stepper(ctx context.Context, c *client.Client, env string, offset time.Duration, at [2]int) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(offset):
	}
	tick := time.NewTicker(densityPeriod)
	defer tick.Stop()
	last := ""
	end, _ := ctx.Deadline() // the hold's end, also where ctx's own timer fires late
	for k := 0; ctx.Err() == nil && (end.IsZero() || time.Now().Before(end)); k++ {
		a := aci.Action{Verb: aci.Click, Target: aci.Px(float64(at[0]), float64(at[1]))}
		if k%2 == 1 {
			a = aci.Action{Verb: aci.Key, Keys: "Escape"}
		}
		req := &api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &a}}, Observe: &api.Observe{Format: aci.FormatPNG}}
		if last != "" {
			req.Have = []string{last}
		}
		t0 := time.Now()
		// The step runs to its end even when the hold ends meanwhile: a
		// step cut short by bench is not the server's error.
		rep, err := c.Step(context.WithoutCancel(ctx), req)
		d := time.Since(t0)
		var res *api.Result
		if err == nil {
			if err = client.FirstError(rep, 1); err == nil {
				res = &rep.Results[0]
				if res.Info != nil && res.Info.Error != nil {
					err = res.Info.Error
				}
			}
		}
		h.mu.Lock()
		if err != nil {
			h.errors++
			h.kinds[errKind(err)]++
		} else {
			h.lat = append(h.lat, d)
			if res.Info != nil {
				h.settle.Add(res.Info.Settle)
			}
			if res.Obs != nil {
				last = res.Obs.Frame
			}
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// errKind names an error for counting: its wire code, else what the
// transport said in a word.
func errKind(err error) string {
	var ae *aci.Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ae):
		return string(ae.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return "client_timeout"
	default:
		return "transport"
	}
}

// memWatch samples the host's MemAvailable and remembers its minimum and
// the phase it fell in.
type memWatch struct {
	start int64
	mu    sync.Mutex
	phase string
	low   int64
	lowAt string
	done  chan struct{}
	wg    sync.WaitGroup
}

func startMemWatch(every time.Duration) *memWatch {
	m := &memWatch{start: memAvailable(), phase: "start", done: make(chan struct{})}
	m.low, m.lowAt = m.start, "start"
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-t.C:
				m.sample()
			}
		}
	}()
	return m
}

func (m *memWatch) sample() {
	v := memAvailable()
	m.mu.Lock()
	defer m.mu.Unlock()
	if v > 0 && (m.low <= 0 || v < m.low) {
		m.low, m.lowAt = v, m.phase
	}
}

func (m *memWatch) setPhase(p string) {
	m.sample()
	m.mu.Lock()
	m.phase = p
	m.mu.Unlock()
}

func (m *memWatch) min() int64 {
	m.sample()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.low
}

func (m *memWatch) minPhase() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lowAt
}

func (m *memWatch) stop() {
	select {
	case <-m.done:
	default:
		close(m.done)
	}
	m.wg.Wait()
}

// memAvailable is the host's MemAvailable in bytes (0 when unreadable).
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return meminfoField(b, "MemAvailable")
}

// meminfoField parses one "Key:   123 kB" line of /proc/meminfo into
// bytes; 0 when absent.
func meminfoField(b []byte, key string) int64 {
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || string(bytes.TrimSpace(k)) != key {
			continue
		}
		f := strings.Fields(string(v))
		if len(f) == 0 {
			return 0
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0
		}
		if len(f) > 1 && strings.EqualFold(f[1], "kB") {
			n <<= 10
		}
		return n
	}
	return 0
}

func load1() float64 {
	var l float64
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscanf(string(b), "%f", &l)
	}
	return l
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// kinds renders counts by kind, e.g. "pool_exhausted 3, timeout 1".
func kinds(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// densityTables renders the scenario's tables (Markdown, also readable on
// a terminal).
func densityTables(d *Density) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d live episodes of %s, pool %d, resets in batches of %d; each env steps once per %.0f s for %.0f s:\n\n",
		d.N, d.Task, d.Pool, d.Batch, d.PeriodS, d.HoldS)
	sb.WriteString("| envs reset ok | failed (by code) | burst wall s | batch wall p50 / max s | reset CPU s, tree / host (tree per env) | server boot s (CPU s) | refill wait s |\n|---:|---|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&sb, "| %d of %d | %d (%s) | %.1f | %.1f / %.1f | %.1f / %.1f (%.2f) | %.1f (%.1f) | %.1f |\n",
		d.ResetOK, d.N, d.ResetFailed, kinds(d.ResetErrors), d.BurstS, d.BatchWall.P50/1000, d.BatchWall.Max/1000,
		d.ResetCPU, d.ResetHost, ratio(d.ResetCPU, float64(d.ResetOK)), d.BootS, d.BootCPU, d.RefillS)
	holdS := max(d.HoldS, 1)
	sb.WriteString("\n| steps (expected) | errored (by code) | step p50 / p95 / max ms | settle outcome | CPU cores used, tree / host | load1 start / end |\n|---:|---|---:|---|---:|---:|\n")
	fmt.Fprintf(&sb, "| %d (%d) | %d (%s) | %.0f / %.0f / %.0f | %s | %.2f / %.2f | %.1f / %.1f |\n",
		d.Steps, d.Expected, d.StepErrors, kinds(d.ErrorKinds), d.Step.P50, d.Step.P95, d.Step.Max, d.Settle,
		d.HoldCPU/holdS, d.HoldHost/holdS, d.Load1[0], d.Load1[1])
	sb.WriteString("\n| PSS per leased desktop MiB (RSS) | desktops measured | sandboxes alive | total PSS of sandboxes GiB | server process PSS MiB | MemAvailable start / lowest (phase) / end GiB |\n|---:|---:|---:|---:|---:|---:|\n")
	fmt.Fprintf(&sb, "| %.1f (%.1f) | %d | %d | %.2f | %.0f | %.2f / %.2f (%s) / %.2f |\n",
		d.PSSPerDesktop, d.RSSPerDesktop, d.Desktops, d.Sandboxes, d.TotalPSSMiB/1024, d.ServerPSSMiB,
		d.MemAvailStartMiB/1024, d.MemAvailMinMiB/1024, d.MemAvailMinAt, d.MemAvailEndMiB/1024)
	if d.FirstError != "" {
		fmt.Fprintf(&sb, "\nFirst reset error: %s\n", d.FirstError)
	}
	if d.RefillNote != "" {
		fmt.Fprintf(&sb, "\n%s\n", d.RefillNote)
	}
	return sb.String()
}

// densityMarkdown is the scenario's section of report.md.
func densityMarkdown(d *Density) string {
	var sb strings.Builder
	sb.WriteString("## Density\n\n")
	fmt.Fprintf(&sb, "How: %s.\n\n", d.Method)
	sb.WriteString(densityTables(d))
	sb.WriteString("\n*CPU cores used*: CPU-seconds during the hold over its length. *expected steps*: one per env per period over the hold; fewer means steps took longer than the period. *sandboxes alive* counts leased desktops, the warm pool and the golden's replicas.\n\n")
	return sb.String()
}
