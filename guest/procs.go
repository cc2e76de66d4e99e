package guest

import (
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Children are waited for in one of two ways. Normally each child the
// package starts is waited for by pid. With EnableReaper (guestd as PID 1 or a
// subreaper) one loop reaps every child of the process, orphans included, and
// hands the status of a tracked child to its waiter; since nothing else calls
// wait, exit statuses are never stolen.
var children = struct {
	mu      sync.Mutex
	reap    bool
	waiters map[int]chan unix.WaitStatus // tracked pid → status (cap 1)
}{waiters: make(map[int]chan unix.WaitStatus)}

var reaperOnce sync.Once

// EnableReaper makes this process reap all its children (call it first thing
// in main when running as PID 1). Afterwards os/exec's Cmd.Wait must not be
// used in this process: start children through this package.
func EnableReaper() {
	reaperOnce.Do(func() {
		children.mu.Lock()
		children.reap = true
		children.mu.Unlock()
		sig := make(chan os.Signal, 16)
		signal.Notify(sig, syscall.SIGCHLD)
		go func() {
			tick := time.NewTicker(time.Second) // a backstop; SIGCHLD does the work
			for {
				reapAll()
				select {
				case <-sig:
				case <-tick.C:
				}
			}
		}()
	})
}

func reapAll() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
		children.mu.Lock()
		if ch, ok := children.waiters[pid]; ok { // else an orphan: just reaped
			delete(children.waiters, pid)
			ch <- ws
		}
		children.mu.Unlock()
	}
}

// startChild starts cmd leading a new process group and returns its pid and
// a channel that gets its wait status once. cmd's stdio must be nil or *os.File so that
// no copy goroutines are involved (Cmd.Wait is never called).
func startChild(cmd *exec.Cmd) (int, <-chan unix.WaitStatus, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	// Whatever guestd started ends with it, even where no pid namespace
	// does that (an unconfined sandbox, guestd run by hand).
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	ch := make(chan unix.WaitStatus, 1)
	// The reaper takes mu before dispatching a status, so a child that exits
	// at once is still found once it is tracked.
	children.mu.Lock()
	if err := cmd.Start(); err != nil {
		children.mu.Unlock()
		return 0, nil, err
	}
	pid := cmd.Process.Pid
	reap := children.reap
	if reap {
		children.waiters[pid] = ch
	}
	children.mu.Unlock()
	cmd.Process.Release()
	if !reap {
		go func() {
			var ws unix.WaitStatus
			for {
				if _, err := unix.Wait4(pid, &ws, 0, nil); err != unix.EINTR {
					break
				}
			}
			ch <- ws
		}()
	}
	return pid, ch, nil
}

// signalGroup sends sig to the process group led by pid.
func signalGroup(pid int, sig syscall.Signal) {
	if pid > 0 {
		unix.Kill(-pid, sig)
	}
}

// procTable tracks the process groups one owner started, to end them all.
type procTable struct {
	mu   sync.Mutex
	live map[int]struct{}
}

func newProcTable() *procTable { return &procTable{live: make(map[int]struct{})} }

// start starts cmd (see startChild) and tracks its group until it exits.
func (t *procTable) start(cmd *exec.Cmd) (int, <-chan unix.WaitStatus, error) {
	pid, ch, err := startChild(cmd)
	if err != nil {
		return 0, nil, err
	}
	t.mu.Lock()
	t.live[pid] = struct{}{}
	t.mu.Unlock()
	out := make(chan unix.WaitStatus, 1)
	go func() {
		ws := <-ch
		t.mu.Lock()
		delete(t.live, pid)
		t.mu.Unlock()
		out <- ws
	}()
	return pid, out, nil
}

// killAll kills every tracked process group.
func (t *procTable) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for pid := range t.live {
		signalGroup(pid, syscall.SIGKILL)
	}
}
