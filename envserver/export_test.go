package envserver

import (
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
)

// EnvGuest is the guest client of env id's sandbox, for tests that read the
// sandbox's state behind the trainer API.
func EnvGuest(s *Server, id string) (*client.Client, error) {
	e, err := s.getEnv(id)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lease == nil {
		return nil, aci.Errorf(aci.CodeSandboxDied, "env %s has no sandbox", id)
	}
	return e.lease.Guest(), nil
}
