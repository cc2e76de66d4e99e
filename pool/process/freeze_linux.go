package process

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// freeze freezes the agent's processes (the v1 freezer of its "agent"
// cgroup) and waits until the kernel reports them frozen, so a snapshot
// copies a tree nobody rearranges meanwhile. The returned thaw undoes it
// (always call it). Without a freezer it does nothing: the copy's
// descriptor walk alone keeps it inside the tree.
func (cg agentCgroups) freeze(ctx context.Context) (thaw func(), err error) {
	d, ok := cg["freezer"]
	if !ok {
		return func() {}, nil
	}
	agent := filepath.Join(d, "agent")
	if b, err := os.ReadFile(filepath.Join(agent, "freezer.state")); err == nil && string(bytes.TrimSpace(b)) == "FROZEN" {
		return func() {}, nil // frozen by the scoring freeze: it thaws
	}
	thaw = func() { _ = writeCg(agent, "freezer.state", "THAWED") }
	if err := writeCg(agent, "freezer.state", "FROZEN"); err != nil {
		return func() {}, fmt.Errorf("freeze: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for {
		b, err := os.ReadFile(filepath.Join(agent, "freezer.state"))
		if err != nil {
			thaw()
			return func() {}, fmt.Errorf("freeze: %w", err)
		}
		if string(bytes.TrimSpace(b)) == "FROZEN" {
			return thaw, nil
		}
		select {
		case <-ctx.Done():
			thaw()
			return func() {}, fmt.Errorf("freeze: agent cgroup still %s: %w", bytes.TrimSpace(b), ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}
