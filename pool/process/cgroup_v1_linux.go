package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// v1Controllers are the cgroup v1 controllers a sandbox is put under, when
// the host mounts them: freezer (the scoring freeze), memory, pids, cpu and
// blkio (its limits).
var v1Controllers = []string{"freezer", "memory", "pids", "cpu", "blkio"}

// cgroupV1 is a host with cgroup v1 hierarchies: base is this process's
// own cgroup path by controller.
type cgroupV1 struct {
	base map[string]string
}

func probeV1() *cgroupV1 {
	own := ownCgroups()
	h := &cgroupV1{base: map[string]string{}}
	for _, ctl := range v1Controllers {
		base, ok := own[ctl]
		if !ok {
			continue
		}
		dir := filepath.Join(cgroupRoot, ctl, base)
		if unix.Access(dir, unix.W_OK) != nil {
			continue
		}
		h.base[ctl] = base
	}
	if len(h.base) == 0 {
		return nil
	}
	return h
}

func (h *cgroupV1) version() string { return "v1" }

func (h *cgroupV1) controllers() []string {
	var out []string
	for _, ctl := range v1Controllers {
		if _, ok := h.base[ctl]; ok {
			out = append(out, ctl)
		}
	}
	return out
}

// create makes name in each hierarchy with guest and agent leaves; the
// limits are on name itself, so they bound the whole sandbox. A controller
// whose limit cannot be written fails the sandbox (its limits would be
// silently absent); blkio's weight is best effort (the IO scheduler may
// not offer one).
func (h *cgroupV1) create(name string, lim cgroupLimits) (sandboxCgroup, error) {
	cg := &v1Cgroup{dir: map[string]string{}}
	for _, ctl := range h.controllers() {
		dir := filepath.Join(cgroupRoot, ctl, h.base[ctl], name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup %s: %w", ctl, err)
		}
		cg.dir[ctl] = dir
		for _, leaf := range []string{"guest", "agent"} {
			if err := os.Mkdir(filepath.Join(dir, leaf), 0o700); err != nil {
				cg.remove()
				return nil, fmt.Errorf("cgroup %s: %w", ctl, err)
			}
		}
		var err error
		switch ctl {
		case "memory":
			if lim.memory > 0 {
				err = writeCg(dir, "memory.limit_in_bytes", strconv.FormatInt(lim.memory, 10))
			}
		case "pids":
			if lim.pids > 0 {
				err = writeCg(dir, "pids.max", strconv.FormatInt(lim.pids, 10))
			}
			if err == nil && lim.agentPids > 0 {
				err = writeCg(filepath.Join(dir, "agent"), "pids.max", strconv.FormatInt(lim.agentPids, 10))
			}
		case "cpu":
			if lim.cpuWeight > 0 {
				// v2's weight 100 is v1's 1024 shares.
				err = writeCg(dir, "cpu.shares", strconv.Itoa(max(2, lim.cpuWeight*1024/100)))
			}
			if err == nil && lim.cpus > 0 {
				err = writeCg(dir, "cpu.cfs_period_us", "100000")
				if err == nil {
					err = writeCg(dir, "cpu.cfs_quota_us", strconv.Itoa(lim.cpus*100000))
				}
			}
		case "blkio":
			if lim.ioWeight > 0 {
				// 10..1000 in v1; absent without a proportional scheduler.
				_ = writeCg(dir, "blkio.weight", strconv.Itoa(min(1000, max(10, lim.ioWeight/10))))
			}
		}
		if err != nil {
			cg.remove()
			return nil, fmt.Errorf("cgroup %s limit: %w", ctl, err)
		}
	}
	return cg, nil
}

func (h *cgroupV1) removeRun(run string) {
	for ctl, base := range h.base {
		dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, ctl, base, "shinken-px"+run+"-*"))
		for _, d := range dirs {
			(&v1Cgroup{dir: map[string]string{ctl: d}}).remove()
		}
	}
}

// v1Cgroup is one sandbox's cgroups, by controller.
type v1Cgroup struct {
	dir map[string]string
}

func (cg *v1Cgroup) enter(pid int) error {
	var errs []error
	for _, d := range cg.dir {
		errs = append(errs, writeCg(filepath.Join(d, "guest"), "cgroup.procs", strconv.Itoa(pid)))
	}
	return errors.Join(errs...)
}

// limitHit: memory.oom_control counts the OOM kills (oom_kill, in the
// victim's own cgroup: v1 does not add them up the tree) and says whether
// the group is at its limit now (under_oom).
func (cg *v1Cgroup) limitHit() string {
	d, ok := cg.dir["memory"]
	if !ok {
		return ""
	}
	for _, leaf := range []string{"", "agent", "guest"} {
		if kv := readKV(filepath.Join(d, leaf, "memory.oom_control")); kv["oom_kill"] > 0 || kv["under_oom"] > 0 {
			return reasonOOM
		}
	}
	return ""
}

// watch: v1 has no memory.oom.group, so an OOM kill would take one process
// and leave a half-dead desktop; the OOM eventfd (cgroup.event_control)
// tells the provider, which ends the whole sandbox.
func (cg *v1Cgroup) watch(hit func(string)) (func(), error) {
	extra := map[*os.File]string{}
	if d, ok := cg.dir["memory"]; ok {
		efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
		if err != nil {
			return nil, fmt.Errorf("eventfd: %w", err)
		}
		ev := os.NewFile(uintptr(efd), "oom-eventfd")
		oc, err := os.Open(filepath.Join(d, "memory.oom_control"))
		if err == nil {
			err = writeCg(d, "cgroup.event_control", fmt.Sprintf("%d %d", efd, oc.Fd()))
			oc.Close()
		}
		if err != nil {
			ev.Close()
			return nil, fmt.Errorf("oom notification: %w", err)
		}
		extra[ev] = reasonOOM // the kernel signals it as the OOM begins
	}
	return watchFiles(cg, nil, extra, hit)
}

func (cg *v1Cgroup) thaw() {
	if d, ok := cg.dir["freezer"]; ok {
		writeCg(filepath.Join(d, "agent"), "freezer.state", "THAWED")
	}
}

func (cg *v1Cgroup) remove() error {
	cg.thaw()
	var errs []error
	for _, top := range cg.dir {
		for _, d := range []string{filepath.Join(top, "agent"), filepath.Join(top, "guest"), top} {
			if err := rmdirCg(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (cg *v1Cgroup) binds() map[string]string { return cg.dir }

func (cg *v1Cgroup) dirs() []string {
	var out []string
	for _, ctl := range v1Controllers {
		if d, ok := cg.dir[ctl]; ok {
			out = append(out, d)
		}
	}
	return out
}

func (cg *v1Cgroup) String() string {
	var ctls []string
	for _, ctl := range v1Controllers {
		if _, ok := cg.dir[ctl]; ok {
			ctls = append(ctls, ctl)
		}
	}
	return "cgroup v1 (" + strings.Join(ctls, ",") + ")"
}
