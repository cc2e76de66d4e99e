package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/api/client"
)

// StepCost is the CPU one changed step costs the whole server process tree
// (envserver, guestd, Xvfb, the apps), per observation format, for this
// build and, when given, a baseline envserver binary measured in the same
// run.
type StepCost struct {
	Method string        `json:"method"`
	Steps  int           `json:"steps_per_format"`
	Runs   []StepCostRun `json:"runs"`
}

// StepCostRun is one server binary stepping in one format.
type StepCostRun struct {
	Server string `json:"server"` // "this build" or "baseline"
	Binary string `json:"binary"`
	Format string `json:"format"`
	Steps  int    `json:"steps"`
	// CPUPerStepMS is the server tree's CPU milliseconds per step; ByProcess
	// splits it by command name.
	CPUPerStepMS float64            `json:"cpu_ms_per_step"`
	ByProcess    map[string]float64 `json:"cpu_ms_per_step_by_process"`
	// Phases is the mean wall milliseconds per step of each phase the
	// server reports in info.timings, plus "http" (client wall time not
	// inside any reported phase: request and reply encoding, transfer).
	Phases     map[string]float64 `json:"phase_ms_per_step"`
	StepP50    float64            `json:"step_p50_ms"`
	FrameBytes float64            `json:"frame_bytes_per_step"`
	Changed    float64            `json:"changed_frac"` // steps whose frame came back new
}

func (b *runner) stepCost(ctx context.Context) (*StepCost, error) {
	steps := b.sz.costSteps
	out := &StepCost{Steps: steps, Method: fmt.Sprintf(
		"per envserver binary: a server process of its own (shipped config, record_frames as shipped, pool 1), all started first and taking turns format by format on task %s at the shipped screen; one env types one letter per step into its xterm (every step changes the screen), %d steps per format after %d unmeasured ones; CPU of the server's process tree from /proc (each process's utime+stime, sampled every 100 ms; bench's own client is another process and is not counted); phases are the means of info.timings", longTask, steps, b.sz.costWarmup)}
	bins := []struct{ name, path string }{{"this build", b.opts.Envserver}}
	if bins[0].path == "" {
		bins[0].path = siblingBinary("envserver")
	}
	if b.opts.BaselineEnvserver != "" {
		bins = append(bins, struct{ name, path string }{"baseline", b.opts.BaselineEnvserver})
	}
	// Every server is up at once and they take turns, format by format,
	// so that the machine's other load falls on both alike.
	var envs []*costEnv
	defer func() {
		for _, ce := range envs {
			ce.close(ctx)
		}
	}()
	for _, bin := range bins {
		ce, err := b.openCostEnv(ctx, bin.name, bin.path)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", bin.name, bin.path, err)
		}
		envs = append(envs, ce)
	}
	for _, format := range []string{aci.FormatPNG, aci.FormatRaw, aci.FormatJPEG} {
		for _, ce := range envs {
			run, err := b.measureCost(ctx, ce, format, steps)
			if err != nil {
				return nil, fmt.Errorf("%s (%s): %w", ce.name, ce.bin, err)
			}
			out.Runs = append(out.Runs, run)
		}
	}
	sort.SliceStable(out.Runs, func(i, j int) bool {
		return out.Runs[i].Server < out.Runs[j].Server && out.Runs[i].Server == "this build"
	})
	return out, nil
}

// siblingBinary is name next to the running executable when it is there,
// else name itself (looked up on PATH).
func siblingBinary(name string) string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return name
}

// extServer is an envserver binary run as a child process.
type extServer struct {
	cmd    *exec.Cmd
	exited chan error // receives Wait's result once
	c      *client.Client
	state  string
	logs   *os.File
}

// startExtServer starts bin with pool 1 and bench's task directory and
// waits for its address and a warm sandbox.
func (b *runner) startExtServer(ctx context.Context, bin string) (_ *extServer, err error) {
	state, err := os.MkdirTemp("", "shinken-bench-ext-")
	if err != nil {
		return nil, err
	}
	s := &extServer{state: state}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	addrFile := filepath.Join(state, "addr")
	if s.logs, err = os.Create(filepath.Join(state, "server.log")); err != nil {
		return nil, err
	}
	args := []string{"--listen", "127.0.0.1:0", "--pool", "1", "--tasks", b.taskDir,
		"--state", filepath.Join(state, "state"), "--addr-file", addrFile, "--quiet"}
	if b.opts.GuestdPath != "" && b.opts.Envserver == bin {
		args = append(args, "--guestd", b.opts.GuestdPath)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	s.exited = make(chan error, 1)
	go func() { s.exited <- s.cmd.Wait() }()
	octx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for s.c == nil {
		select {
		case err := <-s.exited:
			s.cmd = nil
			return nil, fmt.Errorf("server exited: %v: %s", err, s.logTail())
		case <-octx.Done():
			return nil, fmt.Errorf("no address from the server: %w", octx.Err())
		case <-tick.C:
		}
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			s.c = client.New(strings.TrimSpace(string(b)), "", nil)
		}
	}
	for {
		sp, err := s.c.Spec(octx)
		if err == nil && sp.Pool.Warm >= 1 {
			return s, nil
		}
		select {
		case <-octx.Done():
			return nil, fmt.Errorf("no warm sandbox: %w", octx.Err())
		case <-tick.C:
		}
	}
}

func (s *extServer) logTail() string {
	b, _ := os.ReadFile(s.logs.Name())
	if len(b) > 800 {
		b = b[len(b)-800:]
	}
	return string(b)
}

// close stops the server (SIGINT, then SIGKILL after a minute) and removes
// its state.
func (s *extServer) close() {
	if s.c != nil {
		s.c.CloseIdle()
	}
	if s.cmd != nil {
		s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(time.Minute):
			s.cmd.Process.Kill()
			<-s.exited
		}
	}
	if s.logs != nil {
		s.logs.Close()
	}
	os.RemoveAll(s.state)
}

// costEnv is one server binary with one env of longTask.
type costEnv struct {
	name, bin string
	srv       *extServer
	env       string
	letter    int
}

func (b *runner) openCostEnv(ctx context.Context, name, bin string) (*costEnv, error) {
	srv, err := b.startExtServer(ctx, bin)
	if err != nil {
		return nil, err
	}
	rr, err := reset(ctx, srv.c, &api.ResetRequest{Envs: []api.ResetEnv{{Task: longTask}}})
	if err != nil {
		srv.close()
		return nil, fmt.Errorf("reset: %w", err)
	}
	return &costEnv{name: name, bin: bin, srv: srv, env: rr.Results[0].EnvID}, nil
}

func (ce *costEnv) close(ctx context.Context) {
	ce.srv.c.Close(context.WithoutCancel(ctx), ce.env)
	ce.srv.close()
}

// measureCost takes b.sz.costWarmup unmeasured steps in format, then steps
// measured ones while sampling the server's process tree.
func (b *runner) measureCost(ctx context.Context, ce *costEnv, format string, steps int) (StepCostRun, error) {
	name, bin, c, env := ce.name, ce.bin, ce.srv.c, ce.env
	obs := &api.Observe{Format: format}
	step := func() (*api.BatchReply, time.Duration, error) {
		text := string(rune('a' + ce.letter%26))
		ce.letter++
		if ce.letter%90 == 0 {
			// A fresh line now and then keeps the prompt on screen.
			return timedStep(ctx, c, env, obs, aci.Action{Verb: aci.Key, Keys: "ctrl+u"})
		}
		return timedStep(ctx, c, env, obs, aci.Action{Verb: aci.TypeText, Text: text})
	}
	for i := 0; i < b.sz.costWarmup; i++ {
		if _, _, err := step(); err != nil {
			return StepCostRun{}, fmt.Errorf("%s warm-up: %w", format, err)
		}
	}
	if steps <= 0 {
		return StepCostRun{}, errors.New("no steps to measure")
	}
	run := StepCostRun{Server: name, Binary: bin, Format: format, Phases: map[string]float64{}, ByProcess: map[string]float64{}}
	var walls []time.Duration
	var nBytes, changed int64
	sampler := StartCPUSampler(ce.srv.cmd.Process.Pid, 100*time.Millisecond)
	for i := 0; i < steps; i++ {
		rep, d, err := step()
		if err != nil {
			sampler.Stop()
			return StepCostRun{}, fmt.Errorf("%s step %d: %w", format, i, err)
		}
		walls = append(walls, d)
		res := rep.Results[0]
		if res.Info != nil {
			inside := int64(0)
			for k, us := range res.Info.Timings {
				run.Phases[strings.TrimSuffix(k, "_us")] += float64(us) / 1000
				if k == "act_us" || k == "observe_us" || k == "verify_us" {
					inside += us
				}
			}
			run.Phases["http"] += float64(d.Microseconds()-inside) / 1000
		}
		if n := frameBytes(rep, res.Obs); n > 0 {
			nBytes += int64(n)
			changed++
		}
	}
	cpu := sampler.Stop()
	run.Steps = steps
	run.CPUPerStepMS = cpu * 1000 / float64(steps)
	for k, v := range sampler.ByCommand() {
		run.ByProcess[k] = v * 1000 / float64(steps)
	}
	for k := range run.Phases {
		run.Phases[k] /= float64(steps)
	}
	run.StepP50 = Summarize(walls).P50
	run.FrameBytes = float64(nBytes) / float64(steps)
	run.Changed = float64(changed) / float64(steps)
	b.opts.Logf("bench: stepcost %s %s: %.1f ms CPU per step (%s)", name, format, run.CPUPerStepMS, fmtMS(run.ByProcess))
	return run, nil
}

func timedStep(ctx context.Context, c *client.Client, env string, obs *api.Observe, a aci.Action) (*api.BatchReply, time.Duration, error) {
	t0 := time.Now()
	rep, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: []aci.Action{a}}}, Observe: obs})
	d := time.Since(t0)
	if err != nil {
		return nil, d, err
	}
	if e := rep.Results[0].Error; e != nil {
		return nil, d, e
	}
	return rep, d, nil
}

// fmtMS writes a map of milliseconds as "k=v" pairs, largest first.
func fmtMS(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		switch {
		case m[a] > m[b]:
			return -1
		case m[a] < m[b]:
			return 1
		}
		return strings.Compare(a, b)
	})
	var sb strings.Builder
	w := bufio.NewWriter(&sb)
	for i, k := range keys {
		if i > 0 {
			w.WriteString(" ")
		}
		fmt.Fprintf(w, "%s=%.2f", k, m[k])
	}
	w.Flush()
	return sb.String()
}
