package guest

import "golang.org/x/sys/unix"

// The amd64 syscalls arm64 does not have.
func init() {
	waits[unix.SYS_POLL] = wait{msInt, 2}
	waits[unix.SYS_EPOLL_WAIT] = wait{msInt, 3}
	waits[unix.SYS_SELECT] = wait{relTimeval, 4}
	waits[unix.SYS_PAUSE] = wait{untimed, 0}
}
