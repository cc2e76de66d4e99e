package bench

import (
	"context"
	"fmt"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/api/client"
)

// Dedup is the bytes-on-the-wire scenario for forked replicas stepped in
// lockstep, with and without the shared frame cache and the client's have.
type Dedup struct {
	Method   string     `json:"method"`
	Replicas int        `json:"replicas"`
	Steps    int        `json:"steps"`
	Rows     []DedupRow `json:"rows"`
}

// DedupRow is one configuration's cost per env-step.
type DedupRow struct {
	Cache  string `json:"shared_cache"` // on | off
	Mode   string `json:"mode"`
	Method string `json:"method"`
	// WireBytes is TCP bytes (both directions, headers included) per env-step.
	WireBytes float64 `json:"wire_bytes_per_env_step"`
	// ImageBytes is encoded image bytes carried in replies per env-step.
	ImageBytes float64 `json:"image_bytes_per_env_step"`
	// Encodes is frames the guests encoded per env-step (server metrics).
	Encodes float64 `json:"encodes_per_env_step"`
	// Distinct is the mean number of distinct frames among the replicas
	// after a step (1 when they stay pixel-identical).
	Distinct float64 `json:"distinct_frames_per_step"`
	// Saving is the first row's WireBytes over this row's.
	Saving float64 `json:"wire_saving_vs_first"`
}

const encodedSeries = `shinken_frames_total{result="encoded"}`

func (b *runner) dedup(ctx context.Context) (*Dedup, error) {
	out := &Dedup{Replicas: b.sz.dedupReplicas, Steps: b.sz.dedupSteps,
		Method: fmt.Sprintf("a pool-1 server forks %d replicas of one env; they step in lockstep, alternating a typed character (screen changes alike in every replica) and a click (screen unchanged), observe png; bytes counted on the client's TCP connections, encodes from the server's /metrics",
			b.sz.dedupReplicas)}
	for _, cache := range []string{"off", "on"} {
		edit := func(cfg *configs.Server) {}
		if cache == "off" {
			// A 1-byte bound caches nothing: every env encodes its own frames.
			edit = func(cfg *configs.Server) { cfg.FrameCacheBytes = 1 }
		}
		rows, err := b.dedupOne(ctx, cache, edit)
		if err != nil {
			return nil, fmt.Errorf("shared cache %s: %w", cache, err)
		}
		out.Rows = append(out.Rows, rows...)
	}
	for i := range out.Rows {
		out.Rows[i].Saving = ratio(out.Rows[0].WireBytes, out.Rows[i].WireBytes)
	}
	return out, nil
}

func (b *runner) dedupOne(ctx context.Context, cache string, edit func(*configs.Server)) ([]DedupRow, error) {
	srv, err := b.startServer(ctx, 1, edit)
	if err != nil {
		return nil, err
	}
	defer srv.close()
	c := srv.c
	mc := client.New(srv.st.URL, "", nil) // metrics go on their own connections
	defer mc.CloseIdle()
	rr, err := reset(ctx, c, &api.ResetRequest{Envs: []api.ResetEnv{{Task: longTask}}})
	if err != nil {
		return nil, err
	}
	parent := rr.Results[0].EnvID
	defer c.Close(context.WithoutCancel(ctx), parent)
	if _, err := settle(ctx, c, parent); err != nil {
		return nil, err
	}
	fr, err := fork(ctx, c, &api.ForkRequest{EnvID: parent, N: b.sz.dedupReplicas})
	if fr != nil {
		defer c.Close(context.WithoutCancel(ctx), envIDs(fr)...)
	}
	if err != nil {
		return nil, err
	}
	envs := envIDs(fr)
	have := map[string]bool{}
	for h := range fr.Frames {
		have[h] = true
	}
	modes := []struct {
		name, method string
		batch, have  bool
	}{
		{"per-env", "one POST /v1/step per replica, no have: each reply carries its env's frame", false, false},
		{"batch", "one POST /v1/step for all replicas, no have: a frame shown by several envs travels once per reply", true, false},
		{"batch+have", "one POST /v1/step for all replicas with have = hashes the client holds: an unchanged screen costs no image bytes", true, true},
	}
	var rows []DedupRow
	step := 0
	for _, m := range modes {
		m0, err := mc.Metrics(ctx)
		if err != nil {
			return nil, err
		}
		s0, r0 := c.WireBytes()
		var img, distinct int
		for k := 0; k < b.sz.dedupSteps; k++ {
			act := aci.Action{Verb: aci.Click, Target: aci.Px(clickX, clickY)}
			if step%2 == 0 {
				act = aci.Action{Verb: aci.TypeText, Text: string(rune('a' + step%26))}
			}
			step++
			var reqs []*api.StepRequest
			obs := &api.Observe{Format: aci.FormatPNG}
			if m.batch {
				req := &api.StepRequest{Observe: obs}
				for _, e := range envs {
					req.Steps = append(req.Steps, api.StepEnv{EnvID: e, Action: &act})
				}
				reqs = append(reqs, req)
			} else {
				for _, e := range envs {
					reqs = append(reqs, &api.StepRequest{Observe: obs, Steps: []api.StepEnv{{EnvID: e, Action: &act}}})
				}
			}
			frames := map[string]bool{}
			for _, req := range reqs {
				if m.have {
					for h := range have {
						req.Have = append(req.Have, h)
					}
				}
				rep, err := c.Step(ctx, req)
				if err != nil {
					return nil, err
				}
				for _, res := range rep.Results {
					if res.Error != nil {
						return nil, fmt.Errorf("env %s: %w", res.EnvID, res.Error)
					}
					frames[res.Obs.Frame] = true
				}
				for h, data := range rep.Frames {
					img += len(data)
					if len(have) < 256 { // the client's frame cache
						have[h] = true
					}
				}
			}
			distinct += len(frames)
		}
		s1, r1 := c.WireBytes()
		m1, err := mc.Metrics(ctx)
		if err != nil {
			return nil, err
		}
		n := float64(b.sz.dedupSteps * len(envs))
		rows = append(rows, DedupRow{
			Cache: cache, Mode: m.name, Method: m.method,
			WireBytes:  float64((s1-s0)+(r1-r0)) / n,
			ImageBytes: float64(img) / n,
			Encodes:    (m1[encodedSeries] - m0[encodedSeries]) / n,
			Distinct:   float64(distinct) / float64(b.sz.dedupSteps),
		})
	}
	return rows, nil
}
