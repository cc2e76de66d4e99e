package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// v2Controllers are the unified hierarchy's controllers a sandbox uses
// (the freezer is cgroup.freeze, part of every v2 cgroup).
var v2Controllers = []string{"memory", "pids", "cpu", "io"}

// cgroupV2 is a host whose unified hierarchy holds the controllers: dir is
// this process's own cgroup there, ctls the controllers it delegates to
// its children.
type cgroupV2 struct {
	dir  string
	ctls []string
}

// serverLeaf is the leaf this process moves itself into on a v2 host when
// its own cgroup holds processes: the kernel's "no internal processes"
// rule lets a cgroup delegate controllers to its children only while it
// has no processes of its own. Sandboxes' cgroups are then the leaf's
// siblings.
const serverLeaf = "shinken-server"

// probeV2 enables v2Controllers for the sandboxes' cgroups, under this
// process's own cgroup (moving itself into serverLeaf first when that is
// what the kernel needs). Memory and pids are required; a host where they
// cannot be delegated (another process shares this cgroup, the hierarchy
// is not writable) has no v2 limits.
func probeV2() *cgroupV2 {
	base, ok := ownCgroups()[""]
	if !ok {
		return nil
	}
	dir := filepath.Join(cgroupRoot, base)
	if filepath.Base(dir) == serverLeaf {
		dir = filepath.Dir(dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "cgroup.subtree_control")); err != nil {
		// A hybrid host mounts the unified hierarchy elsewhere, without
		// controllers.
		return nil
	}
	avail, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil
	}
	h := &cgroupV2{dir: dir}
	enable := func(c string) error { return writeCg(dir, "cgroup.subtree_control", "+"+c) }
	for _, c := range v2Controllers {
		if !slices.Contains(strings.Fields(string(avail)), c) {
			continue
		}
		err := enable(c)
		if errors.Is(err, unix.EBUSY) {
			leaf := filepath.Join(dir, serverLeaf)
			if e := os.Mkdir(leaf, 0o755); e == nil || errors.Is(e, os.ErrExist) {
				if writeCg(leaf, "cgroup.procs", strconv.Itoa(os.Getpid())) == nil {
					err = enable(c)
				}
			}
		}
		if err == nil {
			h.ctls = append(h.ctls, c)
		}
	}
	if !slices.Contains(h.ctls, "memory") || !slices.Contains(h.ctls, "pids") {
		return nil
	}
	return h
}

func (h *cgroupV2) version() string { return "v2" }

func (h *cgroupV2) controllers() []string { return append([]string{"freezer"}, h.ctls...) }

// create makes name with the sandbox's limits, memory.oom.group (an OOM
// kill takes the whole sandbox, never one of its processes or another
// sandbox's) and guest and agent leaves.
func (h *cgroupV2) create(name string, lim cgroupLimits) (sandboxCgroup, error) {
	dir := filepath.Join(h.dir, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("cgroup: %w", err)
	}
	cg := &v2Cgroup{dir: dir}
	set := func(file, val string) error {
		if err := writeCg(dir, file, val); err != nil {
			return fmt.Errorf("cgroup %s: %w", file, err)
		}
		return nil
	}
	var errs []error
	if lim.memory > 0 {
		errs = append(errs, set("memory.max", strconv.FormatInt(lim.memory, 10)),
			set("memory.swap.max", "0"))
	}
	errs = append(errs, set("memory.oom.group", "1"))
	if lim.pids > 0 {
		errs = append(errs, set("pids.max", strconv.FormatInt(lim.pids, 10)))
	}
	if slices.Contains(h.ctls, "cpu") {
		if lim.cpuWeight > 0 {
			errs = append(errs, set("cpu.weight", strconv.Itoa(lim.cpuWeight)))
		}
		if lim.cpus > 0 {
			errs = append(errs, set("cpu.max", fmt.Sprintf("%d 100000", lim.cpus*100000)))
		}
	}
	if slices.Contains(h.ctls, "io") && lim.ioWeight > 0 {
		// io.weight needs a proportional IO scheduler; absent otherwise.
		_ = set("io.weight", "default "+strconv.Itoa(lim.ioWeight))
	}
	for _, c := range h.ctls {
		errs = append(errs, set("cgroup.subtree_control", "+"+c))
	}
	for _, leaf := range []string{"guest", "agent"} {
		errs = append(errs, os.Mkdir(filepath.Join(dir, leaf), 0o700))
	}
	if lim.agentPids > 0 {
		errs = append(errs, writeCg(filepath.Join(dir, "agent"), "pids.max", strconv.FormatInt(lim.agentPids, 10)))
	}
	// memory.swap.max is absent without swap accounting: not an error.
	errs = slices.DeleteFunc(errs, func(e error) bool {
		return e != nil && strings.Contains(e.Error(), "memory.swap.max") && errors.Is(e, os.ErrNotExist)
	})
	if err := errors.Join(errs...); err != nil {
		cg.remove()
		return nil, err
	}
	return cg, nil
}

func (h *cgroupV2) removeRun(run string) {
	dirs, _ := filepath.Glob(filepath.Join(h.dir, "shinken-px"+run+"-*"))
	for _, d := range dirs {
		(&v2Cgroup{dir: d}).remove()
	}
}

// v2Cgroup is one sandbox's cgroup in the unified hierarchy.
type v2Cgroup struct {
	dir string
}

func (cg *v2Cgroup) enter(pid int) error {
	return writeCg(filepath.Join(cg.dir, "guest"), "cgroup.procs", strconv.Itoa(pid))
}

// limitHit: memory.events counts OOM kills (oom_kill, oom_group_kill;
// hierarchical in v2).
func (cg *v2Cgroup) limitHit() string {
	if kv := readKV(filepath.Join(cg.dir, "memory.events")); kv["oom_kill"] > 0 || kv["oom_group_kill"] > 0 {
		return reasonOOM
	}
	return ""
}

// watch: the kernel notifies memory.events (inotify IN_MODIFY) when a
// counter moves; memory.oom.group has killed the sandbox whole by then.
func (cg *v2Cgroup) watch(hit func(string)) (func(), error) {
	return watchFiles(cg, []string{filepath.Join(cg.dir, "memory.events")}, nil, hit)
}

func (cg *v2Cgroup) thaw() { writeCg(filepath.Join(cg.dir, "agent"), "cgroup.freeze", "0") }

// remove kills what is left (cgroup.kill, where the kernel has it) and
// removes the leaves and the sandbox's cgroup.
func (cg *v2Cgroup) remove() error {
	if unix.Access(filepath.Join(cg.dir, "cgroup.kill"), unix.W_OK) == nil {
		writeCg(cg.dir, "cgroup.kill", "1")
	} else {
		cg.thaw()
	}
	var errs []error
	for _, d := range []string{filepath.Join(cg.dir, "agent"), filepath.Join(cg.dir, "guest"), cg.dir} {
		if err := rmdirCg(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (cg *v2Cgroup) binds() map[string]string { return map[string]string{"unified": cg.dir} }

func (cg *v2Cgroup) dirs() []string { return []string{cg.dir} }

func (cg *v2Cgroup) String() string { return "cgroup v2 (" + cg.dir + ")" }
