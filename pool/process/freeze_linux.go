package process

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// freezeAgent freezes a sandbox's agent processes (its cgroup's "agent"
// leaf) and waits until the kernel reports them frozen, so a snapshot copies
// a tree nobody rearranges meanwhile. The returned thaw undoes it (always
// call it). Without a cgroup or a freezer it does nothing: the copy's
// descriptor walk alone keeps it inside the tree. An agent already frozen
// (by the scoring freeze) stays frozen: its owner thaws it.
func freezeAgent(ctx context.Context, cg sandboxCgroup) (thaw func(), err error) {
	var file, frozen, thawed, state string
	var stateOf func([]byte) string
	switch c := cg.(type) {
	case *v1Cgroup:
		d, ok := c.dir["freezer"]
		if !ok {
			return func() {}, nil
		}
		agent := filepath.Join(d, "agent")
		file, frozen, thawed, state = filepath.Join(agent, "freezer.state"), "FROZEN", "THAWED", filepath.Join(agent, "freezer.state")
		stateOf = func(b []byte) string { return string(bytes.TrimSpace(b)) }
	case *v2Cgroup:
		agent := filepath.Join(c.dir, "agent")
		file, frozen, thawed, state = filepath.Join(agent, "cgroup.freeze"), "1", "0", filepath.Join(agent, "cgroup.events")
		stateOf = func(b []byte) string {
			for _, l := range bytes.Split(b, []byte("\n")) {
				if f := bytes.Fields(l); len(f) == 2 && string(f[0]) == "frozen" {
					return string(f[1])
				}
			}
			return ""
		}
	default:
		return func() {}, nil
	}
	if b, err := os.ReadFile(state); err == nil && stateOf(b) == frozen {
		return func() {}, nil
	}
	thaw = func() { _ = writeCg(filepath.Dir(file), filepath.Base(file), thawed) }
	if err := writeCg(filepath.Dir(file), filepath.Base(file), frozen); err != nil {
		return func() {}, fmt.Errorf("freeze: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		b, err := os.ReadFile(state)
		if err != nil {
			thaw()
			return func() {}, fmt.Errorf("freeze: %w", err)
		}
		if stateOf(b) == frozen {
			return thaw, nil
		}
		select {
		case <-ctx.Done():
			thaw()
			return func() {}, fmt.Errorf("freeze: agent cgroup not frozen: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}
