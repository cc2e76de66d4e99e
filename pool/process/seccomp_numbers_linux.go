//go:build linux && (amd64 || arm64)

package process

import "golang.org/x/sys/unix"

// sysNumbers are this arch's numbers of the calls seccompDenied names
// (unix.SYS_* are the arch's own): the calls both arches have here, and
// archSysNumbers (seccomp_linux_<arch>.go) the rest.
var sysNumbers = func() map[string]uintptr {
	m := map[string]uintptr{
		"ptrace": unix.SYS_PTRACE, "process_vm_readv": unix.SYS_PROCESS_VM_READV, "process_vm_writev": unix.SYS_PROCESS_VM_WRITEV,
		"process_madvise": unix.SYS_PROCESS_MADVISE, "pidfd_getfd": unix.SYS_PIDFD_GETFD, "kcmp": unix.SYS_KCMP,

		"unshare": unix.SYS_UNSHARE, "setns": unix.SYS_SETNS, "clone": unix.SYS_CLONE, "clone3": unix.SYS_CLONE3,

		"mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2, "pivot_root": unix.SYS_PIVOT_ROOT, "chroot": unix.SYS_CHROOT,
		"open_tree": unix.SYS_OPEN_TREE, "open_tree_attr": unix.SYS_OPEN_TREE_ATTR, "move_mount": unix.SYS_MOVE_MOUNT,
		"fsopen": unix.SYS_FSOPEN, "fsconfig": unix.SYS_FSCONFIG, "fsmount": unix.SYS_FSMOUNT, "fspick": unix.SYS_FSPICK,
		"mount_setattr": unix.SYS_MOUNT_SETATTR,

		"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT, "name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT,

		"bpf": unix.SYS_BPF, "perf_event_open": unix.SYS_PERF_EVENT_OPEN, "userfaultfd": unix.SYS_USERFAULTFD,
		"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER,
		"io_uring_register": unix.SYS_IO_URING_REGISTER, "fanotify_init": unix.SYS_FANOTIFY_INIT,
		"lookup_dcookie": unix.SYS_LOOKUP_DCOOKIE,

		"keyctl": unix.SYS_KEYCTL, "add_key": unix.SYS_ADD_KEY, "request_key": unix.SYS_REQUEST_KEY,

		"init_module": unix.SYS_INIT_MODULE, "finit_module": unix.SYS_FINIT_MODULE, "delete_module": unix.SYS_DELETE_MODULE,
		"kexec_load": unix.SYS_KEXEC_LOAD, "kexec_file_load": unix.SYS_KEXEC_FILE_LOAD, "reboot": unix.SYS_REBOOT,
		"swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF, "acct": unix.SYS_ACCT, "quotactl": unix.SYS_QUOTACTL,
		"quotactl_fd": unix.SYS_QUOTACTL_FD, "syslog": unix.SYS_SYSLOG,

		"settimeofday": unix.SYS_SETTIMEOFDAY, "clock_settime": unix.SYS_CLOCK_SETTIME,
		"clock_adjtime": unix.SYS_CLOCK_ADJTIME, "adjtimex": unix.SYS_ADJTIMEX,

		"nfsservctl": unix.SYS_NFSSERVCTL,

		"personality": unix.SYS_PERSONALITY,
	}
	for k, v := range archSysNumbers {
		m[k] = v
	}
	return m
}()
