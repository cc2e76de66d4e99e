package bench

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shinken-rl/shinken/internal/procstat"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times (100 on every
// Linux architecture Go supports).
const clockTicks = 100

// procStat is what bench reads from /proc/<pid>/stat.
type procStat struct {
	pid, ppid int
	start     uint64 // start time in ticks since boot: (pid, start) names a process
	ownTicks  uint64 // utime+stime
	comm      string // the command name (/proc/<pid>/comm)
}

// readProcStat reads /proc/<pid>/stat (internal/procstat).
func readProcStat(pid int) (procStat, error) {
	st, err := procstat.Read(pid)
	if err != nil {
		return procStat{}, err
	}
	return procStat{pid: pid, ppid: st.PPID, start: st.Start, ownTicks: st.UTime + st.STime, comm: st.Comm}, nil
}

// allProcs reads the stat of every process visible in /proc.
func allProcs() []procStat {
	ents, _ := os.ReadDir("/proc")
	out := make([]procStat, 0, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(pid); err == nil {
			out = append(out, st)
		}
	}
	return out
}

// subtree returns root and every descendant of root among procs.
func subtree(procs []procStat, root int) []procStat {
	kids := map[int][]int{}
	by := map[int]procStat{}
	for _, p := range procs {
		kids[p.ppid] = append(kids[p.ppid], p.pid)
		by[p.pid] = p
	}
	var out []procStat
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if p, ok := by[pid]; ok {
			out = append(out, p)
		}
		queue = append(queue, kids[pid]...)
	}
	return out
}

// CPUSampler measures the CPU time a process tree spends over an interval
// by sampling each member's own utime+stime periodically and summing what
// every process, even one that exited since, was seen to use. Children's
// times (cutime) are left out, so nothing counts twice; a process that lives
// and dies between two samples is missed. Sandboxes destroyed mid-run (their
// processes vanish with their pid namespace, reaped by nobody who counts)
// are still counted up to their last sample.
type CPUSampler struct {
	root  int
	first map[[2]uint64]uint64 // (pid, start) -> ticks at first sight
	last  map[[2]uint64]uint64
	comm  map[[2]uint64]string
	stop  chan struct{}
	done  chan struct{}
	n     atomic.Int64 // samples completed
}

// StartCPUSampler samples root's tree every period until Stop.
func StartCPUSampler(root int, period time.Duration) *CPUSampler {
	s := &CPUSampler{root: root, first: map[[2]uint64]uint64{}, last: map[[2]uint64]uint64{}, comm: map[[2]uint64]string{},
		stop: make(chan struct{}), done: make(chan struct{})}
	s.sample(true)
	go func() {
		defer close(s.done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				s.sample(false)
			}
		}
	}()
	return s
}

func (s *CPUSampler) sample(initial bool) {
	for _, p := range subtree(allProcs(), s.root) {
		k := [2]uint64{uint64(p.pid), p.start}
		if _, ok := s.first[k]; !ok {
			if initial {
				s.first[k] = p.ownTicks
			} else {
				s.first[k] = 0 // born during the interval
			}
		}
		s.last[k] = p.ownTicks
		s.comm[k] = p.comm
	}
	s.n.Add(1)
}

// Samples reports how many samples have completed so far.
func (s *CPUSampler) Samples() int64 { return s.n.Load() }

// Stop takes a last sample and returns the tree's CPU seconds since start.
func (s *CPUSampler) Stop() float64 {
	close(s.stop)
	<-s.done
	s.sample(false)
	var ticks uint64
	for k, last := range s.last {
		if f := s.first[k]; last > f {
			ticks += last - f
		}
	}
	return float64(ticks) / clockTicks
}

// ByCommand splits the CPU seconds Stop returned by command name (Xvfb,
// guestd, envserver, …). Call it after Stop.
func (s *CPUSampler) ByCommand() map[string]float64 {
	out := map[string]float64{}
	for k, last := range s.last {
		if f := s.first[k]; last > f {
			out[s.comm[k]] += float64(last-f) / clockTicks
		}
	}
	return out
}

// HostCPUSeconds is the busy CPU time of the whole machine from /proc/stat
// (every process of every user, so it includes other load on the machine).
func HostCPUSeconds() float64 {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 8 || fs[0] != "cpu" {
			continue
		}
		var busy uint64
		for i, s := range fs[1:] {
			if i == 3 || i == 4 { // idle, iowait
				continue
			}
			v, _ := strconv.ParseUint(s, 10, 64)
			busy += v
		}
		return float64(busy) / clockTicks
	}
	return 0
}

// Mem is the memory of a process tree in bytes.
type Mem struct {
	RSS   int64 // resident set, shared pages counted in full
	PSS   int64 // proportional set: shared pages divided among sharers
	Procs int
}

// TreeMemory sums RSS and PSS (from smaps_rollup) over root and its
// descendants.
func TreeMemory(root int) Mem {
	var m Mem
	for _, p := range subtree(allProcs(), root) {
		rss, pss := procMem(p.pid)
		m.RSS += rss
		m.PSS += pss
		m.Procs++
	}
	return m
}

// procMem reads a process's Rss and Pss in bytes from smaps_rollup.
func procMem(pid int) (rss, pss int64) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "smaps_rollup"))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "Rss:":
			rss = kb << 10
		case "Pss:":
			pss = kb << 10
		}
	}
	return rss, pss
}

// MemTotal is the machine's memory in bytes from /proc/meminfo.
func MemTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
