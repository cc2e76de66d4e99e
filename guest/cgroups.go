package guest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/internal/cgfreeze"
	"golang.org/x/sys/unix"
)

// AgentCgroups are the cgroups a sandbox's provider made for it: under a
// root, one directory per v1 controller (or one, "unified", on a cgroup v2
// host), each holding "guest"
// (guestd and the X server) and "agent" (everything the agent runs, under
// the agent's limits). The agent's processes are born in "agent": guestd
// steps into it to fork them and steps back, so no child runs a single
// instruction outside (cgroup v1 has no clone-into-cgroup). The freezer's
// "agent" is what the scoring freeze freezes. A nil *AgentCgroups does
// nothing: processes start as they are, and the freeze is the sweep alone.
type AgentCgroups struct {
	mu     sync.Mutex // one fork at a time; the freeze waits for it
	ctls   []string   // controller directories
	frozen bool
	stuck  bool // guestd once failed to leave the agent's cgroups
	// threads: every controller moves single threads (cgroup v1's tasks
	// file), so only the forking thread steps into the agent's cgroups.
	threads bool
}

// OpenAgentCgroups opens the cgroups under root; nil when root is empty or
// holds none.
func OpenAgentCgroups(root string) (*AgentCgroups, error) {
	if root == "" {
		return nil, nil
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("guest: cgroups: %w", err)
	}
	a := &AgentCgroups{}
	for _, e := range ents {
		d := filepath.Join(root, e.Name())
		for _, sub := range []string{"agent", "guest"} {
			if _, err := os.Stat(filepath.Join(d, sub, "cgroup.procs")); err != nil {
				return nil, fmt.Errorf("guest: cgroups: %s: %w", e.Name(), err)
			}
		}
		a.ctls = append(a.ctls, d)
	}
	if len(a.ctls) == 0 {
		return nil, nil
	}
	a.threads = true
	for _, d := range a.ctls {
		if _, err := os.Stat(filepath.Join(d, "agent", "tasks")); err != nil {
			a.threads = false
		}
	}
	return a, nil
}

// move puts this process (all its threads) in sub of every controller.
func (a *AgentCgroups) move(sub string) error { return a.write(sub, "cgroup.procs", os.Getpid()) }

// moveThread puts the calling OS thread alone in sub of every controller
// (cgroup v1's tasks file).
func (a *AgentCgroups) moveThread(sub string) error { return a.write(sub, "tasks", unix.Gettid()) }

// write writes id to file of sub in every controller.
func (a *AgentCgroups) write(sub, file string, id int) error {
	b := []byte(strconv.Itoa(id))
	var errs []error
	for _, d := range a.ctls {
		if err := os.WriteFile(filepath.Join(d, sub, file), b, 0); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Start starts cmd through start inside the agent's cgroups.
//
// On cgroup v1 only the forking thread steps in, locked to its goroutine:
// the child is born where its parent thread is, and the Go runtime starts
// new threads from its template thread, never from a locked one, so
// guestd never needs a thread while counted against the agent's pids
// limit (with the whole process inside, a fork bomb filling the agent's
// leaf made guestd's next thread creation fail and the runtime abort: the
// sandbox died of the agent's fork bomb). A v2 domain cgroup moves whole
// processes, and the whole of guestd steps in.
func (a *AgentCgroups) Start(cmd *exec.Cmd, start func(*exec.Cmd) (int, <-chan unix.WaitStatus, error)) (int, <-chan unix.WaitStatus, error) {
	if a == nil {
		return start(cmd)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.frozen {
		return 0, nil, aci.Errorf(aci.CodeEpisodeOver, "the agent's processes are frozen for scoring")
	}
	move := a.move
	if a.threads {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread() // stayLocked locks once more where the thread must not go back to work
		move = a.moveThread
	}
	if err := move("agent"); err != nil {
		if berr := move("guest"); berr != nil {
			a.frozen, a.stuck = true, true
			stayLocked(a.threads)
		}
		return 0, nil, fmt.Errorf("guest: enter the agent's cgroups: %w", err)
	}
	pid, ch, err := start(cmd)
	if berr := move("guest"); berr != nil {
		stayLocked(a.threads)
		// guestd must never stay where the freeze would stop it: refuse
		// the freeze from now on (the sweep still runs).
		a.frozen, a.stuck = true, true
		return pid, ch, errors.Join(err, fmt.Errorf("guest: leave the agent's cgroups: %w", berr))
	}
	return pid, ch, err
}

// stayLocked keeps a thread that could not leave the agent's cgroups locked
// to its goroutine for good: the runtime ends it with the goroutine, and no
// other code of guestd's runs on it inside (the deferred unlock is undone
// by a second lock).
func stayLocked(threads bool) {
	if threads {
		runtime.LockOSThread()
	}
}

// Thaw thaws the agent's freezer cgroup and lets the agent start processes
// again: an in-place reset thaws after sending the episode's processes
// SIGKILL (a frozen process cannot die; docs/architecture.md, "Reset in
// place"). A guestd that failed to leave the agent's cgroups stays refused.
func (a *AgentCgroups) Thaw() error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stuck {
		return errors.New("guest: guestd could not leave the agent's cgroups; the sandbox cannot be reset in place")
	}
	a.frozen = false
	for _, d := range a.ctls {
		if filepath.Base(d) == "freezer" {
			if err := os.WriteFile(filepath.Join(d, "agent", "freezer.state"), []byte("THAWED"), 0); err != nil {
				return fmt.Errorf("guest: thaw the agent's cgroup: %w", err)
			}
		}
	}
	return nil
}

// Freeze freezes the agent's freezer cgroup and waits until the kernel
// reports it FROZEN. Agents cannot start processes afterwards.
func (a *AgentCgroups) Freeze(ctx context.Context) error {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.frozen {
		return nil
	}
	a.frozen = true
	// v1: the freezer hierarchy's "agent"; v2: any controller's "agent"
	// (cgroup.freeze is in every v2 cgroup).
	var dir string
	for _, d := range a.ctls {
		if filepath.Base(d) == "freezer" {
			dir = filepath.Join(d, "agent")
		} else if _, err := os.Stat(filepath.Join(d, "agent", "cgroup.freeze")); err == nil && dir == "" {
			dir = filepath.Join(d, "agent")
		}
	}
	if dir == "" {
		return nil
	}
	if own, _ := os.ReadFile("/proc/self/cgroup"); strings.Contains(string(own), "/agent\n") {
		return errors.New("guest: guestd is in the agent's cgroup; not freezing it")
	}
	if err := cgfreeze.Freeze(ctx, dir); err != nil {
		a.frozen = false
		return fmt.Errorf("guest: %w", err)
	}
	return nil
}
