// Package cgfreeze freezes the processes of one cgroup: the v1 freezer's
// freezer.state or cgroup v2's cgroup.freeze. Both the host (a snapshot
// copies a tree nobody rearranges meanwhile) and guestd (the scoring
// freeze) use it, so the kernel's quirks are handled in one place.
package cgfreeze

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// ErrNoFreezer: the directory is neither a v1 freezer cgroup nor a v2
// cgroup.
var ErrNoFreezer = errors.New("cgfreeze: no freezer in this cgroup")

// kind tells the two interfaces apart: the file written, the values, and
// how the state is read back.
type kind struct {
	file, frozen, thawed string
	state                string
	isFrozen             func([]byte) bool
}

var (
	v1 = kind{file: "freezer.state", frozen: "FROZEN", thawed: "THAWED", state: "freezer.state",
		isFrozen: func(b []byte) bool { return string(bytes.TrimSpace(b)) == "FROZEN" }}
	v2 = kind{file: "cgroup.freeze", frozen: "1", thawed: "0", state: "cgroup.events",
		isFrozen: func(b []byte) bool {
			for _, l := range bytes.Split(b, []byte("\n")) {
				if f := bytes.Fields(l); len(f) == 2 && string(f[0]) == "frozen" {
					return string(f[1]) == "1"
				}
			}
			return false
		}}
)

func kindOf(dir string) (kind, error) {
	if _, err := os.Stat(filepath.Join(dir, v1.file)); err == nil {
		return v1, nil
	}
	if _, err := os.Stat(filepath.Join(dir, v2.file)); err == nil {
		return v2, nil
	}
	return kind{}, fmt.Errorf("%w: %s", ErrNoFreezer, dir)
}

// Frozen reports whether the kernel says every process in dir is frozen.
func Frozen(dir string) (bool, error) {
	k, err := kindOf(dir)
	if err != nil {
		return false, err
	}
	b, err := os.ReadFile(filepath.Join(dir, k.state))
	if err != nil {
		return false, err
	}
	return k.isFrozen(b), nil
}

// Thaw thaws dir.
func Thaw(dir string) error {
	k, err := kindOf(dir)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, k.file), []byte(k.thawed), 0)
}

// Freeze freezes dir and waits until the kernel reports it frozen, or ctx
// ends (then dir is thawed again and the error wraps ctx's).
//
// The v1 freezer can stay FREEZING: a task caught in the middle of a fork
// may escape the one pass a write makes over the cgroup, and a cgroup whose
// processes keep forking (a shell loop) keeps producing such tasks. Every
// read of FREEZING is therefore answered with another write of FROZEN (a
// new pass), and now and then with a thaw and a short pause before the next
// write, the remedy container runtimes settled on. cgroup v2 freezes forks
// in flight itself; the rewrite is harmless there.
func Freeze(ctx context.Context, dir string) error {
	k, err := kindOf(dir)
	if err != nil {
		return err
	}
	write := func(v string) error { return os.WriteFile(filepath.Join(dir, k.file), []byte(v), 0) }
	var last []byte
	for i := 0; ; i++ {
		if i%50 == 49 {
			_ = write(k.thawed)
			if !sleep(ctx, 10*time.Millisecond) {
				break
			}
		}
		if err := write(k.frozen); err != nil {
			_ = write(k.thawed)
			return fmt.Errorf("cgfreeze: freeze %s: %w", dir, err)
		}
		b, err := os.ReadFile(filepath.Join(dir, k.state))
		if err != nil {
			_ = write(k.thawed)
			return fmt.Errorf("cgfreeze: freeze %s: %w", dir, err)
		}
		if k.isFrozen(b) {
			return nil
		}
		last = b
		if !sleep(ctx, time.Millisecond) {
			break
		}
	}
	_ = write(k.thawed)
	return fmt.Errorf("cgfreeze: %s still %q: %w", dir, bytes.TrimSpace(last), ctx.Err())
}

// sleep waits d, or less when ctx ends first (then it answers false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
