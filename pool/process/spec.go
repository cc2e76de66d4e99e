package process

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/shinken-rl/shinken/guest/hostdeps"
	"github.com/shinken-rl/shinken/internal/procstat"
	"github.com/shinken-rl/shinken/pool"
)

// Capabilities implements pool.Provider.
func (p *Provider) Capabilities() pool.Capabilities {
	return pool.Capabilities{
		Provider:     "process",
		SnapshotKind: pool.SnapshotDisk,
		Snapshot:     true,
		Restore:      true,
		Fork:         true,
		Confined:     p.confined,
		Isolation:    p.isolation(),
		Confinement:  p.confinement(),
		Notes:        p.notes,
		A11y:         hostdeps.HasA11y(), // sandboxes run this host's binaries
	}
}

// isolation describes what keeps the reward out of the agent's reach.
func (p *Provider) isolation() string {
	if !p.confined {
		return "none: unconfined sandboxes see the whole host; on done guestd stops its own descendants before the verifier runs, as the agent's uid"
	}
	cg := "rlimits (the host gives no cgroups)"
	if p.cgroups != nil {
		cg = "a cgroup " + p.cgroups.version() + " per sandbox (" + strings.Join(p.cgroups.controllers(), ",") + "; an OOM or a fork bomb ends that sandbox only)"
	}
	filter := ""
	if seccompSupported() {
		filter = "a seccomp filter over the whole sandbox (no ptrace or process_vm_*, namespaces, mounts, keyrings, bpf, perf, io_uring, modules); "
	}
	return "minimal root (OS directories read-only; no checkout, configs, state or other sandboxes; /proc hidepid, its kernel files masked or read-only as a container runtime's; a private /dev); " + filter +
		"guestd is PID 1, root with 8 capabilities; " +
		"the agent runs as its own uid, no capabilities, no_new_privs, under " + cg + "; on done the agent's processes are frozen (cgroup freezer where available, then a SIGSTOP sweep of " +
		"every process but guestd and Xvfb) and the verifier runs as a uid of its own with its own HOME; the guest socket is root's"
}

// confinement is Capabilities().Confinement: what New probed.
func (p *Provider) confinement() *pool.Confinement {
	if !p.confined {
		return &pool.Confinement{UIDs: "caller", AgentRoot: os.Geteuid() == 0, Dev: "host"}
	}
	c := &pool.Confinement{
		Namespaces:   namespaceNames,
		UIDs:         "per_sandbox",
		NoNewPrivs:   true,
		ReadOnlyRoot: true,
		Dev:          "private",
		Limits: map[string]int64{
			"nofile": int64(p.opts.NoFile), "nproc": int64(p.opts.NProc), "fsize_bytes": p.opts.FileBytes,
			"shm_bytes": p.opts.ShmBytes, "state_bytes": p.opts.StateBytes,
			"snapshot_bytes": max(p.opts.SnapshotBytes, 0),
		},
	}
	if seccompSupported() {
		// seccomp_linux.go: a deny list of its own, not the engine's
		// default profile (docs/architecture.md, "Process provider hardening").
		c.Seccomp = seccompProfileName
	}
	if p.cgroups != nil {
		c.Cgroup = p.cgroups.version()
		for _, ctl := range p.cgroups.controllers() {
			switch ctl {
			case "memory":
				c.Limits["memory_bytes"] = p.opts.MemoryBytes
			case "pids":
				c.Limits["pids"] = int64(p.opts.NProc)
			case "cpu":
				c.Limits["cpu_millis"] = int64(p.opts.CPUs) * 1000
				c.Limits["cpu_weight"] = int64(p.opts.CPUWeight)
			case "io", "blkio":
				c.Limits["io_weight"] = int64(p.opts.IOWeight)
			}
		}
	}
	return c
}

// KillX SIGKILLs a sandbox's X server from the host (tests use it: the
// agent cannot). It finds the children of the sandbox's init named Xvfb.
func (p *Provider) KillX(ctx context.Context, id string) error {
	init := p.InitPID(id)
	if init == 0 {
		return notFound("sandbox", id)
	}
	n := 0
	for _, pid := range childrenNamed(init, "Xvfb") {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	if n == 0 {
		return fmt.Errorf("process: sandbox %s: no Xvfb found", id)
	}
	return nil
}

// childrenNamed lists the host pids of parent's children whose command name
// starts with name.
func childrenNamed(parent int, name string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := procstat.Read(pid)
		if err == nil && st.PPID == parent && strings.HasPrefix(st.Comm, name) {
			pids = append(pids, pid)
		}
	}
	return pids
}
