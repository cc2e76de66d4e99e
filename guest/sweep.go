package guest

import (
	"context"
	"errors"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/internal/procstat"
	"golang.org/x/sys/unix"
)

// The process sweeps: the scoring freeze stops the episode's processes
// (SIGSTOP), a reset's quiesce kills them (SIGKILL), and a verifier's
// leftovers are killed by uid. Each pass walks /proc, opens every process
// it means to signal by pidfd, checks that the pidfd names the process it
// listed (signalPass) and signals through the pidfd, so a pid that was
// reused between the listing and the signal is never hit.

// ownProcs lists the processes that may belong to the episode, guestd
// excluded: as PID 1 every process of the namespace, elsewhere guestd's own
// descendants. Zombies are left out.
func ownProcs() []procstat.Stat {
	self := os.Getpid()
	procs := procstat.All()
	var parent map[int]int
	if self != 1 {
		parent = parents(procs)
	}
	out := procs[:0]
	for _, p := range procs {
		if p.PID == self || p.Gone() || (self != 1 && !descends(p.PID, self, parent)) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// ownPids is the pids of ownProcs; as PID 1 just the names in /proc (no
// process's stat read, so zombies too: a zombie's thread reads as idle).
func ownPids() []int {
	if os.Getpid() != 1 {
		procs := ownProcs()
		pids := make([]int, len(procs))
		for i, p := range procs {
			pids[i] = p.PID
		}
		return pids
	}
	f, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	pids := make([]int, 0, len(names))
	for _, n := range names {
		if pid, err := strconv.Atoi(n); err == nil && pid > 1 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// parents maps each process to its parent.
func parents(procs []procstat.Stat) map[int]int {
	parent := make(map[int]int, len(procs))
	for _, p := range procs {
		parent[p.PID] = p.PPID
	}
	return parent
}

// descends reports whether pid has anc among its ancestors.
func descends(pid, anc int, parent map[int]int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		pid = parent[pid]
		if pid == anc {
			return true
		}
	}
	return false
}

// The syscalls signalPass makes, replaced in a test by ones that fail as an
// old kernel or a seccomp filter would.
var (
	pidfdOpen   = unix.PidfdOpen
	pidfdSignal = unix.PidfdSendSignal
	killPid     = unix.Kill
)

// signalled is a process a pass signalled, with the pidfd it was signalled
// through: readable once the process has exited. fd is -1 where no pidfd
// could be opened (an old kernel, a seccomp filter) and the signal went by
// pid.
type signalled struct {
	procstat.Stat
	fd int
}

// signalPass sends sig to each of procs that skip does not pass over. Each
// is opened by pidfd, and the pidfd is used only when the process's start
// time, read after the open, is the one listed: the pid was not reused
// since procs was read, so the pidfd names the process meant. A process
// that ended meanwhile is passed over. It returns what it signalled (the
// caller closes their fds) and how many refused the signal.
func signalPass(procs []procstat.Stat, sig unix.Signal, skip func(procstat.Stat) bool) (sent []signalled, refused int) {
	for _, p := range procs {
		if skip != nil && skip(p) {
			continue
		}
		fd, err := pidfdOpen(p.PID, 0)
		if errors.Is(err, unix.ESRCH) {
			continue // gone already
		}
		if err != nil {
			// No pidfd: by pid, after the same check (racy, as any
			// signal by pid is).
			if st, err := procstat.Read(p.PID); err != nil || st.Start != p.Start {
				continue
			}
			if err := killPid(p.PID, sig); err != nil {
				if !errors.Is(err, unix.ESRCH) {
					refused++
				}
				continue
			}
			sent = append(sent, signalled{p, -1})
			continue
		}
		if st, err := procstat.Read(p.PID); err != nil || st.Start != p.Start {
			unix.Close(fd) // the process listed ended, and its pid may be another's now
			continue
		}
		if err := pidfdSignal(fd, sig, nil, 0); err != nil {
			unix.Close(fd)
			if !errors.Is(err, unix.ESRCH) {
				refused++
			}
			continue
		}
		sent = append(sent, signalled{p, fd})
	}
	return sent, refused
}

// freeze stops (SIGSTOP) every process that could be the agent's
// (ownProcs) but the exempt ones, and waits until none can run user code.
// A stop that is pending blocks fork, so passes repeat until one finds
// nothing new. It returns how many processes it stopped.
func freeze(ctx context.Context, exempt map[int]bool) (int, error) {
	type key struct {
		pid   int
		start uint64
	}
	stopped := map[key]bool{}
	var pending []procstat.Stat
	for {
		sent, _ := signalPass(ownProcs(), unix.SIGSTOP, func(p procstat.Stat) bool {
			return exempt[p.PID] || stopped[key{p.PID, p.Start}]
		})
		for _, p := range sent {
			if p.fd >= 0 {
				unix.Close(p.fd)
			}
			stopped[key{p.PID, p.Start}] = true
			pending = append(pending, p.Stat)
		}
		if len(sent) == 0 {
			break
		}
		if ctx.Err() != nil {
			return len(stopped), aci.Errorf(aci.CodeTimeout, "score: freeze: processes kept appearing for %v", freezeTimeout)
		}
	}
	// Wait until every stopped process is off the CPU: stopped, or in the
	// kernel with the stop pending (it stops before user code runs again).
	for _, p := range pending {
		for {
			st, err := procstat.Read(p.PID)
			if err != nil || st.Start != p.Start || st.Gone() || st.State == 'T' || st.State == 't' || st.State == 'D' {
				break
			}
			if ctx.Err() != nil {
				return len(stopped), aci.Errorf(aci.CodeTimeout, "score: freeze: pid %d did not stop", p.PID)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	return len(stopped), nil
}

// sweep kills every process that may belong to the episode (ownProcs) and
// is not kept, and returns once none is left, with how many kills it sent;
// thaw runs after the first pass's kills are sent (a frozen process cannot
// die, and a thawed one with SIGKILL pending runs no code). Each pass waits
// on the pidfds of what it killed; a process forked before its parent's
// kill shows up in the next pass, and a pass that finds nothing left ends
// the sweep. A process killed by pid, or refusing the kill, has no pidfd to
// wait on: it is looked for again a millisecond later, until ctx's
// deadline; then the sweep fails, and the reset with it. So the sweep fails
// closed: it ends only when none is left, or at its deadline.
func sweep(ctx context.Context, keep map[int]bool, thaw func() error) (int, error) {
	dying, blind := killPass(keep)
	if err := thaw(); err != nil {
		closeAll(dying)
		return 0, err
	}
	n := 0
	for len(dying) > 0 || blind > 0 {
		n += len(dying) + blind
		err := awaitExit(ctx, dying)
		closeAll(dying)
		if err != nil {
			return n, err
		}
		if blind > 0 {
			select {
			case <-ctx.Done():
				return n, aci.Errorf(aci.CodeTimeout, "reset: %d process(es) did not end", blind)
			case <-time.After(time.Millisecond):
			}
		}
		dying, blind = killPass(keep)
	}
	return n, nil
}

// killPass is one pass of sweep: the pidfds of the processes it killed, and
// how many it cannot wait on that way (killed by pid, or refusing).
func killPass(keep map[int]bool) (fds []int, blind int) {
	sent, blind := signalPass(ownProcs(), unix.SIGKILL, func(p procstat.Stat) bool { return keep[p.PID] })
	for _, p := range sent {
		if p.fd < 0 {
			blind++
		} else {
			fds = append(fds, p.fd)
		}
	}
	return fds, blind
}

// awaitExit waits until every pidfd's process has exited, or ctx ends.
func awaitExit(ctx context.Context, fds []int) error {
	pfds := make([]unix.PollFd, len(fds))
	for i, fd := range fds {
		pfds[i] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	}
	for len(pfds) > 0 {
		if ctx.Err() != nil {
			return aci.Errorf(aci.CodeTimeout, "reset: %d process(es) did not end", len(pfds))
		}
		// In slices of 50 ms, so that ctx's end is seen.
		if _, err := unix.Poll(pfds, 50); err != nil && err != unix.EINTR {
			return aci.Errorf(aci.CodeInternal, "reset: poll pidfds: %v", err)
		}
		pfds = slices.DeleteFunc(pfds, func(p unix.PollFd) bool { return p.Revents != 0 })
	}
	return nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// killUID SIGKILLs every process of uid (the scoring identity's leftovers).
func killUID(uid int) {
	sent, _ := signalPass(procstat.All(), unix.SIGKILL, func(p procstat.Stat) bool {
		var st unix.Stat_t
		return unix.Stat("/proc/"+strconv.Itoa(p.PID), &st) != nil || int(st.Uid) != uid
	})
	for _, p := range sent {
		if p.fd >= 0 {
			unix.Close(p.fd)
		}
	}
}
