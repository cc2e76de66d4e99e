package process

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cgroupRoot is where the host mounts its cgroup hierarchies.
const cgroupRoot = "/sys/fs/cgroup"

// agentControllers are the cgroup v1 controllers an agent's processes are
// put under, when the host mounts them: freezer (the scoring freeze),
// memory, pids and cpu (its limits, so exhausting them is its own loss and
// never another sandbox's or guestd's).
var agentControllers = []string{"freezer", "memory", "pids", "cpu"}

// sandboxCgroup is the in-sandbox directory holding the agent's cgroups,
// one subdirectory per controller; root's alone.
const sandboxCgroup = "/run/cgroup"

// agentLimits bound one sandbox's agent processes.
type agentLimits struct {
	memory int64 // bytes; 0: none
	pids   int64 // 0: none
	cpus   int   // 0: none
}

// agentCgroups are one sandbox's cgroups for its agent's processes, by
// controller, as host directories.
type agentCgroups map[string]string

// newAgentCgroups makes name under this process's own cgroup in each
// available v1 hierarchy of agentControllers, with two children: guest (the
// sandbox's init, guestd and the X server) and agent (everything the agent
// runs, under lim). A controller the host does not offer (or does not let
// us write) is skipped: the freeze then falls back to guestd's sweep, the
// limits to rlimits. The map holds the name's directory per controller.
func newAgentCgroups(name string, lim agentLimits) agentCgroups {
	own := ownCgroups()
	cg := agentCgroups{}
	for _, ctl := range agentControllers {
		base, ok := own[ctl]
		if !ok {
			continue
		}
		dir := filepath.Join(cgroupRoot, ctl, base, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			continue
		}
		agent := filepath.Join(dir, "agent")
		err := os.Mkdir(filepath.Join(dir, "guest"), 0o700)
		if err == nil {
			err = os.Mkdir(agent, 0o700)
		}
		if err == nil {
			switch ctl {
			case "memory":
				if lim.memory > 0 {
					err = writeCg(agent, "memory.limit_in_bytes", strconv.FormatInt(lim.memory, 10))
				}
			case "pids":
				if lim.pids > 0 {
					err = writeCg(agent, "pids.max", strconv.FormatInt(lim.pids, 10))
				}
			case "cpu":
				if lim.cpus > 0 {
					err = writeCg(agent, "cpu.cfs_period_us", "100000")
					if err == nil {
						err = writeCg(agent, "cpu.cfs_quota_us", strconv.Itoa(lim.cpus*100000))
					}
				}
			}
		}
		if err != nil {
			agentCgroups{ctl: dir}.remove()
			continue
		}
		cg[ctl] = dir
	}
	return cg
}

// enter puts pid (the sandbox's init) in the guest cgroups.
func (cg agentCgroups) enter(pid int) error {
	var errs []error
	for _, d := range cg {
		errs = append(errs, writeCg(filepath.Join(d, "guest"), "cgroup.procs", strconv.Itoa(pid)))
	}
	return errors.Join(errs...)
}

// thaw thaws the freezer: frozen processes cannot die, so a sandbox is
// thawed before it is killed.
func (cg agentCgroups) thaw() {
	if d, ok := cg["freezer"]; ok {
		writeCg(filepath.Join(d, "agent"), "freezer.state", "THAWED")
	}
}

// remove removes the cgroups, waiting up to a second for the kernel to
// finish with their processes.
func (cg agentCgroups) remove() error {
	cg.thaw()
	var errs []error
	for _, top := range cg {
		for _, d := range []string{filepath.Join(top, "agent"), filepath.Join(top, "guest"), top} {
			if err := rmdirCg(d); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// rmdirCg removes an empty cgroup, waiting up to a second for the kernel to
// finish with its processes.
func rmdirCg(d string) error {
	deadline := time.Now().Add(time.Second)
	for {
		err := os.Remove(d)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeCg(dir, file, val string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(val), 0)
}

// ownCgroups maps each v1 controller to this process's cgroup path in its
// hierarchy, from /proc/self/cgroup.
func ownCgroups() map[string]string {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			if _, err := os.Stat(filepath.Join(cgroupRoot, ctl, parts[2])); err == nil {
				out[ctl] = parts[2]
			}
		}
	}
	return out
}

// guestdArgs are guestd's flags for the cgroups as the sandbox sees them.
func (cg agentCgroups) guestdArgs() []string {
	if len(cg) == 0 {
		return nil
	}
	return []string{"--cgroups", sandboxCgroup}
}

func (cg agentCgroups) String() string {
	ctls := make([]string, 0, len(cg))
	for _, ctl := range agentControllers {
		if _, ok := cg[ctl]; ok {
			ctls = append(ctls, ctl)
		}
	}
	return fmt.Sprintf("cgroups(%s)", strings.Join(ctls, ","))
}

// removeRunCgroups removes the agent cgroups an orphaned run left (its
// sandboxes' names start with "shinken-px<run>-"), thawing them first.
func removeRunCgroups(run string) {
	own := ownCgroups()
	for _, ctl := range agentControllers {
		base, ok := own[ctl]
		if !ok {
			continue
		}
		dirs, _ := filepath.Glob(filepath.Join(cgroupRoot, ctl, base, "shinken-px"+run+"-*"))
		for _, d := range dirs {
			agentCgroups{ctl: d}.remove()
		}
	}
}

// newCgroupsProbe names the agent controllers this host offers, as a
// comma-separated list ("" for none).
func newCgroupsProbe() string {
	own := ownCgroups()
	var ctls []string
	for _, ctl := range agentControllers {
		if _, ok := own[ctl]; ok {
			ctls = append(ctls, ctl)
		}
	}
	return strings.Join(ctls, ",")
}
