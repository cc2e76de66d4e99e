package stack

import (
	"context"
	"path/filepath"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/docker"
)

func init() {
	Register("docker", func(ctx context.Context, cfg *configs.Server, opts Options, _ func(string, ...any)) (pool.Provider, error) {
		p, err := docker.New(ctx, docker.Options{
			GuestdPath:    opts.GuestdPath,
			Instance:      docker.InstanceFor(cfg.State),
			StateDir:      filepath.Join(cfg.State, "docker"),
			CPUs:          cfg.SandboxCPUs,
			SnapshotBytes: cfg.SnapshotBytes,
		})
		if err != nil {
			return nil, err
		}
		return p, nil
	})
}
