package process

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where the host mounts its cgroup hierarchies.
const cgroupRoot = "/sys/fs/cgroup"

// sandboxCgroupDir is the in-sandbox directory holding the sandbox's
// cgroups (one subdirectory per v1 controller, or "unified" for v2), bound
// there for guestd alone (root's, mode 0700).
const sandboxCgroupDir = "/run/cgroup"

// reasonOOM is what a sandbox ended at its memory limit reports as
// detail.reason of its sandbox_died (docs/api.md, errors). The pids limit
// ends nothing: the agent's leaf has a lower one (cgroupLimits.agentPids),
// so a fork bomb only fails its own forks and guestd can still start the
// verifier (docs/architecture.md, "Sandbox limits").
const reasonOOM = "oom"

// guestPids are the pids of a sandbox's limit the agent cannot take
// (at most a quarter of a small limit): guestd's, the X server's and the
// verifier's headroom.
const guestPids = 64

// cgroupLimits bound one whole sandbox: init, guestd, the X server and
// everything the agent runs (docs/architecture.md, "Sandbox limits").
type cgroupLimits struct {
	memory    int64 // bytes; 0: none
	pids      int64 // the whole sandbox's; 0: none
	agentPids int64 // the agent leaf's (below pids); 0: none
	cpus      int   // CPU quota in whole CPUs; 0: none
	cpuWeight int   // relative CPU share, 1..10000 (v2 scale; v1 converts); 0: default
	ioWeight  int   // relative IO share, 1..10000 (v2 scale); 0: default
}

// cgroupHost is the host's cgroup hierarchy as probed at start: v2 where
// the unified hierarchy holds the controllers, v1 where it does not. One
// interface, two small implementations (cgroupV1, cgroupV2).
type cgroupHost interface {
	// version is "v1" or "v2".
	version() string
	// controllers are the controllers sandboxes get, as probed.
	controllers() []string
	// create makes the sandbox's cgroup name under this process's own,
	// with its "guest" and "agent" leaves, under lim.
	create(name string, lim cgroupLimits) (sandboxCgroup, error)
	// removeRun removes the cgroups an orphaned run left (their names
	// start with "shinken-px<run>-").
	removeRun(run string)
}

// sandboxCgroup is one sandbox's cgroup.
type sandboxCgroup interface {
	// enter puts pid (the sandbox's init) in the guest leaf; its children
	// are born there.
	enter(pid int) error
	// limitHit names the limit that killed in the sandbox (reasonOOM), ""
	// for none, from the kernel's counters.
	limitHit() string
	// watch calls hit (once, from its own goroutine) when the kernel
	// reports the sandbox at one of its limits, until stop is called.
	watch(hit func(reason string)) (stop func(), err error)
	// thaw thaws the agent's freezer: frozen processes cannot die.
	thaw()
	// remove removes the cgroup once its processes are gone.
	remove() error
	// binds are the host directories bound at /run/cgroup/<name> for
	// guestd (each holds "guest" and "agent").
	binds() map[string]string
	// dirs are the host directories (for tests and logs).
	dirs() []string
}

// probeCgroups finds the host's cgroup hierarchy: v2 when the unified
// hierarchy has the memory and pids controllers and this process may
// enable them for its children; else v1 with whichever of its
// controllers this process may write; nil when neither.
func probeCgroups() cgroupHost {
	if v2 := probeV2(); v2 != nil {
		return v2
	}
	if v1 := probeV1(); v1 != nil {
		return v1
	}
	return nil
}

// ownCgroups maps each hierarchy of /proc/self/cgroup to this process's
// path in it: v1 controllers by name, the unified hierarchy as "".
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
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			out[ctl] = parts[2]
		}
	}
	return out
}

func writeCg(dir, file, val string) error {
	return os.WriteFile(filepath.Join(dir, file), []byte(val), 0)
}

// readKV reads a "key value" cgroup file (memory.events, pids.events,
// memory.oom_control) into a map; missing keys read as 0.
func readKV(path string) map[string]int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	out := map[string]int64{}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			out[f[0]] = v
		}
	}
	return out
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

// watchFiles reports the first limit hit: it waits on inotify IN_MODIFY of
// the event files (the kernel notifies them when a counter moves; the
// counters are re-read through cg.limitHit) and on the extra pollable fds,
// each of which means its reason when readable (a v1 OOM eventfd). Nothing
// is polled on a timer.
func watchFiles(cg sandboxCgroup, files []string, extra map[*os.File]string, hit func(string)) (func(), error) {
	srcs := map[*os.File]string{}
	for f, r := range extra {
		srcs[f] = r
	}
	// An inotify instance only where there are files to watch (v2): the
	// kernel allows a user few of them (fs.inotify.max_user_instances,
	// often 128), far fewer than the sandboxes a host holds; v1 is told by
	// its eventfds alone.
	if len(files) > 0 {
		ifd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
		if err != nil {
			for f := range srcs {
				f.Close()
			}
			return nil, fmt.Errorf("inotify: %w", err)
		}
		for _, f := range files {
			if _, err := unix.InotifyAddWatch(ifd, f, unix.IN_MODIFY); err != nil {
				unix.Close(ifd)
				for f := range srcs {
					f.Close()
				}
				return nil, fmt.Errorf("watch %s: %w", f, err)
			}
		}
		srcs[os.NewFile(uintptr(ifd), "inotify")] = ""
	}
	var once sync.Once
	fire := func(r string) {
		if r == "" {
			r = cg.limitHit()
		}
		if r != "" {
			once.Do(func() { hit(r) })
		}
	}
	for f, r := range srcs {
		go func() {
			buf := make([]byte, 4096)
			for {
				if _, err := f.Read(buf); err != nil {
					return // closed by stop
				}
				fire(r)
			}
		}()
	}
	go fire("") // a limit hit before the watch began
	return func() {
		for f := range srcs {
			f.Close()
		}
	}, nil
}
