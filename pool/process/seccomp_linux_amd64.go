package process

import "golang.org/x/sys/unix"

// The filter's arch (docs/architecture.md, "Process provider hardening"):
// amd64. i386 calls (int 0x80) are killed; x32 calls fail ENOSYS.
const (
	auditArch     uint32 = unix.AUDIT_ARCH_X86_64
	x32SyscallBit uint32 = 0x40000000 // __X32_SYSCALL_BIT
)

// archSysNumbers are the calls of seccompDenied that amd64 has and arm64
// does not (seccomp_numbers_linux.go has the rest).
var archSysNumbers = map[string]uintptr{
	"create_module": unix.SYS_CREATE_MODULE, "get_kernel_syms": unix.SYS_GET_KERNEL_SYMS, "query_module": unix.SYS_QUERY_MODULE,
	"iopl": unix.SYS_IOPL, "ioperm": unix.SYS_IOPERM,
	"uselib": unix.SYS_USELIB, "ustat": unix.SYS_USTAT, "sysfs": unix.SYS_SYSFS,
}

// absentSyscalls are the calls of seccompDenied amd64 does not have.
var absentSyscalls = []string{"vm86", "vm86old"} // i386 only, whose calls are killed
