package envserver

import "github.com/shinken-rl/shinken/guest/client"

// EnvGuest returns the guest connection of an env's live sandbox, for
// operators and tests that look inside it (ok is false for an unknown env or
// one without a live sandbox). The connection stays the pool's.
func (s *Server) EnvGuest(envID string) (c *client.Client, ok bool) {
	s.mu.Lock()
	e := s.envs[envID]
	s.mu.Unlock()
	if e == nil {
		return nil, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lease == nil {
		return nil, false
	}
	return e.lease.Guest(), true
}
