//go:build linux && !amd64 && !arm64

package process

// No filter on other arches (docs/architecture.md, "Process provider
// hardening"): the init installs none and the provider lists none.
const (
	auditArch     uint32 = 0
	x32SyscallBit uint32 = 0
)

var (
	sysNumbers     map[string]uintptr
	absentSyscalls []string
)
