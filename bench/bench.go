// Package bench produces Shinken's throughput numbers on the machine it runs
// on: step latency per observation mode beside an xdotool+scrot baseline,
// rollout throughput over pool sizes, reset/fork latency, memory per sandbox
// and bytes on the wire with and without frame dedup. Every scenario drives
// real servers (envserver/stack with the process provider) over real HTTP on
// loopback, every ratio is taken between figures of the same run, and each
// figure carries a line saying how it was measured.
//
// Run executes the scenarios and returns a Report; WriteReport renders it as
// JSON, Markdown and SVG charts. cmd/bench is the command-line front end.
package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api/client"
	"github.com/shinken-rl/shinken/envserver/stack"
)

// Options configure a run. The zero value plus GuestdPath is a full run.
type Options struct {
	Quick      bool   // the small set: pool sizes 1,2,4, few steps (CI smoke run)
	GuestdPath string // guestd binary; "" means next to the executable, else PATH
	Task       string // task for latency, throughput and forks; default xterm-hello-file
	// Scenarios limits the run to these names (latency, throughput,
	// lifecycle, dedup); empty runs all.
	Scenarios []string
	// Pools overrides the pool sizes of the throughput scenario.
	Pools []int
	// ResetMode is the servers' reset mode (inplace or reboot; "" the
	// shipped config's): run once per mode to compare them.
	ResetMode string
	Logf      func(format string, args ...any) // progress; default discards
	// ServerLogf receives the servers' own logs; default discards.
	ServerLogf func(format string, args ...any)
	// Envserver is the envserver binary the stepcost scenario runs; ""
	// means next to the executable, else PATH. BaselineEnvserver, when
	// set, is measured too in the same run (e.g. a build of an older
	// revision, with its own guestd beside it).
	Envserver         string
	BaselineEnvserver string
	// Episodes is how many episodes the integrity scenario plays (default
	// 1000; quick 24).
	Episodes int
	// DensityTask, DensityN, DensityHold and DensityBatch configure the
	// density scenario: N live episodes of the task (default
	// shop-buy-cheapest, 48), reset in batches of DensityBatch (8), held
	// while each steps once per 3 s for DensityHold (60 s).
	DensityTask  string
	DensityN     int
	DensityHold  time.Duration
	DensityBatch int
	// Apps limits the apps scenario to these rows (xterm, mousepad,
	// chromium, calc, writer); empty measures all.
	Apps []string
}

// Scenarios lists every scenario name in the order Run executes them.
// integrity, apps and density run only when named: the first plays a
// thousand hostile episodes, the others run browsers and office suites
// for minutes.
var Scenarios = []string{"lifecycle", "latency", "dedup", "stepcost", "throughput", "integrity", "apps", "density"}

// onlyNamed are the scenarios a run without -scenarios leaves out.
var onlyNamed = []string{"integrity", "apps", "density"}

const defaultTask = "xterm-hello-file"

// sizes holds the per-run knobs that differ between quick and full runs.
type sizes struct {
	latencySteps  int           // steps per mode and baseline
	pools         []int         // throughput pool sizes
	window        time.Duration // throughput measurement window per point
	warmup        time.Duration // throughput warm-up per point, not counted
	coldTasks     int           // distinct tasks reset cold
	warmResets    int           // warm resets measured
	forkNs        []int         // fork sizes
	forkReps      int           // forks per size
	dedupReplicas int           // forked replicas stepped in lockstep
	dedupSteps    int           // steps per dedup configuration
	costSteps     int           // measured steps per format of the stepcost scenario
	costWarmup    int           // unmeasured steps before them
	appResets     int           // apps: in-place resets per app
	appSteps      int           // apps: settled steps per action kind
	appSlow       int           // apps: OSWorld-way rounds per action kind
	appExecs      int           // apps: xdotool+scrot rounds per action kind
}

func sizesFor(quick bool) sizes {
	if quick {
		return sizes{latencySteps: 15, pools: []int{1, 2, 4}, window: 3 * time.Second, warmup: time.Second,
			coldTasks: 1, warmResets: 3, forkNs: []int{1, 4}, forkReps: 1, dedupReplicas: 2, dedupSteps: 4, costSteps: 12, costWarmup: 3,
			appResets: 2, appSteps: 3, appSlow: 1, appExecs: 3}
	}
	return sizes{latencySteps: 200, pools: []int{1, 2, 4, 8, 16, 32}, window: 20 * time.Second, warmup: 3 * time.Second,
		coldTasks: 4, warmResets: 12, forkNs: []int{1, 4, 8, 16}, forkReps: 3, dedupReplicas: 8, dedupSteps: 12, costSteps: 150, costWarmup: 10,
		appResets: 10, appSteps: 20, appSlow: 5, appExecs: 20}
}

// Report is everything a run measured. Sections of scenarios that were not
// run, or failed, are nil; failures are listed in Errors.
type Report struct {
	Version    int         `json:"version"`
	StartedAt  time.Time   `json:"started_at"`
	Seconds    float64     `json:"seconds"`
	Quick      bool        `json:"quick"`
	Machine    Machine     `json:"machine"`
	Server     ServerInfo  `json:"server"`
	Latency    *Latency    `json:"latency,omitempty"`
	Throughput *Throughput `json:"throughput,omitempty"`
	Lifecycle  *Lifecycle  `json:"lifecycle,omitempty"`
	Dedup      *Dedup      `json:"dedup,omitempty"`
	StepCost   *StepCost   `json:"stepcost,omitempty"`
	Integrity  *Integrity  `json:"integrity,omitempty"`
	Apps       *Apps       `json:"apps,omitempty"`
	Density    *Density    `json:"density,omitempty"`
	Errors     []string    `json:"errors,omitempty"`
}

// ReportVersion is the JSON report's schema version.
const ReportVersion = 1

// Machine describes where the numbers were taken.
type Machine struct {
	Hostname string  `json:"hostname"`
	OS       string  `json:"os"`
	Arch     string  `json:"arch"`
	CPUs     int     `json:"cpus"`
	CPUModel string  `json:"cpu_model,omitempty"`
	MemBytes int64   `json:"mem_bytes"`
	Kernel   string  `json:"kernel,omitempty"`
	Load1    float64 `json:"load1_at_start"`
	Go       string  `json:"go"`
}

// ServerInfo is how the servers under test were configured.
type ServerInfo struct {
	Provider     string `json:"provider"`
	SnapshotKind string `json:"snapshot_kind"`
	Confined     bool   `json:"confined"`
	Screen       string `json:"screen"`
	Task         string `json:"task"`
	Config       string `json:"config"`
	ResetMode    string `json:"reset_mode,omitempty"`
}

// Run executes the selected scenarios and returns their report. A scenario
// that fails is recorded in Report.Errors and the others still run; Run
// returns an error only when ctx ends or nothing could be measured.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.ServerLogf == nil {
		opts.ServerLogf = func(string, ...any) {}
	}
	if opts.Task == "" {
		opts.Task = defaultTask
	}
	if opts.DensityTask == "" {
		opts.DensityTask = DefaultDensityTask
	}
	tasks, err := configs.LoadTasks("")
	if err != nil {
		return nil, err
	}
	if tasks[opts.Task] == nil {
		return nil, fmt.Errorf("bench: unknown task %q", opts.Task)
	}
	sz := sizesFor(opts.Quick)
	if len(opts.Pools) > 0 {
		sz.pools = opts.Pools
	}
	cfg, err := configs.LoadServer("")
	if err != nil {
		return nil, err
	}
	r := &Report{
		Version: ReportVersion, StartedAt: time.Now().UTC(), Quick: opts.Quick, Machine: machine(),
		Server: ServerInfo{Screen: cfg.Screen, Task: opts.Task, ResetMode: cmp.Or(opts.ResetMode, cfg.ResetMode),
			Config: "shipped configs/envserver.json; per server: state in a temp dir, listen 127.0.0.1:0, pool as stated"},
	}
	dir, err := os.MkdirTemp("", "shinken-bench-tasks-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := writeTasks(dir, tasks, opts.Task); err != nil {
		return nil, err
	}
	if err := writeIntegrityTask(dir, tasks); err != nil {
		return nil, err
	}
	if selected(opts.Scenarios, "density") && len(opts.Scenarios) > 0 && tasks[opts.DensityTask] == nil {
		return nil, fmt.Errorf("bench: unknown density task %q", opts.DensityTask)
	}
	if err := writeAppCopies(dir, tasks, appTasks(tasks, opts.DensityTask)); err != nil {
		return nil, err
	}
	b := &runner{opts: opts, sz: sz, tasks: tasks, taskDir: dir, report: r}
	start := time.Now()
	for _, name := range Scenarios {
		if !selected(opts.Scenarios, name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return r, err
		}
		if contains(onlyNamed, name) && len(opts.Scenarios) == 0 {
			continue
		}
		if name == "stepcost" && len(opts.Scenarios) == 0 && opts.Envserver == "" {
			if _, err := exec.LookPath(siblingBinary("envserver")); err != nil {
				opts.Logf("bench: stepcost skipped: no envserver binary next to bench or on PATH (make build puts one there)")
				continue
			}
		}
		opts.Logf("bench: %s ...", name)
		t0 := time.Now()
		var err error
		switch name {
		case "lifecycle":
			r.Lifecycle, err = b.lifecycle(ctx)
		case "latency":
			r.Latency, err = b.latency(ctx)
		case "dedup":
			r.Dedup, err = b.dedup(ctx)
		case "throughput":
			r.Throughput, err = b.throughput(ctx)
		case "stepcost":
			r.StepCost, err = b.stepCost(ctx)
		case "integrity":
			r.Integrity, err = b.integrity(ctx)
		case "apps":
			r.Apps, err = b.apps(ctx)
		case "density":
			r.Density, err = b.density(ctx)
		}
		if err != nil {
			opts.Logf("bench: %s failed: %v", name, err)
			r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", name, err))
		} else {
			opts.Logf("bench: %s done in %.1fs", name, time.Since(t0).Seconds())
		}
	}
	r.Seconds = time.Since(start).Seconds()
	if r.Latency == nil && r.Throughput == nil && r.Lifecycle == nil && r.Dedup == nil && r.StepCost == nil && r.Integrity == nil && r.Apps == nil && r.Density == nil {
		return r, fmt.Errorf("bench: every scenario failed: %s", strings.Join(r.Errors, "; "))
	}
	return r, ctx.Err()
}

func selected(names []string, name string) bool {
	if len(names) == 0 {
		return true
	}
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// runner carries a run's shared state through the scenarios.
type runner struct {
	opts    Options
	sz      sizes
	tasks   configs.Tasks
	taskDir string // the shipped suite plus longTask
	report  *Report
}

// server is one envserver stack started by bench, with a client for it.
type server struct {
	st     *stack.Stack
	c      *client.Client
	state  string
	booted time.Duration // from Open to the pool reporting its warm sandboxes
}

// startServer opens a stack with the shipped config and a pool of n, serves
// it on a loopback port and waits until the pool reports n warm sandboxes.
func (b *runner) startServer(ctx context.Context, n int, edit func(*configs.Server)) (_ *server, err error) {
	cfg, err := configs.LoadServer("")
	if err != nil {
		return nil, err
	}
	state, err := os.MkdirTemp("", "shinken-bench-")
	if err != nil {
		return nil, err
	}
	cfg.State = state
	cfg.Listen = "127.0.0.1:0"
	cfg.Pool = n
	cfg.Tasks = b.taskDir
	cfg.AllowUnchecked = true // the bench measures the server, not the tasks
	if b.opts.ResetMode != "" {
		cfg.ResetMode = b.opts.ResetMode
	}
	if edit != nil {
		edit(cfg)
	}
	t0 := time.Now()
	octx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	st, err := stack.Open(octx, cfg, stack.Options{GuestdPath: b.opts.GuestdPath, Logf: b.opts.ServerLogf})
	if err != nil {
		os.RemoveAll(state)
		return nil, fmt.Errorf("start server (pool %d): %w", n, err)
	}
	s := &server{st: st, state: state}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := st.Serve(cfg.Listen, cfg.Token); err != nil {
		return nil, err
	}
	s.c = client.New(st.URL, cfg.Token, nil)
	if err := s.waitWarm(octx, n); err != nil {
		return nil, err
	}
	s.booted = time.Since(t0)
	caps := st.Pool.Capabilities()
	b.report.Server.Provider, b.report.Server.SnapshotKind, b.report.Server.Confined = caps.Provider, caps.SnapshotKind, caps.Confined
	return s, nil
}

// waitWarm polls /v1/spec until the pool holds n warm sandboxes.
func (s *server) waitWarm(ctx context.Context, n int) error {
	for {
		sp, err := s.c.Spec(ctx)
		if err != nil {
			return err
		}
		if sp.Pool.Warm >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pool of %d: only %d warm: %w", n, sp.Pool.Warm, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// close stops the server and every sandbox, and removes its state.
func (s *server) close() {
	if s.c != nil {
		s.c.CloseIdle()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s.st.Close(ctx)
	os.RemoveAll(s.state)
}

// machine describes this host.
func machine() Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), MemBytes: MemTotal(), Go: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Sscanf(string(b), "%f", &m.Load1)
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// longTask is a copy of the bench task with a step budget that latency and
// dedup runs never reach, so one episode carries all their steps.
const longTask = "bench-long"

// writeTasks writes the suite into dir, plus longTask copied from base.
func writeTasks(dir string, tasks configs.Tasks, base string) error {
	long := *tasks[base]
	long.ID = longTask
	long.MaxSteps = 1 << 30
	all := []*configs.Task{&long}
	for _, id := range tasks.IDs() {
		all = append(all, tasks[id])
	}
	for _, t := range all {
		b, err := json.MarshalIndent(t, "", "  ")
		if err != nil {
			return fmt.Errorf("task %s: %w", t.ID, err)
		}
		if err := os.WriteFile(filepath.Join(dir, t.ID+".json"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
