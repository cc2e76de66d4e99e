package stack

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/pool/docker"
)

func init() {
	newProvider = func(ctx context.Context, cfg *configs.Server, opts Options, st *Stack) error {
		if cfg.Provider != "docker" {
			return fmt.Errorf("unknown provider %q (want process or docker)", cfg.Provider)
		}
		p, err := docker.New(ctx, docker.Options{
			GuestdPath:    opts.GuestdPath,
			Instance:      docker.InstanceFor(cfg.State),
			StateDir:      filepath.Join(cfg.State, "docker"),
			CPUs:          cfg.SandboxCPUs,
			SnapshotBytes: cfg.SnapshotBytes,
		})
		if err != nil {
			return err
		}
		st.Provider = p
		return nil
	}
}
