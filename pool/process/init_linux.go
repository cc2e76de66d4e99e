package process

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// initEnv marks a re-executed binary as a sandbox init; its value is the
// JSON-encoded initConfig.
const initEnv = "SHINKEN_SANDBOX_INIT"

// In-sandbox paths. Of the host's filesystem only the OS is visible, read
// only; these are the sandbox's own writable directories.
const (
	sandboxHome      = "/home/agent"
	sandboxWorkspace = "/home/workspace"
	osworldHome      = "/home/user" // a link to sandboxHome
	sandboxRun       = "/run/shinken"
	sandboxGuestd    = "/run/guestd"
)

// initConfig is what the provider hands the re-executed init.
type initConfig struct {
	Guestd  string   `json:"guestd"`   // host path of the guestd binary
	Args    []string `json:"args"`     // guestd arguments
	Env     []string `json:"env"`      // the complete environment for guestd
	Dir     string   `json:"dir"`      // host path of the sandbox's directory
	Hide    []string `json:"hide"`     // host directories covered by an empty tmpfs
	UID     int      `json:"uid"`      // -1: keep
	GID     int      `json:"gid"`      // -1: keep
	NoFile  uint64   `json:"nofile"`   // RLIMIT_NOFILE
	NProc   uint64   `json:"nproc"`    // RLIMIT_NPROC (per uid; each sandbox has its own uid)
	ShmSize int64    `json:"shm_size"` // bytes of the private /dev/shm and SysV shm
	FSize   uint64   `json:"fsize"`    // RLIMIT_FSIZE
	OOMAdj  int      `json:"oom_adj"`  // oom_score_adj of every process of the sandbox
	// Gate: wait for the provider to close fd 3 (it has put the init in
	// the sandbox's cgroup) before anything else.
	Gate bool `json:"gate,omitempty"`
	// KeepCaps, when guestd keeps root (UID -1 on a root host), are the
	// only capabilities left in its bounding set: enough to run the agent
	// and the scorer as their own uids and to stop the agent's processes.
	KeepCaps []int `json:"keep_caps,omitempty"`
	// Cgroups are the sandbox's cgroups by controller (host dirs, each with
	// guest and agent leaves), bound at /run/cgroup/<controller> for guestd
	// alone.
	Cgroups map[string]string `json:"cgroups,omitempty"`
}

// MaybeRunInit turns the current process into a sandbox's init when it was
// started by this provider (the re-exec pattern), and never returns in that
// case. Call it first thing in main() of any binary that uses the process
// provider, and in TestMain of tests that do; elsewhere it returns at once.
func MaybeRunInit() {
	v, ok := os.LookupEnv(initEnv)
	if !ok {
		return
	}
	var cfg initConfig
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox init: bad config: %v\n", err)
		os.Exit(111)
	}
	err := runInit(&cfg)
	fmt.Fprintf(os.Stderr, "sandbox init: %v\n", err)
	os.Exit(111)
}

// runInit confines the process (it already runs in fresh pid, mount, ipc
// and network namespaces) and execs guestd as the namespace's PID 1. It only
// returns on failure. See root_linux.go for the filesystem it sees.
func runInit(cfg *initConfig) error {
	// no_new_privs, the parent-death signal and the seccomp filter are set
	// per thread: all on the one that execs guestd.
	runtime.LockOSThread()
	if cfg.Gate {
		if err := awaitGate(); err != nil {
			return err
		}
	}
	if err := os.WriteFile("/proc/self/oom_score_adj", []byte(strconv.Itoa(cfg.OOMAdj)), 0); err != nil {
		return fmt.Errorf("oom_score_adj: %w", err)
	}
	// Before confine, which makes /proc/sys read-only; the IPC sysctls are
	// those of the writer's IPC namespace, the sandbox's.
	if err := setIPCLimits(cfg.ShmSize); err != nil {
		return err
	}
	if err := confine(cfg); err != nil {
		return err
	}
	if err := setLimits(cfg); err != nil {
		return err
	}
	if err := dropPrivileges(cfg); err != nil {
		return err
	}
	// Credential changes clear the parent-death signal; set it again so the
	// sandbox dies with the provider's process.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("pdeathsig: %w", err)
	}
	if err := os.Chdir(sandboxHome); err != nil {
		return fmt.Errorf("chdir: %w", err)
	}
	// Last: the filter covers guestd and everything it starts
	// (seccomp_linux.go; docs/architecture.md, "Process provider hardening").
	if seccompSupported() {
		if err := installSeccomp(unix.EPERM); err != nil {
			return err
		}
	}
	argv := append([]string{"guestd"}, cfg.Args...)
	return fmt.Errorf("exec guestd: %w", syscall.Exec(sandboxGuestd, argv, cfg.Env))
}

// loopbackUp sets IFF_UP on "lo", the only interface of the sandbox's
// network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}

func setLimits(cfg *initConfig) error {
	for _, l := range []struct {
		res int
		v   uint64
	}{{unix.RLIMIT_NOFILE, cfg.NoFile}, {unix.RLIMIT_NPROC, cfg.NProc}, {unix.RLIMIT_FSIZE, cfg.FSize}, {unix.RLIMIT_CORE, 0}} {
		if l.v == 0 && l.res != unix.RLIMIT_CORE {
			continue
		}
		if err := unix.Setrlimit(l.res, &unix.Rlimit{Cur: l.v, Max: l.v}); err != nil {
			return fmt.Errorf("rlimit %d: %w", l.res, err)
		}
	}
	return nil
}

func dropPrivileges(cfg *initConfig) error {
	if cfg.UID >= 0 {
		if err := syscall.Setgroups(nil); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setgid(cfg.GID); err != nil {
			return fmt.Errorf("setgid: %w", err)
		}
		if err := syscall.Setuid(cfg.UID); err != nil {
			return fmt.Errorf("setuid: %w", err)
		}
	}
	if len(cfg.KeepCaps) > 0 {
		if err := limitCaps(cfg.KeepCaps); err != nil {
			return err
		}
	}
	// No setuid binary inside can regain privileges.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}
