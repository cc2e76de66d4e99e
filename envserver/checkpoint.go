package envserver

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/pool"
)

// checkpoint is a named snapshot of an env's state, with what an episode
// started from it carries over (task, step, budget, coordinate space, the
// frame and display descriptor its coordinates map through).
type checkpoint struct {
	id       string
	snap     string
	task     *configs.Task
	episode  string // the episode it was taken from
	step     int
	maxSteps int
	seed     *int64
	coords   *aci.Coords
	display  *aci.Display
	frame    string
	bytes    int64

	// guarded by checkpoints.mu
	lastUsed time.Time
	users    int  // resets and forks starting from it now
	deleted  bool // its snapshot goes when the last user is done
}

// checkpoints is the server's table of named checkpoints, bounded in count
// and bytes, each dropped after an idle TTL.
type checkpoints struct {
	mu    sync.Mutex
	m     map[string]*checkpoint
	bytes int64
}

// checkpointsOn reports whether the pool can take named checkpoints.
func (s *Server) checkpointsOn() bool {
	c := s.pool.Capabilities()
	return c.Snapshot && c.Restore
}

func (s *Server) checkpointSpec() *api.CheckpointSpec {
	if !s.checkpointsOn() {
		return nil
	}
	return &api.CheckpointSpec{
		SnapshotKind: s.pool.Capabilities().SnapshotKind,
		MaxCount:     s.cfg.MaxCheckpoints, MaxBytes: s.cfg.MaxCheckpointBytes,
		IdleTTLS: int(s.cfg.CheckpointTTL / time.Second),
	}
}

// checkpoint is POST /v1/checkpoint.
func (s *Server) checkpoint(ctx context.Context, req *api.CheckpointRequest) (*api.CheckpointReply, error) {
	if !s.checkpointsOn() {
		c := s.pool.Capabilities()
		return nil, aci.Errorf(aci.CodeUnsupported, "provider %s cannot snapshot (snapshot_kind %s): no checkpoints", c.Provider, c.SnapshotKind)
	}
	e, err := s.getEnv(req.EnvID)
	if err != nil {
		return nil, err
	}
	if err := s.checkpointRoom(0); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ResetTimeout)
	defer cancel()
	e.mu.Lock()
	switch {
	case e.closed || e.ep == nil:
		e.mu.Unlock()
		return nil, aci.Errorf(aci.CodeNotFound, "env %q has no episode to checkpoint", req.EnvID)
	case e.ep.over:
		e.mu.Unlock()
		return nil, aci.Errorf(aci.CodeEpisodeOver, "episode %s is over: checkpoint a live episode", e.ep.traj.EpisodeID)
	case e.lease == nil || e.lease.Err() != nil:
		s.died(e, e.leaseErr())
		e.mu.Unlock()
		return nil, aci.Errorf(aci.CodeSandboxDied, "env %q: sandbox died", req.EnvID)
	}
	snap, n, err := s.pool.Checkpoint(ctx, e.lease)
	ck := &checkpoint{
		id: newID("ck-"), snap: snap, task: e.task, episode: e.ep.traj.EpisodeID,
		step: e.ep.step, maxSteps: e.ep.maxSteps, seed: e.ep.traj.Seed, coords: e.coords,
		display: e.display, frame: e.lastFrame, bytes: n, lastUsed: time.Now(),
	}
	e.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", req.EnvID, err)
	}
	s.ck.mu.Lock()
	if err := s.checkpointRoomLocked(n); err != nil {
		s.ck.mu.Unlock()
		s.pool.DeleteCheckpoint(snap)
		return nil, err
	}
	s.ck.m[ck.id] = ck
	s.ck.bytes += n
	s.ck.mu.Unlock()
	s.m.checkpoints.WithLabelValues("created").Inc()
	return &api.CheckpointReply{Checkpoint: ck.id, SnapshotKind: s.pool.Capabilities().SnapshotKind, Task: ck.task.ID, Step: ck.step, Bytes: n}, nil
}

func (s *Server) checkpointRoom(n int64) error {
	s.ck.mu.Lock()
	defer s.ck.mu.Unlock()
	return s.checkpointRoomLocked(n)
}

// checkpointRoomLocked fails with checkpoint_limit unless one more
// checkpoint of n bytes fits.
func (s *Server) checkpointRoomLocked(n int64) error {
	if len(s.ck.m) >= s.cfg.MaxCheckpoints {
		return aci.Errorf(aci.CodeCheckpointLimit, "%d checkpoints live, the limit (server setting max_checkpoints); delete some with /v1/checkpoint/delete", len(s.ck.m))
	}
	if s.ck.bytes+n > s.cfg.MaxCheckpointBytes {
		return aci.Errorf(aci.CodeCheckpointLimit, "checkpoints would hold %d bytes, over the limit of %d (server setting max_checkpoint_bytes); delete some with /v1/checkpoint/delete", s.ck.bytes+n, s.cfg.MaxCheckpointBytes)
	}
	return nil
}

// useCheckpoint looks a checkpoint up and holds it for a reset or fork;
// the caller calls done when the sandboxes started from it are leased.
func (s *Server) useCheckpoint(id string) (ck *checkpoint, done func(), err error) {
	s.ck.mu.Lock()
	defer s.ck.mu.Unlock()
	ck = s.ck.m[id]
	if ck == nil {
		return nil, nil, aci.Errorf(aci.CodeNotFound, "unknown checkpoint %q (deleted, or idle past its TTL)", id)
	}
	ck.users++
	ck.lastUsed = time.Now()
	return ck, func() {
		s.ck.mu.Lock()
		ck.users--
		ck.lastUsed = time.Now()
		drop := ck.deleted && ck.users == 0
		s.ck.mu.Unlock()
		if drop {
			s.pool.DeleteCheckpoint(ck.snap)
		}
	}, nil
}

// deleteCheckpoint drops id from the table; its snapshot goes now, or
// when the last reset or fork using it is done.
func (s *Server) deleteCheckpoint(id string) bool {
	s.ck.mu.Lock()
	ck := s.ck.m[id]
	if ck == nil {
		s.ck.mu.Unlock()
		return false
	}
	delete(s.ck.m, id)
	s.ck.bytes -= ck.bytes
	ck.deleted = true
	drop := ck.users == 0
	s.ck.mu.Unlock()
	if drop {
		s.pool.DeleteCheckpoint(ck.snap)
	}
	s.m.checkpoints.WithLabelValues("deleted").Inc()
	return true
}

// checkpointDelete is POST /v1/checkpoint/delete.
func (s *Server) checkpointDelete(req *api.CheckpointDeleteRequest) (*api.CheckpointDeleteReply, error) {
	if err := s.checkBatch(len(req.Checkpoints)); err != nil {
		return nil, err
	}
	out := &api.CheckpointDeleteReply{Deleted: []string{}}
	for _, id := range req.Checkpoints {
		if s.deleteCheckpoint(id) {
			out.Deleted = append(out.Deleted, id)
		}
	}
	return out, nil
}

// reapCheckpoints deletes checkpoints unused for CheckpointTTL, and every
// checkpoint when the server shuts down.
func (s *Server) reapCheckpoints() {
	defer s.wg.Done()
	tick := time.NewTicker(max(s.cfg.CheckpointTTL/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			s.ck.mu.Lock()
			var all []string
			for id := range s.ck.m {
				all = append(all, id)
			}
			s.ck.mu.Unlock()
			for _, id := range all {
				s.deleteCheckpoint(id)
			}
			return
		case <-tick.C:
		}
		cutoff := time.Now().Add(-s.cfg.CheckpointTTL)
		var idle []string
		s.ck.mu.Lock()
		for id, ck := range s.ck.m {
			if ck.users == 0 && ck.lastUsed.Before(cutoff) {
				idle = append(idle, id)
			}
		}
		s.ck.mu.Unlock()
		for _, id := range idle {
			s.cfg.Logf("envserver: deleting checkpoint %s: idle for %s", id, s.cfg.CheckpointTTL)
			s.m.checkpoints.WithLabelValues("expired").Inc()
			s.deleteCheckpoint(id)
		}
	}
}

// leaseFromCheckpoint leases n sandboxes in ck's state.
func (s *Server) leaseFromCheckpoint(ctx context.Context, ck *checkpoint, n int) ([]*pool.Lease, error) {
	ls, err := s.pool.ForkSnapshot(ctx, ck.snap, n)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", ck.id, err)
	}
	return ls, nil
}
