package guest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Quiescence: the desktop has finished answering.
//
// DAMAGE says when the screen changed, never that it will not change again,
// so a settle on damage alone must wait out a window (first_ms, quiet_ms) on
// every step. The kernel can say more. An app can only draw by running, or
// through a timer or a wake-up it is blocked on; so when every thread of every
// process that can draw on the display (the X server among them) is blocked,
// none due to wake within the settle's horizon, and none ran between two
// reads of the whole set, nothing more will be drawn for this step that the
// damage windows would have waited for: the settle ends (info.settle.idle).
//
// Per thread, /proc/<pid>/task/<tid>/schedstat gives the CPU time it has run
// (any run between the two reads changes it) and .../syscall what it is
// blocked in: "running" for a runnable thread, else the syscall and its
// arguments. A wait with no timeout (poll with -1, a read on a socket or
// pipe, a futex with no timespec) is idle: only another thread of the set, or
// the X server's input, which guestd makes itself, can end it. A wait with a
// timeout is idle only if the timeout is longer than the horizon
// (max(first_ms, quiet_ms)): a button's release drawn 100 ms after its press,
// or a type-ahead search closing after 200 ms, is waited for; a cursor blink
// 400 ms away is not. A relative timeout is judged by its length (when the
// wait began is not known), an absolute one by what is left of it.
// Timespecs are read from /proc/<pid>/mem. Anything else (a thread
// in disk sleep, stopped, in a syscall this table does not know, or whose
// files cannot be read) is busy, and the settle falls back to the damage
// windows, which is never worse than before.
//
// It is only sound where guestd sees every process that can draw: as its pid
// namespace's PID 1 (a sandbox), every process /proc shows; elsewhere its own
// descendants, which in session mode include the X server and the window
// manager (ownProcs, the set an in-place reset sweeps). An X client started
// from outside is invisible, so a guestd serving someone else's display runs
// without it (Config.SettleIdle).
//
// Reading another user's syscall and mem files takes ptrace access: the
// providers give guestd CAP_SYS_PTRACE (over its own namespace only).

// quiescence reads the desktop's threads; one per server, its files kept open
// between reads (a procfs file answers afresh at each pread from 0).
type quiescence struct {
	mu    sync.Mutex
	tasks map[int]*taskFiles // tid → open files
	mems  map[int]*os.File   // pid → /proc/<pid>/mem, opened on demand
	gen   uint64
	buf   [512]byte
}

type taskFiles struct {
	pid        int
	sys, sched *os.File
	gen        uint64
	run        uint64 // ns run at the last read
}

// maxQuiesceTasks bounds the files kept open: a desktop with more threads
// than this is never judged idle (a fork bomb gets the damage windows).
const maxQuiesceTasks = 2048

// newQuiescence returns nil where timespecs are not the 64-bit ones it reads.
func newQuiescence() *quiescence {
	if strconv.IntSize != 64 {
		return nil
	}
	return &quiescence{tasks: map[int]*taskFiles{}, mems: map[int]*os.File{}}
}

// quietSnap is one read of the whole set: each thread's CPU time so far,
// whether every thread was idle, and whether anything ran (or appeared, or
// ended) since the read it was taken after.
type quietSnap struct {
	run     map[int]uint64 // tid → ns run
	idle    bool
	changed bool
}

// quiet reports whether the desktop was quiescent from the previous read to
// this one: nothing ran in between and every thread is idle now.
func (b quietSnap) quiet() bool { return b.idle && !b.changed }

// read takes one snapshot after prev (zero: the first of a settle); horizon
// is how far ahead a timer still counts as pending work.
//
// The known threads are read first and the set rediscovered after, and only
// when something changed: a thread or process joins the set only by being
// cloned from one in it, which ran to do so. So a clone before a thread's
// read is found by the discovery that follows, and one after it shows at the
// next read as a changed run time; a read that finds nothing changed since a
// complete one is complete too.
func (q *quiescence) read(prev quietSnap, horizon time.Duration) quietSnap {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gen++
	snap := quietSnap{run: make(map[int]uint64, len(q.tasks)), idle: true, changed: prev.run == nil}
	// ran: the processes one of whose threads ran since its last read; only
	// they can have new threads.
	ran := map[int]bool{}
	for tid, t := range q.tasks {
		q.readInto(&snap, tid, t, horizon, ran)
	}
	if !snap.changed {
		for tid, ns := range snap.run {
			if v, ok := prev.run[tid]; !ok || v != ns {
				snap.changed = true
				break
			}
		}
		snap.changed = snap.changed || len(snap.run) != len(prev.run)
	}
	if !snap.changed {
		return snap
	}
	known := make(map[int]bool, len(q.mems))
	for _, t := range q.tasks {
		known[t.pid] = true
	}
	for _, pid := range ownPids() {
		if known[pid] && !ran[pid] {
			continue // no thread ran: none was cloned
		}
		tids, err := readTids(pid)
		if err != nil {
			continue // gone
		}
		for _, tid := range tids {
			if t, ok := q.tasks[tid]; ok && t.pid == pid {
				t.gen = q.gen
				continue
			}
			t, err := q.task(pid, tid)
			if err != nil {
				if !errors.Is(err, errGone) {
					snap.idle = false
				}
				continue
			}
			q.readInto(&snap, tid, t, horizon, ran)
		}
	}
	live := make(map[int]bool, len(q.mems))
	for tid, t := range q.tasks {
		if t.gen != q.gen {
			q.drop(tid)
			delete(snap.run, tid)
		} else {
			live[t.pid] = true
		}
	}
	for pid, f := range q.mems { // a process's memory goes with its last thread
		if !live[pid] {
			f.Close()
			delete(q.mems, pid)
		}
	}
	if len(snap.run) > maxQuiesceTasks {
		snap.idle = false
	}
	return snap
}

// readInto reads one thread into snap, and marks its process in ran when it
// ran since its last read; a thread gone is dropped and counts as a change.
func (q *quiescence) readInto(snap *quietSnap, tid int, t *taskFiles, horizon time.Duration, ran map[int]bool) {
	ns, idle, err := q.readTask(t, horizon)
	if errors.Is(err, errGone) {
		q.drop(tid)
		snap.changed = true
		return
	}
	if ns != t.run {
		ran[t.pid] = true
	}
	t.gen, t.run = q.gen, ns
	if err != nil || !idle {
		snap.idle = false
	}
	snap.run[tid] = ns
}

var errGone = errors.New("task gone")

func readTids(pid int) ([]int, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	tids := make([]int, 0, len(names))
	for _, n := range names {
		if tid, err := strconv.Atoi(n); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}

func (q *quiescence) task(pid, tid int) (*taskFiles, error) {
	q.drop(tid) // a tid reused by another process
	if len(q.tasks) >= maxQuiesceTasks {
		return nil, errors.New("too many tasks")
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/"
	sched, err := os.Open(dir + "schedstat")
	if err != nil {
		return nil, errGone
	}
	sys, err := os.Open(dir + "syscall")
	if err != nil {
		sched.Close()
		if errors.Is(err, os.ErrNotExist) {
			return nil, errGone
		}
		return nil, err
	}
	t := &taskFiles{pid: pid, sys: sys, sched: sched, gen: q.gen}
	q.tasks[tid] = t
	return t, nil
}

func (q *quiescence) drop(tid int) {
	if t, ok := q.tasks[tid]; ok {
		t.sys.Close()
		t.sched.Close()
		delete(q.tasks, tid)
	}
}

func (q *quiescence) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for tid := range q.tasks {
		q.drop(tid)
	}
	for pid, f := range q.mems {
		f.Close()
		delete(q.mems, pid)
	}
}

// readTask reads one thread: the ns it has run and whether it is idle.
func (q *quiescence) readTask(t *taskFiles, horizon time.Duration) (uint64, bool, error) {
	n, err := t.sched.ReadAt(q.buf[:], 0)
	if n == 0 {
		return 0, false, asGone(err)
	}
	sp := bytes.IndexByte(q.buf[:n], ' ')
	if sp <= 0 {
		return 0, false, errors.New("schedstat: no runtime")
	}
	ns, err := strconv.ParseUint(string(q.buf[:sp]), 10, 64)
	if err != nil {
		return 0, false, err
	}
	n, err = t.sys.ReadAt(q.buf[:], 0)
	if n == 0 {
		return 0, false, asGone(err)
	}
	idle, err := q.waitIdle(t.pid, q.buf[:n], horizon)
	return ns, idle, err
}

func asGone(err error) error {
	if err == nil || errors.Is(err, unix.ESRCH) || errors.Is(err, os.ErrNotExist) {
		return errGone
	}
	return err
}

// waitIdle judges a syscall file's line: "running", or "nr a0 ... a5 sp pc".
func (q *quiescence) waitIdle(pid int, line []byte, horizon time.Duration) (bool, error) {
	f := bytes.Fields(line)
	if len(f) == 3 && string(f[0]) == "-1" && string(f[1]) == "0x0" && string(f[2]) == "0x0" {
		return true, nil // exited (a zombie the reaper has not collected): it never runs again
	}
	if len(f) < 7 {
		return false, nil // "running", or blocked outside a syscall ("-1 sp pc")
	}
	nr, err := strconv.ParseInt(string(f[0]), 10, 64)
	if err != nil {
		return false, nil
	}
	w, ok := waits[nr]
	if !ok {
		return false, nil
	}
	var args [6]uint64
	for i := range args {
		v, err := strconv.ParseUint(string(bytes.TrimPrefix(f[i+1], []byte("0x"))), 16, 64)
		if err != nil {
			return false, nil
		}
		args[i] = v
	}
	return q.judge(pid, w, args, horizon)
}

// A syscallWait is how a blocking syscall says when it ends by itself.
type syscallWait struct {
	kind timeoutKind
	arg  int // the argument that holds the timeout
}

type timeoutKind uint8

const (
	untimed     timeoutKind = iota // blocks until something else acts
	msInt                          // an int of milliseconds, negative: none (poll, epoll_wait)
	relTimespec                    // a pointer to a relative timespec, NULL: none
	relTimeval                     // a pointer to a relative timeval, NULL: none (select)
	clockSleep                     // clock_nanosleep(clock, flags, req, rem)
	futexWait                      // futex(uaddr, op, val, timeout, ...)
)

// waits maps the blocking syscalls judged to their timeouts; the table of
// numbers common to the 64-bit architectures is here, the rest beside their
// architecture.
var waits = map[int64]syscallWait{
	unix.SYS_READ:            {untimed, 0},
	unix.SYS_READV:           {untimed, 0},
	unix.SYS_RECVFROM:        {untimed, 0},
	unix.SYS_RECVMSG:         {untimed, 0},
	unix.SYS_WAIT4:           {untimed, 0},
	unix.SYS_WAITID:          {untimed, 0},
	unix.SYS_ACCEPT4:         {untimed, 0},
	unix.SYS_ACCEPT:          {untimed, 0},
	unix.SYS_RT_SIGSUSPEND:   {untimed, 0},
	unix.SYS_EPOLL_PWAIT:     {msInt, 3},
	unix.SYS_PPOLL:           {relTimespec, 2},
	unix.SYS_PSELECT6:        {relTimespec, 4},
	unix.SYS_EPOLL_PWAIT2:    {relTimespec, 3},
	unix.SYS_RT_SIGTIMEDWAIT: {relTimespec, 2},
	unix.SYS_NANOSLEEP:       {relTimespec, 0},
	unix.SYS_CLOCK_NANOSLEEP: {clockSleep, 2},
	unix.SYS_FUTEX:           {futexWait, 3},
}

const (
	futexCmdMask       = 0x7f // FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME off
	futexClockRT       = 256
	futexWaitOp        = 0
	futexLockPI        = 6
	futexWaitBitset    = 9
	futexWaitRequeuePI = 11
	timerAbstime       = 1
)

func (q *quiescence) judge(pid int, w syscallWait, a [6]uint64, horizon time.Duration) (bool, error) {
	switch w.kind {
	case untimed:
		return true, nil
	case msInt:
		ms := int32(uint32(a[w.arg]))
		return ms < 0 || time.Duration(ms)*time.Millisecond > horizon, nil
	case relTimespec, relTimeval:
		if a[w.arg] == 0 {
			return true, nil
		}
		d, err := q.readTime(pid, a[w.arg], w.kind == relTimeval)
		if err != nil {
			return false, err
		}
		return d > horizon, nil
	case clockSleep:
		d, err := q.readTime(pid, a[2], false)
		if err != nil {
			return false, err
		}
		if a[1]&timerAbstime != 0 {
			now, ok := clockNow(int32(uint32(a[0])))
			if !ok {
				return false, nil
			}
			d -= now
		}
		return d > horizon, nil
	case futexWait:
		op := a[1]
		cmd := op & futexCmdMask
		switch cmd {
		case futexWaitOp, futexWaitBitset, futexLockPI, futexWaitRequeuePI:
		default:
			return false, nil
		}
		if a[3] == 0 {
			return true, nil
		}
		d, err := q.readTime(pid, a[3], false)
		if err != nil {
			return false, err
		}
		if cmd != futexWaitOp { // absolute
			clock := int32(unix.CLOCK_MONOTONIC)
			if op&futexClockRT != 0 || cmd == futexLockPI {
				clock = unix.CLOCK_REALTIME
			}
			now, _ := clockNow(clock)
			d -= now
		}
		return d > horizon, nil
	}
	return false, nil
}

func clockNow(clock int32) (time.Duration, bool) {
	var ts unix.Timespec
	if unix.ClockGettime(clock, &ts) != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// readTime reads a 64-bit timespec (or timeval) from the process's memory.
func (q *quiescence) readTime(pid int, addr uint64, timeval bool) (time.Duration, error) {
	f, ok := q.mems[pid]
	if !ok {
		var err error
		if f, err = os.Open("/proc/" + strconv.Itoa(pid) + "/mem"); err != nil {
			return 0, err
		}
		q.mems[pid] = f
	}
	var b [16]byte
	if _, err := f.ReadAt(b[:], int64(addr)); err != nil {
		return 0, err
	}
	sec, frac := int64(binary.NativeEndian.Uint64(b[:8])), int64(binary.NativeEndian.Uint64(b[8:]))
	if timeval {
		frac *= 1000
	}
	if sec < 0 || frac < 0 {
		return 0, nil
	}
	if sec > int64(time.Hour/time.Second)*24*365 {
		return time.Duration(1 << 62), nil
	}
	return time.Duration(sec)*time.Second + time.Duration(frac), nil
}
