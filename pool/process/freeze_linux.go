package process

import (
	"context"
	"path/filepath"
	"time"

	"github.com/shinken-rl/shinken/internal/cgfreeze"
)

// freezeAgent freezes a sandbox's agent processes (its cgroup's "agent"
// leaf) and waits until the kernel reports them frozen, so a snapshot copies
// a tree nobody rearranges meanwhile. The returned thaw undoes it (always
// call it). Without a cgroup or a freezer it does nothing, and when the
// kernel does not finish freezing in time the copy runs on a live tree: the
// copy's descriptor walk alone keeps it inside the tree, and what the agent
// tears is only its own fork's copy. An agent already frozen (by the
// scoring freeze) stays frozen: its owner thaws it.
func freezeAgent(ctx context.Context, cg sandboxCgroup, logf func(string, ...any)) (thaw func()) {
	var dir string
	switch c := cg.(type) {
	case *v1Cgroup:
		d, ok := c.dir["freezer"]
		if !ok {
			return func() {}
		}
		dir = filepath.Join(d, "agent")
	case *v2Cgroup:
		dir = filepath.Join(c.dir, "agent")
	default:
		return func() {}
	}
	if frozen, err := cgfreeze.Frozen(dir); err == nil && frozen {
		return func() {}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := cgfreeze.Freeze(ctx, dir); err != nil {
		logf("process: snapshot of a live tree: %v", err)
		return func() {}
	}
	return func() { _ = cgfreeze.Thaw(dir) }
}
