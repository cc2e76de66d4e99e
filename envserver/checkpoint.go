package envserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/valyala/fasthttp"
)

// Named checkpoints (docs/api.md, "Checkpoints"; docs/architecture.md,
// "Named checkpoints"): POST /v1/checkpoint snapshots a live episode through
// the provider's snapshotter; reset {checkpoint} and fork {checkpoint, n}
// start new episodes from it. The server owns every checkpoint's snapshot
// and deletes it on DELETE, after CheckpointTTL unused, and at shutdown.
// Count and bytes are bounded (checkpoint_limit).

// checkpoint is one named checkpoint: a snapshot and the episode state it
// was taken in, which episodes started from it inherit.
type checkpoint struct {
	id, snap  string
	task      *configs.Instance
	envID     string
	episodeID string
	step      int
	maxSteps  int
	coords    *aci.Coords
	frame     string
	display   *aci.Display
	bytes     int64
	pool      *pool.Pool // the pool of its screen size, which holds the snapshot
	screen    api.Size

	// guarded by checkpoints.mu
	lastUsed time.Time
	uses     int  // resets and forks starting from it now
	deleted  bool // gone from the table; the snapshot goes when uses is 0
}

// checkpoints is the server's table of named checkpoints.
type checkpoints struct {
	mu      sync.Mutex
	byID    map[string]*checkpoint
	bytes   int64 // held by the checkpoints in byID
	pending int   // snapshots being taken, counted against the count cap
}

// checkpointGauges exports the count and bytes of live checkpoints.
func (s *Server) checkpointGauges() {
	read := func(v func() float64) func() float64 {
		return func() float64 {
			s.ckpts.mu.Lock()
			defer s.ckpts.mu.Unlock()
			return v()
		}
	}
	s.m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shinken_checkpoints", Help: "Named checkpoints held."},
			read(func() float64 { return float64(len(s.ckpts.byID)) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "shinken_checkpoint_bytes", Help: "Bytes the named checkpoints' snapshots hold on the host."},
			read(func() float64 { return float64(s.ckpts.bytes) })))
}

// checkpointsServed reports whether the provider can snapshot and restore.
func (s *Server) checkpointsServed() bool {
	c := s.pool.Capabilities()
	return c.Snapshot && c.Restore
}

// serveCheckpoint answers POST /v1/checkpoint, GET and DELETE
// /v1/checkpoint/{id}.
func (s *Server) serveCheckpoint(ctx *fasthttp.RequestCtx, c codec, path string) {
	id, hasID := strings.CutPrefix(path, "/v1/checkpoint/")
	switch {
	case !s.checkpointsServed():
		s.writeError(ctx, c, aci.Errorf(aci.CodeUnsupported, "provider %s cannot snapshot: no checkpoints", s.pool.Capabilities().Provider))
	case ctx.IsPost() && !hasID:
		if len(ctx.PostBody()) > s.cfg.MaxBodyBytes {
			s.writeError(ctx, c, aci.Errorf(aci.CodePayloadTooLarge, "body over %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		var req api.CheckpointRequest
		if err := c.decodeWithin(ctx.PostBody(), &req, &s.lim); err != nil {
			s.writeError(ctx, c, err)
			return
		}
		reply, err := s.checkpoint(s.ctx, &req)
		if err != nil {
			s.writeError(ctx, c, err)
			return
		}
		s.writeReply(ctx, c, reply)
	case hasID && id != "" && ctx.IsGet():
		reply, err := s.describeCheckpoint(id)
		if err != nil {
			s.writeError(ctx, c, err)
			return
		}
		s.writeReply(ctx, c, reply)
	case hasID && id != "" && ctx.IsDelete():
		s.writeReply(ctx, c, &api.CheckpointDeleteReply{CheckpointID: id, Deleted: s.deleteCheckpoint(id)})
	default:
		s.writeError(ctx, c, aci.Errorf(aci.CodeBadRequest, "%s %s: want POST /v1/checkpoint, GET or DELETE /v1/checkpoint/{id}", ctx.Method(), path))
	}
}

// checkpoint snapshots env_id's live episode into a new named checkpoint.
func (s *Server) checkpoint(ctx context.Context, req *api.CheckpointRequest) (*api.Checkpoint, error) {
	src, err := s.getEnv(req.EnvID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ResetTimeout)
	defer cancel()
	if err := s.admitCheckpoint(); err != nil {
		return nil, err
	}
	admitted := true
	defer func() {
		if admitted {
			s.ckpts.mu.Lock()
			s.ckpts.pending--
			s.ckpts.mu.Unlock()
		}
	}()
	src.mu.Lock()
	switch {
	case src.closed || src.ep == nil:
		src.mu.Unlock()
		return nil, aci.Errorf(aci.CodeNotFound, "env %q has no episode to checkpoint", req.EnvID)
	case src.ep.over:
		src.mu.Unlock()
		return nil, aci.Errorf(aci.CodeEpisodeOver, "episode %s is over: checkpoint a live episode", src.ep.traj.EpisodeID)
	case src.lease == nil || src.lease.Err() != nil:
		s.died(src, src.leaseErr(), trajectory.SandboxDied)
		src.mu.Unlock()
		return nil, aci.Errorf(aci.CodeSandboxDied, "env %q: sandbox died", req.EnvID)
	}
	p := s.envPool(src)
	snap, err := p.Snapshot(ctx, src.lease)
	ck := &checkpoint{
		id: newID("ckpt-"), snap: snap, task: src.task, envID: src.id, episodeID: src.ep.traj.EpisodeID,
		step: src.ep.step, maxSteps: src.ep.maxSteps, coords: src.coords,
		frame: src.lastFrame, display: src.display, pool: p, screen: src.screen,
	}
	src.mu.Unlock()
	if err != nil {
		s.m.checkpoints.WithLabelValues(string(codeOf(err))).Inc()
		return nil, fmt.Errorf("checkpoint %s: %w", req.EnvID, err)
	}
	n, ok, err := p.SnapshotBytes(ctx, snap)
	if err != nil {
		p.DeleteSnapshot(snap)
		return nil, fmt.Errorf("checkpoint %s: %w", req.EnvID, err)
	}
	if ok {
		ck.bytes = n
	}
	s.ckpts.mu.Lock()
	s.ckpts.pending--
	admitted = false
	if s.ckpts.bytes+ck.bytes > s.cfg.MaxCheckpointBytes {
		held := s.ckpts.bytes
		s.ckpts.mu.Unlock()
		p.DeleteSnapshot(snap)
		s.m.checkpoints.WithLabelValues(string(aci.CodeCheckpointLimit)).Inc()
		return nil, aci.Errorf(aci.CodeCheckpointLimit, "checkpoint of %d bytes would exceed the server's %d bytes of checkpoints (%d held; server setting max_checkpoint_bytes): delete some", ck.bytes, s.cfg.MaxCheckpointBytes, held)
	}
	ck.lastUsed = time.Now()
	s.ckpts.byID[ck.id] = ck
	s.ckpts.bytes += ck.bytes
	reply := s.describe(ck, ck.lastUsed)
	s.ckpts.mu.Unlock()
	s.m.checkpoints.WithLabelValues("ok").Inc()
	s.cfg.Logf("envserver: checkpoint %s of env %s at step %d: snapshot %s, %d bytes", ck.id, ck.envID, ck.step, snap, ck.bytes)
	return reply, nil
}

// admitCheckpoint counts a checkpoint being taken against the count cap,
// and refuses one when the count or the bytes are already at their cap.
func (s *Server) admitCheckpoint() error {
	s.ckpts.mu.Lock()
	defer s.ckpts.mu.Unlock()
	if n := len(s.ckpts.byID) + s.ckpts.pending; n >= s.cfg.MaxCheckpoints {
		s.m.checkpoints.WithLabelValues(string(aci.CodeCheckpointLimit)).Inc()
		return aci.Errorf(aci.CodeCheckpointLimit, "%d checkpoints held or being taken, the server's limit (server setting max_checkpoints): delete some", n)
	}
	if s.ckpts.bytes >= s.cfg.MaxCheckpointBytes {
		s.m.checkpoints.WithLabelValues(string(aci.CodeCheckpointLimit)).Inc()
		return aci.Errorf(aci.CodeCheckpointLimit, "checkpoints hold %d bytes, the server's limit of %d (server setting max_checkpoint_bytes): delete some", s.ckpts.bytes, s.cfg.MaxCheckpointBytes)
	}
	s.ckpts.pending++
	return nil
}

// describe is ck on the wire (ckpts.mu held).
func (s *Server) describe(ck *checkpoint, now time.Time) *api.Checkpoint {
	left := s.cfg.CheckpointTTL - now.Sub(ck.lastUsed)
	return &api.Checkpoint{
		CheckpointID: ck.id, EnvID: ck.envID, EpisodeID: ck.episodeID, Task: ck.task.ID,
		Step: ck.step, Frame: ck.frame, Bytes: ck.bytes, ExpiresInMS: max(left, 0).Milliseconds(),
	}
}

// notFoundCheckpoint is the error for an id that names no live checkpoint.
func notFoundCheckpoint(id string) error {
	return aci.Errorf(aci.CodeNotFound, "unknown checkpoint %q (never made, deleted, or expired after its idle TTL)", id)
}

func (s *Server) describeCheckpoint(id string) (*api.Checkpoint, error) {
	s.ckpts.mu.Lock()
	defer s.ckpts.mu.Unlock()
	ck := s.ckpts.byID[id]
	if ck == nil {
		return nil, notFoundCheckpoint(id)
	}
	return s.describe(ck, time.Now()), nil
}

// useCheckpoint takes id for a reset or fork starting from it: its TTL
// restarts and its snapshot stays until done is called, even if it is
// deleted meanwhile.
func (s *Server) useCheckpoint(id string) (ck *checkpoint, done func(), err error) {
	if !s.checkpointsServed() {
		return nil, nil, aci.Errorf(aci.CodeUnsupported, "provider %s cannot snapshot: no checkpoints", s.pool.Capabilities().Provider)
	}
	s.ckpts.mu.Lock()
	defer s.ckpts.mu.Unlock()
	ck = s.ckpts.byID[id]
	if ck == nil {
		return nil, nil, notFoundCheckpoint(id)
	}
	ck.uses++
	ck.lastUsed = time.Now()
	var once sync.Once
	return ck, func() {
		once.Do(func() {
			s.ckpts.mu.Lock()
			ck.uses--
			ck.lastUsed = time.Now()
			gone := ck.deleted && ck.uses == 0
			s.ckpts.mu.Unlock()
			if gone {
				ck.pool.DeleteSnapshot(ck.snap)
			}
		})
	}, nil
}

// deleteCheckpoint removes id from the table; its snapshot is deleted now,
// or when the last reset or fork starting from it is done. It reports
// whether id was live.
func (s *Server) deleteCheckpoint(id string) bool {
	s.ckpts.mu.Lock()
	ck := s.ckpts.byID[id]
	if ck == nil {
		s.ckpts.mu.Unlock()
		return false
	}
	delete(s.ckpts.byID, id)
	s.ckpts.bytes -= ck.bytes
	ck.deleted = true
	gone := ck.uses == 0
	s.ckpts.mu.Unlock()
	if gone {
		ck.pool.DeleteSnapshot(ck.snap)
	}
	return true
}

// deleteAllCheckpoints deletes every checkpoint (shutdown: no request is
// in flight any more).
func (s *Server) deleteAllCheckpoints() {
	s.ckpts.mu.Lock()
	ids := make([]string, 0, len(s.ckpts.byID))
	for id := range s.ckpts.byID {
		ids = append(ids, id)
	}
	s.ckpts.mu.Unlock()
	for _, id := range ids {
		s.deleteCheckpoint(id)
	}
}

// reapCheckpoints deletes checkpoints unused for CheckpointTTL.
func (s *Server) reapCheckpoints() {
	defer s.wg.Done()
	tick := time.NewTicker(max(s.cfg.CheckpointTTL/8, 50*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		cutoff := time.Now().Add(-s.cfg.CheckpointTTL)
		var idle []string
		s.ckpts.mu.Lock()
		for id, ck := range s.ckpts.byID {
			if ck.uses == 0 && ck.lastUsed.Before(cutoff) {
				idle = append(idle, id)
			}
		}
		s.ckpts.mu.Unlock()
		for _, id := range idle {
			s.cfg.Logf("envserver: deleting checkpoint %s: unused for %s", id, s.cfg.CheckpointTTL)
			s.deleteCheckpoint(id)
		}
	}
}
