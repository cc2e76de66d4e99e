// Package procstat reads /proc/<pid>/stat, the kernel's one-line summary of
// a process. Its second field, the command name, may hold spaces and
// parentheses, so the fields after it are counted from the last ')'. Every
// reader of the file in this repository goes through here.
package procstat

import (
	"bytes"
	"errors"
	"os"
	"strconv"
)

// Stat is what the repository reads of one process's stat line. Field
// numbers are proc(5)'s, counted from 1.
type Stat struct {
	PID    int
	Comm   string // field 2, without its parentheses
	State  byte   // field 3: R, S, D, T, t, Z, X, ...
	PPID   int    // field 4
	UTime  uint64 // field 14, in clock ticks
	STime  uint64 // field 15
	CUTime uint64 // field 16: waited-for children's user time
	CSTime uint64 // field 17
	Start  uint64 // field 22, in clock ticks since boot: (PID, Start) names a process for good
	Policy int    // field 41: the scheduling policy (SCHED_*)
}

// Gone reports a process that ended (a zombie, or dead).
func (s Stat) Gone() bool { return s.State == 'Z' || s.State == 'X' }

var errMalformed = errors.New("procstat: malformed stat line")

// Read reads /proc/<pid>/stat.
func Read(pid int) (Stat, error) {
	return ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
}

// ReadFile reads a stat file by its path (a thread's, under
// /proc/<pid>/task/<tid>/stat, say).
func ReadFile(path string) (Stat, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Stat{}, err
	}
	return Parse(b)
}

// Parse parses one stat line. A line too short for the start time (field
// 22) is refused; fields past it that the kernel left out read as zero.
func Parse(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	close := bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return Stat{}, errMalformed
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Stat{}, errMalformed
	}
	f := bytes.Fields(b[close+1:]) // f[0] is field 3
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, errMalformed
	}
	num := func(field int) uint64 {
		if field-3 >= len(f) {
			return 0
		}
		n, _ := strconv.ParseUint(string(f[field-3]), 10, 64)
		return n
	}
	return Stat{
		PID:    pid,
		Comm:   string(b[open+1 : close]),
		State:  f[0][0],
		PPID:   int(num(4)),
		UTime:  num(14),
		STime:  num(15),
		CUTime: num(16),
		CSTime: num(17),
		Start:  num(22),
		Policy: int(num(41)),
	}, nil
}

// All reads the stat of every process /proc shows; one that ends while it
// is read is left out.
func All() []Stat {
	f, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, _ := f.Readdirnames(-1)
	f.Close()
	out := make([]Stat, 0, len(names))
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil || pid <= 0 {
			continue
		}
		if st, err := Read(pid); err == nil {
			out = append(out, st)
		}
	}
	return out
}
