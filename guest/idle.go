package guest

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// idleLauncher forks the agent's processes from one OS thread that runs
// under SCHED_IDLE for as long as the server does (Config.AgentIdle). A
// child inherits the forking thread's policy, and everything it forks
// inherits it in turn; an unprivileged process cannot leave SCHED_IDLE. The
// thread lives until Close because a child's Pdeathsig follows the thread
// that forked it, not the process. Go never runs other goroutines on a
// locked thread, nor clones new threads from one, so none of guestd's own
// work runs idle.
type idleLauncher struct {
	mu     sync.Mutex // guards closed against sends on reqs
	closed bool
	reqs   chan idleStart
	done   chan struct{}
}

type idleStart struct {
	cmd   *exec.Cmd
	start func(*exec.Cmd) (int, <-chan unix.WaitStatus, error)
	out   chan<- idleStarted
}

type idleStarted struct {
	pid  int
	wait <-chan unix.WaitStatus
	err  error
}

var errIdleClosed = errors.New("guest: the server is closing")

func newIdleLauncher() (*idleLauncher, error) {
	l := &idleLauncher{reqs: make(chan idleStart), done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		defer close(l.done)
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0); err != nil {
			ready <- fmt.Errorf("guest: SCHED_IDLE for the agent's processes: %w", err)
			return
		}
		ready <- nil
		for r := range l.reqs {
			pid, wait, err := r.start(r.cmd)
			r.out <- idleStarted{pid, wait, err}
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return l, nil
}

// wrap makes start fork on the idle thread.
func (l *idleLauncher) wrap(start func(*exec.Cmd) (int, <-chan unix.WaitStatus, error)) func(*exec.Cmd) (int, <-chan unix.WaitStatus, error) {
	return func(cmd *exec.Cmd) (int, <-chan unix.WaitStatus, error) {
		out := make(chan idleStarted, 1)
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return 0, nil, errIdleClosed
		}
		l.reqs <- idleStart{cmd, start, out}
		l.mu.Unlock()
		r := <-out
		return r.pid, r.wait, r.err
	}
}

// close ends the thread (the processes it started get their Pdeathsig).
func (l *idleLauncher) close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.reqs)
	}
	l.mu.Unlock()
	<-l.done
}
