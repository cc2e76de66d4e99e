package envserver

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/ui"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// startUI builds the web UI over the server's own state and starts its
// sampler, owned by the server's wait group.
func (s *Server) startUI() fasthttp.RequestHandler {
	u := ui.New(&uiSource{s: s, memo: map[string]envMemo{}}, ui.Options{Token: s.cfg.Token})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		u.Run(s.ctx)
	}()
	return fasthttpadaptor.NewFastHTTPHandler(u)
}

// uiSource is the server as the web UI reads it. It never waits on an env
// busy with a call: what it last saw of such an env stands in.
type uiSource struct {
	s *Server

	mu   sync.Mutex
	memo map[string]envMemo // env id → what was read when it was last free
}

// envMemo is the part of an env guarded by its call lock.
type envMemo struct {
	sandbox string
	dead    bool
}

func (u *uiSource) Envs() []ui.Env {
	s := u.s
	s.mu.Lock()
	envs := make([]*env, 0, len(s.envs))
	for _, e := range s.envs {
		envs = append(envs, e)
	}
	s.mu.Unlock()
	sort.Slice(envs, func(i, j int) bool { return envs[i].id < envs[j].id })
	u.mu.Lock()
	defer u.mu.Unlock()
	next := make(map[string]envMemo, len(envs))
	out := make([]ui.Env, 0, len(envs))
	for _, e := range envs {
		ep := e.shown.Load()
		m, busy := u.memo[e.id], true
		if e.mu.TryLock() {
			busy = false
			m = envMemo{dead: e.lease == nil || e.lease.Err() != nil}
			if e.lease != nil {
				m.sandbox = e.lease.ID()
			}
			e.mu.Unlock()
		}
		next[e.id] = m
		row := ui.Env{ID: e.id, Sandbox: m.sandbox, Busy: busy, LastUsed: timeOfNanos(e.lastUsed.Load())}
		if ep == nil {
			row.State = "idle"
			if busy {
				row.State = "resetting"
			}
			out = append(out, row)
			continue
		}
		ep.mu.Lock()
		row.EpisodeID, row.Task = ep.traj.EpisodeID, ep.traj.Task
		row.Step, row.Reward, row.ExitReason = len(ep.traj.Steps), ep.traj.Reward, string(ep.traj.ExitReason)
		row.Frame = ep.traj.InitFrame
		if n := len(ep.traj.Steps); n > 0 {
			row.Frame = ep.traj.Steps[n-1].ObsFrame
		}
		over := ep.over
		ep.mu.Unlock()
		if t := s.cfg.Tasks[row.Task]; t != nil {
			row.MaxSteps = t.MaxSteps
		}
		switch {
		case over && busy:
			row.State = "resetting"
		case m.dead && !busy:
			row.State = "dead"
		case over:
			row.State = "over"
		default:
			row.State = "running"
		}
		out = append(out, row)
	}
	u.memo = next
	return out
}

func (u *uiSource) Pool() ui.PoolView {
	p := u.s.pool
	caps := p.Capabilities()
	spec := p.Spec()
	return ui.PoolView{
		Provider: caps.Provider, SnapshotKind: caps.SnapshotKind, Size: u.s.cfg.PoolSize,
		Stats: u.Counters(), Sandboxes: p.Sandboxes(), ScreenW: spec.Width, ScreenH: spec.Height,
	}
}

func (u *uiSource) Counters() ui.Counters {
	st := u.s.pool.Stats()
	return ui.Counters{
		Warm: st.Warm, Leased: st.Leased, Booting: st.Booting, Replicas: st.Replicas, Deaths: st.Deaths,
		Resets: sumCounter(u.s.m.resets), Steps: sumCounter(u.s.m.steps), Episodes: sumCounter(u.s.m.episodes),
	}
}

// sumCounter adds up every series of a counter vector.
func sumCounter(c *prometheus.CounterVec) uint64 {
	ch := make(chan prometheus.Metric, 32)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var total float64
	for m := range ch {
		var d dto.Metric
		if m.Write(&d) == nil {
			total += d.GetCounter().GetValue()
		}
	}
	return uint64(total)
}

func (u *uiSource) Tasks() []ui.Task {
	ts := u.s.cfg.Tasks
	out := make([]ui.Task, 0, len(ts))
	for _, id := range ts.IDs() {
		t := ts[id]
		ut := ui.Task{ID: t.ID, Version: t.FamilyVersion(), Instruction: t.Instruction, Apps: append([]string{}, t.Apps...),
			MaxSteps: t.MaxSteps, TestPercent: t.TestShare()}
		for _, p := range t.Params {
			kind, _ := p.Schema()
			ut.Params = append(ut.Params, p.Name+" ("+kind+")")
		}
		if t.Parameterized() {
			// A few instances, so the page shows what a seed changes.
			for _, sm := range []ui.Instance{{Split: configs.SplitTrain, Seed: 0}, {Split: configs.SplitTrain, Seed: 1},
				{Split: configs.SplitTrain, Seed: 2}, {Split: configs.SplitTest, Seed: 0}} {
				if in, err := t.Instantiate(sm.Split, sm.Seed); err == nil {
					sm.Instruction = in.Instruction
					ut.Samples = append(ut.Samples, sm)
				}
			}
		}
		out = append(out, ut)
	}
	return out
}

func (u *uiSource) EpisodeIDs() []string {
	s := u.s
	seen := map[string]bool{}
	s.mu.Lock()
	ids := make([]string, 0, len(s.episodes))
	for id := range s.episodes {
		seen[id] = true
		ids = append(ids, id)
	}
	s.mu.Unlock()
	if s.cfg.Store != nil {
		stored, err := s.cfg.Store.List()
		if err != nil {
			s.cfg.Logf("envserver: ui: listing episodes: %v", err)
		}
		for _, id := range stored {
			if !seen[id] {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

func (u *uiSource) Episode(id string) (*trajectory.Trajectory, error) {
	t, err := u.s.episode(id)
	if err != nil && codeOf(err) == aci.CodeNotFound {
		return nil, fmt.Errorf("%w: %v", ui.ErrNotFound, err)
	}
	return t, err
}

func (u *uiSource) Frame(hash string) ([]byte, string, error) {
	if data, format, ok := u.s.cache.peekHash(hash, u.s.cfg.DefaultObserve); ok {
		return data, format, nil
	}
	if st := u.s.cfg.Store; st != nil {
		for _, f := range []string{aci.FormatPNG, aci.FormatJPEG, wire.FormatRawS2, aci.FormatRaw} {
			data, err := st.Frame(hash, f)
			if err == nil && f == wire.FormatRawS2 {
				if data, err = decodeRawS2(nil, data); err != nil {
					return nil, "", fmt.Errorf("frame %s: %w", hash, err)
				}
				return data, aci.FormatRaw, nil
			}
			if err == nil {
				return data, f, nil
			}
			if !errors.Is(err, trajectory.ErrNotFound) {
				return nil, "", err
			}
		}
	}
	return nil, "", fmt.Errorf("frame %s: %w (evicted from the cache and not recorded)", hash, ui.ErrNotFound)
}

// peekHash finds a frame by hash alone in any encoding, without marking it
// used: the UI's reads must not keep frames the trainers no longer need.
// It tries the likely encodings first and scans only when those miss.
func (c *frameCache) peekHash(hash string, def api.Observe) (data []byte, format string, ok bool) {
	for _, k := range []frameKey{
		{hash, def.Format, def.Quality}, {hash, aci.FormatPNG, 0}, {hash, aci.FormatJPEG, aci.DefaultJPEGQuality}, {hash, aci.FormatRaw, 0},
	} {
		data, hit := c.lru.Peek(k)
		if data, hit = decodeStored(k.format, data, hit); hit {
			return data, k.format, true
		}
	}
	k, data, ok := c.lru.Find(func(k frameKey) bool { return k.hash == hash })
	data, ok = decodeStored(k.format, data, ok)
	return data, k.format, ok
}

func timeOfNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
