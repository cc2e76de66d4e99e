package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/api/client"
)

// Latency is the step-latency scenario: click+observe at 1280x800 through
// the full HTTP path in each observation mode, beside the baseline.
type Latency struct {
	Method   string        `json:"method"`
	Steps    int           `json:"steps_per_mode"`
	Baseline ModeLatency   `json:"baseline"`
	Modes    []ModeLatency `json:"modes"`
}

// ModeLatency is one mode's step latency and its ratio to the baseline.
type ModeLatency struct {
	Mode   string `json:"mode"`
	Method string `json:"method"`
	Dist   Dist   `json:"latency"`
	// SpeedupP50 and SpeedupP95 are baseline / this mode at that percentile
	// (>1: Shinken is faster); 0 for the baseline itself.
	SpeedupP50 float64 `json:"speedup_p50,omitempty"`
	SpeedupP95 float64 `json:"speedup_p95,omitempty"`
	// FreshFrac is the fraction of steps whose frame had not been seen
	// before in this format, i.e. that needed a capture and an encode.
	FreshFrac float64 `json:"fresh_frac"`
	// WireBytes is the mean bytes per step on the TCP connection (request +
	// reply, headers included); for the baseline, the PNG scrot wrote.
	WireBytes float64 `json:"wire_bytes_per_step"`
	Errors    int     `json:"errors,omitempty"`
}

const clickX, clickY = 200, 200 // inside the task's xterm (100x30+0+0)

// modeProbe measures one mode's steps.
type modeProbe struct {
	ModeLatency
	ds        []time.Duration
	seen      map[string]bool
	wire      int64
	lastFrame string
	run       func(ctx context.Context, p *modeProbe) error
}

func (b *runner) latency(ctx context.Context) (*Latency, error) {
	bl, err := StartBaseline(ctx)
	if err != nil {
		return nil, err
	}
	defer bl.Close()
	if bl.Warning != "" {
		b.opts.Logf("bench: baseline: %s", bl.Warning)
	}
	srv, err := b.startServer(ctx, 2, nil)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	c := srv.c
	rr, err := reset(ctx, c, &api.ResetRequest{Envs: []api.ResetEnv{{Task: longTask}, {Task: longTask}}})
	if err != nil {
		return nil, fmt.Errorf("reset: %w", err)
	}
	static, busy := rr.Results[0].EnvID, rr.Results[1].EnvID
	defer c.Close(context.WithoutCancel(ctx), static, busy)

	// The static env answers not_modified once its screen has settled.
	last, err := settle(ctx, c, static)
	if err != nil {
		return nil, err
	}
	// The busy env runs the same counter as the baseline's xterm.
	if err := startTicker(ctx, c, busy); err != nil {
		return nil, err
	}

	click := &aci.Action{Verb: aci.Click, Target: aci.Px(clickX, clickY)}
	shinken := func(format string) func(ctx context.Context, p *modeProbe) error {
		return func(ctx context.Context, p *modeProbe) error {
			// The counter never lets the screen go quiet, so a settle would
			// only wait out its ceiling: capture at once, as the baseline's
			// scrot does.
			req := &api.StepRequest{Steps: []api.StepEnv{{EnvID: busy, Action: click}}, Observe: &api.Observe{Format: format, Settle: &aci.Settle{}}}
			return p.stepOnce(ctx, c, req, format)
		}
	}
	probes := []*modeProbe{
		{ModeLatency: ModeLatency{Mode: "baseline", Method: "xdotool mousemove+click then scrot -o (PNG), two subprocesses per step, on a plain Xvfb 1280x800x24 with openbox and an xterm redrawing a counter every ~10 ms"},
			run: func(ctx context.Context, p *modeProbe) error {
				t0 := time.Now()
				n, err := bl.Step(ctx, clickX, clickY)
				if err != nil {
					return err
				}
				p.ds = append(p.ds, time.Since(t0))
				p.wire += int64(n)
				return nil
			}},
		{ModeLatency: ModeLatency{Mode: "not_modified", Method: "POST /v1/step {click} observe png with have=[current frame] on a static xterm: the guest answers not_modified and the reply carries no image"},
			run: func(ctx context.Context, p *modeProbe) error {
				req := &api.StepRequest{Steps: []api.StepEnv{{EnvID: static, Action: click}},
					Observe: &api.Observe{Format: aci.FormatPNG}, Have: []string{last}}
				err := p.stepOnce(ctx, c, req, aci.FormatPNG)
				if err == nil && len(p.ds) > 0 {
					last = p.lastFrame
				}
				return err
			}},
	}
	for _, f := range []string{aci.FormatRaw, aci.FormatJPEG, aci.FormatPNG} {
		probes = append(probes, &modeProbe{ModeLatency: ModeLatency{Mode: f,
			Method: "POST /v1/step {click} observe " + f + " without have and without settling (settle {max_ms: 0}: the counter never lets the screen go quiet, so a settle would only wait out its ceiling), msgpack over keep-alive HTTP on loopback, on the task's xterm redrawing the same counter as the baseline (so frames are new and must be encoded)"},
			run: shinken(f)})
	}
	for _, p := range probes {
		p.seen = map[string]bool{}
	}
	// Interleave modes round by round, rotating the order, so that the
	// machine's background load falls on all of them alike.
	for i := 0; i < b.sz.latencySteps; i++ {
		for j := range probes {
			p := probes[(i+j)%len(probes)]
			if err := p.run(ctx, p); err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				p.Errors++
				if p.Errors > b.sz.latencySteps/4+2 {
					return nil, fmt.Errorf("%s: too many failed steps: %w", p.Mode, err)
				}
			}
		}
	}
	out := &Latency{Steps: b.sz.latencySteps,
		Method: "each mode steps one env of a pool-2 server (shipped config) from a Go client in this process; modes and baseline alternate step by step in rotating order; latency is the client's wall time from request to decoded reply"}
	for _, p := range probes {
		p.Dist = Summarize(p.ds)
		if n := len(p.ds); n > 0 {
			p.FreshFrac = float64(len(p.seen)) / float64(n)
			p.WireBytes = float64(p.wire) / float64(n)
		}
	}
	probes[0].FreshFrac = 1 // scrot captures and encodes every time
	out.Baseline = probes[0].ModeLatency
	for _, p := range probes[1:] {
		p.SpeedupP50 = ratio(out.Baseline.Dist.P50, p.Dist.P50)
		p.SpeedupP95 = ratio(out.Baseline.Dist.P95, p.Dist.P95)
		out.Modes = append(out.Modes, p.ModeLatency)
	}
	return out, nil
}

// stepOnce times one single-env step and records its freshness and bytes.
func (p *modeProbe) stepOnce(ctx context.Context, c *client.Client, req *api.StepRequest, format string) error {
	s0, r0 := c.WireBytes()
	t0 := time.Now()
	rep, err := c.Step(ctx, req)
	d := time.Since(t0)
	if err != nil {
		return err
	}
	res := rep.Results[0]
	if res.Error != nil {
		return res.Error
	}
	if res.Obs == nil {
		return errors.New("step reply without observation")
	}
	if res.Info != nil && res.Info.Error != nil {
		return res.Info.Error
	}
	s1, r1 := c.WireBytes()
	p.ds = append(p.ds, d)
	p.wire += (s1 - s0) + (r1 - r0)
	if frameBytes(rep, res.Obs) > 0 && !p.seen[res.Obs.Frame] {
		p.seen[res.Obs.Frame] = true
	}
	p.lastFrame = res.Obs.Frame
	return nil
}

// settle steps env with a click until two observations in a row show the
// same frame, and returns it.
func settle(ctx context.Context, c *client.Client, env string) (string, error) {
	prev := ""
	for i := 0; i < 50; i++ {
		rep, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: env,
			Action: &aci.Action{Verb: aci.Click, Target: aci.Px(clickX, clickY)}}},
			Observe: &api.Observe{Format: aci.FormatPNG}}) // settled by the server's default
		if err != nil {
			return "", err
		}
		res := rep.Results[0]
		if res.Error != nil {
			return "", res.Error
		}
		if res.Obs.Frame == prev {
			return prev, nil
		}
		prev = res.Obs.Frame
	}
	return "", errors.New("static env never settled")
}

// startTicker types tickerScript into env's xterm and waits until its
// screen changes between two observations.
func startTicker(ctx context.Context, c *client.Client, env string) error {
	_, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: []aci.Action{
		{Verb: aci.Click, Target: aci.Px(clickX, clickY)},
		{Verb: aci.TypeText, Text: tickerScript},
		{Verb: aci.Key, Keys: "Return"},
	}}}, Observe: &api.Observe{Format: aci.FormatRaw}})
	if err != nil {
		return fmt.Errorf("start ticker: %w", err)
	}
	prev := ""
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		rep, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: env,
			Action: &aci.Action{Verb: aci.Wait, MS: 30}}}, Observe: &api.Observe{Format: aci.FormatRaw}})
		if err != nil {
			return err
		}
		if res := rep.Results[0]; res.Error == nil && res.Obs != nil {
			if prev != "" && res.Obs.Frame != prev {
				return nil
			}
			prev = res.Obs.Frame
		}
	}
	return errors.New("ticker never changed the screen")
}
