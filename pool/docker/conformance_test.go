package docker

import (
	"testing"

	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/pooltest"
)

// TestConformance runs the shared provider suite against the real engine.
func TestConformance(t *testing.T) {
	if skipWhy != "" {
		pooltest.SkipUnless(t, pooltest.RequireDocker, skipWhy)
	}
	pooltest.ProviderSuite(t, func(t *testing.T) pool.Provider { return newProvider(t) })
}
