package envserver

import (
	"github.com/shinken-rl/shinken/aci"
)

// checkRequestID bounds a step's request_id by limits.max_request_id_bytes.
func (s *Server) checkRequestID(id string) error {
	if n := s.lim.MaxRequestIDBytes; len(id) > n {
		return aci.Errorf(aci.CodeBadRequest, "request_id of %d bytes: at most %d", len(id), n)
	}
	return nil
}

// replayed returns e's stored reply to the step with request id id, if that
// is the step e last ran (e.mu held).
func (s *Server) replayed(e *env, b *batch, id string) (slot, bool) {
	r := e.replay
	if id == "" || r == nil || r.id != id {
		return slot{}, false
	}
	sl := slot{res: r.res, replayed: true}
	if r.res.Obs != nil && !b.have[r.res.Obs.Frame] {
		sl.data = r.frame
		if sl.data == nil {
			sl.data, _ = b.decodeStored(r.key.format, r.stored, r.stored != nil)
		}
		if sl.data == nil {
			sl.data, _ = b.cached(s.cache, r.key)
		}
	}
	return sl, true
}

// remember stores sl as e's reply to the step with request id id (e.mu
// held); a step without an id clears what an earlier one stored, since that
// reply is no longer the env's last.
func (s *Server) remember(e *env, b *batch, id string, sl slot) {
	if id == "" {
		e.replay = nil
		return
	}
	r := &stepReplay{id: id, res: sl.res, frame: sl.data}
	if o := sl.res.Obs; o != nil {
		r.key = frameKey{hash: o.Frame, format: b.obs.Format, quality: b.obs.Quality}
		if b.obs.Format == aci.FormatRaw {
			r.frame = nil // lent by the batch (batch.decodeStored): kept stored
		}
		if r.frame == nil {
			// The client had it: keep it for a retry that may not, in the
			// cache's form (a raw frame is decoded only if a retry needs it).
			r.stored, _ = s.cache.getStored(r.key)
		}
	}
	e.replay = r
}
