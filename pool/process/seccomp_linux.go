package process

import (
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter every process sandbox runs under, guestd included
// (docs/architecture.md, "Process provider hardening"). It is a deny list:
// what a container engine's default profile refuses an unprivileged
// container, plus ptrace and its kin, which the engine allows but the agent
// must not have. A sandbox's init installs it just before it execs guestd,
// with no_new_privs already set; every process of the sandbox inherits it
// and none can remove it.
//
// It checks the architecture first: a system call of another ABI (i386's
// int 0x80 on amd64, aarch32 on arm64) kills the process, and on amd64 the
// x32 ABI's calls fail ENOSYS, so no second table of numbers can be used to
// go around the first.

// seccompAction is what the filter does with a denied system call.
type seccompAction int

const (
	denyEPERM   seccompAction = iota // fails EPERM
	denyENOSYS                       // fails ENOSYS: libc falls back to an older call
	denyCloneNS                      // fails EPERM when its flags (args[0]) ask for a namespace
	denyPersona                      // fails EPERM for a persona other than the usual few
)

// seccompGroup is a set of denied system calls with the reason they are.
// Names are the kernel's; each arch's file (seccomp_linux_<arch>.go) maps
// them to its numbers, and a name that arch lacks is listed there as absent.
type seccompGroup struct {
	why   string
	act   seccompAction
	calls []string
}

// seccompDenied is the deny list, by reason.
var seccompDenied = []seccompGroup{
	{
		why: "other processes: the agent's uid is also that of the desktop's buses (the session bus, the " +
			"AT-SPI registry whose tree guestd reads) and of whatever else runs as the agent; with these it " +
			"could read or rewrite their memory or take their descriptors, and so tamper with what the desktop " +
			"tells guestd. guestd reads the desktop's threads through /proc with CAP_SYS_PTRACE, an access " +
			"check, not one of these calls",
		act:   denyEPERM,
		calls: []string{"ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp"},
	},
	{
		why: "namespaces: the sandbox's are made by the provider; a new user namespace is the way in to most " +
			"kernel interfaces an unprivileged process otherwise cannot reach",
		act:   denyEPERM,
		calls: []string{"unshare", "setns"},
	},
	{
		why:   "namespaces by clone: denied only when the flags ask for one (threads and forks are clones too)",
		act:   denyCloneNS,
		calls: []string{"clone"},
	},
	{
		why: "namespaces by clone3: its flags are behind a pointer the filter cannot read; ENOSYS makes libc " +
			"fall back to clone, whose flags it can",
		act:   denyENOSYS,
		calls: []string{"clone3"},
	},
	{
		why: "mounts: the sandbox's view of the host is built by its init before the filter and nothing inside " +
			"changes it (the kernel also refuses these without CAP_SYS_ADMIN; the filter keeps their code unreached)",
		act: denyEPERM,
		calls: []string{"mount", "umount2", "pivot_root", "chroot", "open_tree", "open_tree_attr", "move_mount",
			"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"},
	},
	{
		why: "file handles: a handle names an inode without a path, past the sandbox's mounts (with " +
			"CAP_DAC_READ_SEARCH, which guestd holds, it opens any file of a filesystem the sandbox sees part of)",
		act:   denyEPERM,
		calls: []string{"open_by_handle_at", "name_to_handle_at"},
	},
	{
		why: "kernel attack surface: large interfaces reachable unprivileged, the source of many local " +
			"privilege escalations; perf also observes the kernel and other processes",
		act: denyEPERM,
		calls: []string{"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
			"fanotify_init", "lookup_dcookie"},
	},
	{
		why:   "kernel keyrings: not namespaced; keys are the host's",
		act:   denyEPERM,
		calls: []string{"keyctl", "add_key", "request_key"},
	},
	{
		why: "the host's kernel, boot and devices: modules, kexec, reboot, swap, accounting, quotas, the kernel " +
			"log, port I/O",
		act: denyEPERM,
		calls: []string{"init_module", "finit_module", "delete_module", "create_module", "get_kernel_syms", "query_module",
			"kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog",
			"iopl", "ioperm"},
	},
	{
		why: "the host's clock (there is no time namespace): setting it, and adjtimex/clock_adjtime whole, " +
			"since whether they write is behind a pointer (nothing in a desktop reads NTP state)",
		act:   denyEPERM,
		calls: []string{"settimeofday", "clock_settime", "clock_adjtime", "adjtimex"},
	},
	{
		why:   "obsolete: nothing current calls them",
		act:   denyEPERM,
		calls: []string{"uselib", "ustat", "sysfs", "nfsservctl", "vm86", "vm86old"},
	},
	{
		why: "personality: only the personas the engine allows (Linux, 32-bit Linux, UNAME26, the query); " +
			"others switch off ASLR (ADDR_NO_RANDOMIZE) or make data executable (READ_IMPLIES_EXEC)",
		act:   denyPersona,
		calls: []string{"personality"},
	},
}

// cloneNSFlags are clone's namespace flags (CLONE_NEWTIME shares its bit
// with the exit signal in clone's flags, and clone cannot ask for it).
const cloneNSFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// allowedPersonas are the personality(2) arguments left alone: PER_LINUX,
// PER_LINUX32, UNAME26 and both, and 0xffffffff (which only reads it).
var allowedPersonas = []uint32{0, 0x0008, 0x20000, 0x20008, 0xffffffff}

// seccomp_data offsets (include/uapi/linux/seccomp.h); the argument's low
// word is at its start on these little-endian arches.
const (
	seccompNR   = 0
	seccompArch = 4
	seccompArg0 = 16
)

// seccompSupported says whether this arch has a filter; elsewhere the init
// installs none and the provider does not list one.
func seccompSupported() bool { return auditArch != 0 }

// seccompFilter is the classic BPF program of seccompDenied for this arch,
// denied calls failing with errno deny (EPERM in sandboxes; tests use
// another to tell the filter's refusal from the kernel's).
//
// It compares the call's number with each denied one in turn. That costs
// nothing for the calls it allows on Linux 5.11 and later: the kernel runs a
// filter once per number at load time and caches the numbers it always
// allows without looking at arguments (all but clone and personality here).
func seccompFilter(deny unix.Errno) ([]unix.SockFilter, error) {
	if !seccompSupported() {
		return nil, fmt.Errorf("seccomp: no filter for this architecture")
	}
	type rule struct {
		nr  uint32
		act seccompAction
	}
	var rules []rule
	seen := map[uint32]string{}
	for _, g := range seccompDenied {
		for _, name := range g.calls {
			nr, ok := sysNumbers[name]
			if !ok {
				if !slices.Contains(absentSyscalls, name) {
					return nil, fmt.Errorf("seccomp: %s has no number on this architecture and is not listed as absent", name)
				}
				continue
			}
			if prev, dup := seen[uint32(nr)]; dup {
				return nil, fmt.Errorf("seccomp: %s and %s are both number %d", prev, name, nr)
			}
			seen[uint32(nr)] = name
			rules = append(rules, rule{uint32(nr), g.act})
		}
	}
	slices.SortFunc(rules, func(a, b rule) int { return int(a.nr) - int(b.nr) })

	var a bpfAsm
	a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompArch)
	a.jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, auditArch, "", "kill")
	a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompNR)
	if x32SyscallBit != 0 {
		a.jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, x32SyscallBit, "enosys", "")
	}
	labels := map[seccompAction]string{denyEPERM: "eperm", denyENOSYS: "enosys", denyCloneNS: "clone", denyPersona: "personality"}
	for _, r := range rules {
		a.jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, r.nr, labels[r.act], "")
	}
	a.stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW)

	a.label("clone")
	a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompArg0)
	a.jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, cloneNSFlags, "eperm", "allow")

	// personality(2)'s argument is an unsigned int: its low word is all of it.
	a.label("personality")
	a.stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompArg0)
	for _, p := range allowedPersonas {
		a.jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, p, "allow", "")
	}
	a.label("eperm")
	a.stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ERRNO|uint32(deny)&unix.SECCOMP_RET_DATA)
	a.label("enosys")
	a.stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ERRNO|uint32(unix.ENOSYS))
	a.label("kill")
	a.stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_KILL_PROCESS)
	a.label("allow")
	a.stmt(unix.BPF_RET|unix.BPF_K, unix.SECCOMP_RET_ALLOW)
	return a.assemble()
}

// installSeccomp loads the filter into every thread of this process
// (TSYNC): a Go process has several, and exec may happen on any of them.
// The calling thread must have no_new_privs set (or CAP_SYS_ADMIN); TSYNC
// sets it on the others.
func installSeccomp(deny unix.Errno) error {
	prog, err := seccompFilter(deny)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog)))
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp: %w", errno)
	case r != 0:
		return fmt.Errorf("seccomp: thread %d could not take the filter", r)
	}
	return nil
}

// bpfAsm assembles a classic BPF program whose conditional jumps name
// labels further on ("" is the next instruction).
type bpfAsm struct {
	ins    []unix.SockFilter
	jumps  []bpfJump
	labels map[string]int
}

type bpfJump struct {
	at     int
	jt, jf string
}

func (a *bpfAsm) stmt(code uint16, k uint32) {
	a.ins = append(a.ins, unix.SockFilter{Code: code, K: k})
}

func (a *bpfAsm) jump(code uint16, k uint32, jt, jf string) {
	a.jumps = append(a.jumps, bpfJump{len(a.ins), jt, jf})
	a.stmt(code, k)
}

func (a *bpfAsm) label(name string) {
	if a.labels == nil {
		a.labels = map[string]int{}
	}
	a.labels[name] = len(a.ins)
}

func (a *bpfAsm) assemble() ([]unix.SockFilter, error) {
	off := func(from int, to string) (uint8, error) {
		if to == "" {
			return 0, nil
		}
		t, ok := a.labels[to]
		if !ok {
			return 0, fmt.Errorf("seccomp: no label %q", to)
		}
		d := t - from - 1
		if d < 0 || d > 255 {
			return 0, fmt.Errorf("seccomp: jump from %d to %q (%d) out of range", from, to, t)
		}
		return uint8(d), nil
	}
	for _, j := range a.jumps {
		var err error
		if a.ins[j.at].Jt, err = off(j.at, j.jt); err != nil {
			return nil, err
		}
		if a.ins[j.at].Jf, err = off(j.at, j.jf); err != nil {
			return nil, err
		}
	}
	if len(a.ins) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp: %d instructions", len(a.ins))
	}
	return a.ins, nil
}

// seccompProfileName is the filter's name in pool.Confinement.Seccomp
// (/v1/spec's pool.confinement.seccomp).
const seccompProfileName = "shinken-denylist"
