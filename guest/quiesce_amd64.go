package guest

import "golang.org/x/sys/unix"

// The amd64 syscalls arm64 does not have.
func init() {
	waits[unix.SYS_POLL] = syscallWait{msInt, 2}
	waits[unix.SYS_EPOLL_WAIT] = syscallWait{msInt, 3}
	waits[unix.SYS_SELECT] = syscallWait{relTimeval, 4}
	waits[unix.SYS_PAUSE] = syscallWait{untimed, 0}
}
