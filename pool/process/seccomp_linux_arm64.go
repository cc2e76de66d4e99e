package process

import "golang.org/x/sys/unix"

// The filter's arch (docs/architecture.md, "Process provider hardening"):
// arm64. aarch32 calls are killed.
const (
	auditArch     uint32 = unix.AUDIT_ARCH_AARCH64
	x32SyscallBit uint32 = 0 // no second ABI sharing the arch
)

// archSysNumbers: arm64 has no call of seccompDenied beyond the shared ones
// (seccomp_numbers_linux.go).
var archSysNumbers = map[string]uintptr{}

// absentSyscalls are the calls of seccompDenied arm64 does not have.
var absentSyscalls = []string{
	"create_module", "get_kernel_syms", "query_module", // gone before arm64 was
	"iopl", "ioperm", // x86 port I/O
	"uselib", "ustat", "sysfs", "vm86", "vm86old",
}
