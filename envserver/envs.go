package envserver

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/trajectory"
)

// env is one leased sandbox and the episode running on it. Calls on one env
// are serialized by mu; different envs run concurrently.
type env struct {
	id       string
	lastUsed atomic.Int64 // unix nanos

	mu          sync.Mutex
	closed      bool
	lease       *pool.Lease // nil after the sandbox died or was released
	pool        *pool.Pool  // the pool of the env's screen size (leases, forks and snapshots come from it)
	screen      api.Size    // that size (zero: the server's default, unreported)
	task        *configs.Instance
	ep          *episode
	lastFrame   string
	lastTimings map[string]int64 // the guest's split of the last capture (wire.Shot.Timings)
	display     *aci.Display     // descriptor of the frame last delivered: frame coordinates map through it
	coords      *aci.Coords      // the env's default coordinate space (reset coords); nil: none set
	// shown is ep for readers that must not wait on a call in flight (the
	// web UI); set with ep.
	shown  atomic.Pointer[episode]
	a11yEp string // the episode whose element ids the guest holds
	// marks are the Set-of-Mark labels (number → element id) of the last
	// marked observation of the episode (observation.go).
	marks map[string]string
	// replay is the reply to the last step that carried a request_id, kept
	// until the env's next step or episode (replay.go).
	replay *stepReplay
	raw    *keptRaw // the last raw frame delivered, decoded (observation.go)
}

// episode is one run of a task on an env; traj is guarded by mu so that
// GET /v1/episodes can read a live episode while it steps.
type episode struct {
	mu       sync.Mutex
	traj     trajectory.Trajectory
	start    time.Time
	step     int
	maxSteps int // the step budget: the task's, or lower when the reset asked
	over     bool
	journal  *trajectory.Journal // opened at the first step; nil without a store
	saveErr  error               // the episode could not be made durable
}

// stepReplay is the last reply an env gave to a step that carried a
// request_id: a step resent with that id (its client timed out and retried)
// gets this reply again instead of running twice. One per env, so the memory
// it holds is bounded by one result and one encoded frame per env
// (docs/api.md, "Retrying a step").
type stepReplay struct {
	id    string
	res   api.Result
	key   frameKey // the encoding of res.Obs's frame
	frame []byte   // its bytes, when the reply carried them
	// stored is the frame as the cache held it (a raw frame S2-compressed)
	// when the reply did not carry it; both nil when neither had it.
	stored []byte
}

func newID(prefix string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// getEnv looks an env up and marks it used.
func (s *Server) getEnv(id string) (*env, error) {
	s.mu.Lock()
	e := s.envs[id]
	s.mu.Unlock()
	if e == nil {
		return nil, aci.Errorf(aci.CodeNotFound, "unknown env %q", id)
	}
	e.lastUsed.Store(time.Now().UnixNano())
	return e, nil
}

// register makes a new env visible; a no-op for one already registered.
func (s *Server) register(e *env, isNew bool) {
	if !isNew {
		return
	}
	s.mu.Lock()
	s.envs[e.id] = e
	s.mu.Unlock()
}

// startEpisode begins a new episode on e (e.mu held).
func (s *Server) startEpisode(e *env, in *configs.Instance, forkOf string) *episode {
	now := time.Now()
	seed := in.Seed
	ep := &episode{start: now, traj: trajectory.Trajectory{
		EpisodeID: newID("ep-"), EnvID: e.id, Task: in.ID, Seed: &seed, ForkOf: forkOf,
		Instance: &trajectory.Instance{Version: in.Version, Hash: in.Hash, Split: in.Split,
			Instruction: in.Instruction, Params: in.Params},
		Steps: []trajectory.Step{}, StartedAt: now.UTC(), Envelope: s.envelope(e, in),
	}, maxSteps: in.MaxSteps}
	e.ep = ep
	e.replay, e.marks = nil, nil
	e.shown.Store(ep)
	s.mu.Lock()
	s.episodes[ep.traj.EpisodeID] = ep
	s.mu.Unlock()
	return ep
}

// envelope is what an episode of in may do (docs/api.md, "Capabilities
// and audit"): the task's apps and shell, the clipboard verbs, the
// trainer's routes as this server serves them, the network the sandbox's
// confinement leaves it, and the screen.
func (s *Server) envelope(e *env, in *configs.Instance) *trajectory.Envelope {
	net := "host"
	if c := s.pool.Capabilities().Confinement; c != nil && slices.Contains(c.Namespaces, "net") {
		net = "none"
	}
	return &trajectory.Envelope{Apps: slices.Clone(in.Apps), Shell: in.AllowShell, Clipboard: true,
		TrainerExec: s.cfg.TrainerExec, TrainerFiles: true, Network: net, ScreenW: e.screen.W, ScreenH: e.screen.H}
}

// envPool is the pool e's sandbox came from (its screen size's).
func (s *Server) envPool(e *env) *pool.Pool {
	if e.pool != nil {
		return e.pool
	}
	return s.pool
}

// screens lists the sizes a reset may ask for: the default, then the
// others by width and height.
func (s *Server) screens() []api.Size {
	out := []api.Size{s.cfg.Screen}
	for _, sz := range slices.SortedFunc(maps.Keys(s.cfg.Screens), func(a, b api.Size) int {
		return cmp.Or(cmp.Compare(a.W, b.W), cmp.Compare(a.H, b.H))
	}) {
		out = append(out, sz)
	}
	return out
}

// pools lists the server's pools, the default first.
func (s *Server) pools() poolSet {
	ps := poolSet{s.pool}
	for _, sz := range s.screens()[1:] {
		ps = append(ps, s.cfg.Screens[sz])
	}
	return ps
}

// poolFor is the pool of the screen a reset asks for: the default pool
// for none (or the default size), an extra size's own pool, else
// bad_request naming the sizes served.
func (s *Server) poolFor(want *api.Size) (*pool.Pool, api.Size, error) {
	if want == nil || *want == s.cfg.Screen {
		return s.pool, s.cfg.Screen, nil
	}
	if p := s.cfg.Screens[*want]; p != nil {
		return p, *want, nil
	}
	names := []string{}
	for _, sz := range s.screens() {
		names = append(names, fmt.Sprintf("%dx%d", sz.W, sz.H))
	}
	return nil, api.Size{}, aci.Errorf(aci.CodeBadRequest, "screen %dx%d is not served here (spec.observation.screens: %s)", want.W, want.H, strings.Join(names, ", "))
}

// finishEpisode ends e's episode with reason (e.mu held), saves it and counts it.
func (s *Server) finishEpisode(e *env, reason trajectory.ExitReason) {
	ep := e.ep
	if ep == nil || ep.over {
		return
	}
	ep.mu.Lock()
	ep.over = true
	now := time.Now().UTC()
	ep.traj.EndedAt = &now
	ep.traj.ExitReason = reason
	ep.traj.NumTurns = len(ep.traj.Steps)
	snapshot := ep.traj
	ep.mu.Unlock()
	label := string(reason)
	if label == "" {
		label = "closed"
	}
	s.m.episodes.WithLabelValues(label).Inc()
	if s.cfg.Store != nil {
		var err error
		if j := ep.journal; j != nil {
			err = j.SaveFinal(&snapshot)
		} else {
			err = s.cfg.Store.Save(&snapshot)
		}
		if err != nil {
			ep.mu.Lock()
			s.saveFailed(ep, err)
			ep.mu.Unlock()
			return
		}
		s.mu.Lock()
		delete(s.episodes, snapshot.EpisodeID)
		s.mu.Unlock()
	}
}

// saveFailed records that ep could not be made durable (ep.mu held).
func (s *Server) saveFailed(ep *episode, err error) {
	if ep.saveErr == nil {
		ep.saveErr = err
		s.m.saveFailures.Inc()
		s.cfg.Logf("envserver: episode %s is not being saved: %v", ep.traj.EpisodeID, err)
	}
}

// endEpisode ends a still-running episode that the client abandoned (reset or
// close before it ended): it carries no exit reason, since it was not scored.
func (s *Server) endEpisode(e *env) {
	if e.ep != nil && !e.ep.over {
		s.finishEpisode(e, "")
	}
}

// episode is episode id's trajectory: a copy of a live or recently finished
// one's, else the store's.
func (s *Server) episode(id string) (*trajectory.Trajectory, error) {
	s.mu.Lock()
	ep := s.episodes[id]
	s.mu.Unlock()
	if ep != nil {
		ep.mu.Lock()
		defer ep.mu.Unlock()
		t := ep.traj
		t.Steps = append([]trajectory.Step(nil), ep.traj.Steps...)
		t.Events = append([]trajectory.Event(nil), ep.traj.Events...)
		t.NumTurns = len(t.Steps)
		t.Audit = trajectory.Audit(&t)
		return &t, nil
	}
	if s.cfg.Store != nil {
		t, err := s.cfg.Store.Load(id)
		if err == nil {
			t.Audit = trajectory.Audit(t)
			return t, nil
		}
		if !errors.Is(err, trajectory.ErrNotFound) {
			return nil, aci.Errorf(aci.CodeNotFound, "episode %q: %v", id, err)
		}
	}
	return nil, aci.Errorf(aci.CodeNotFound, "unknown episode %q", id)
}

// a11yVerb reports whether v needs the accessibility tree.
func a11yVerb(v aci.Verb) bool {
	for _, a := range aci.A11yVerbs {
		if v == a {
			return true
		}
	}
	return false
}
