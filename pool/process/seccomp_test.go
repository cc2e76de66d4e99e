package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/pooltest"
	"golang.org/x/sys/unix"
)

// TestSeccompTable: every call the deny list names has this arch's number
// or is listed as absent on it (never both), every number is used, no two
// names share one, and the program assembles.
func TestSeccompTable(t *testing.T) {
	if !seccompSupported() {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	named := map[string]bool{}
	for _, g := range seccompDenied {
		if g.why == "" || len(g.calls) == 0 {
			t.Errorf("group %+v: want a reason and calls", g)
		}
		for _, name := range g.calls {
			if named[name] {
				t.Errorf("%s listed twice", name)
			}
			named[name] = true
			_, has := sysNumbers[name]
			if absent := slices.Contains(absentSyscalls, name); has == absent {
				t.Errorf("%s: has a number %v, listed absent %v; want exactly one", name, has, absent)
			}
		}
	}
	nrs := map[uintptr]string{}
	for name, nr := range sysNumbers {
		if !named[name] {
			t.Errorf("%s has a number but no group", name)
		}
		if prev, ok := nrs[nr]; ok {
			t.Errorf("%s and %s are both %d", prev, name, nr)
		}
		nrs[nr] = name
	}
	prog, err := seccompFilter(unix.EPERM)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d instructions for %d denied calls", len(prog), len(sysNumbers))
}

// seccompChildEnv makes the test binary TestSeccompFilter's child: it
// loads the filter into itself and reports what its system calls return.
const seccompChildEnv = "SHINKEN_SECCOMP_CHILD"

// sweepErrno is what the sweep child's filter denies with: no kernel path
// the sweep reaches returns it, so it tells the filter's refusal from the
// kernel's.
const sweepErrno = unix.ENOTRECOVERABLE

// TestSeccompFilter loads the filter into a child process (this binary,
// re-executed) and checks what its system calls get:
//   - enforce: as root, the sandbox's filter: allowed calls work (a fork and
//     exec, which inherits it), and denied ones that root could otherwise
//     make fail EPERM (clone3 ENOSYS); an i386 call kills the process.
//   - sweep: as nobody, the same filter denying with sweepErrno: every call of
//     the table, made with zero arguments, gets sweepErrno, and its x32
//     twin ENOSYS.
func TestSeccompFilter(t *testing.T) {
	if !seccompSupported() {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	switch os.Getenv(seccompChildEnv) {
	case "enforce":
		seccompEnforceChild(t)
		return
	case "sweep":
		seccompSweepChild(t)
		return
	case "cost", "cost-filtered":
		seccompCostChild(t, os.Getenv(seccompChildEnv) == "cost-filtered")
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"enforce", "sweep"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "enforce" && os.Geteuid() != 0 {
				t.Skip("the enforce child checks calls only root could make")
			}
			cmd := exec.Command(self, "-test.run=^TestSeccompFilter$", "-test.v", "-test.count=1")
			// SHINKEN_GUESTD: the child's TestMain builds no guestd.
			cmd.Env = append(os.Environ(), seccompChildEnv+"="+mode, "SHINKEN_GUESTD=/nonexistent")
			cmd.Dir = t.TempDir()
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestSeccompFilter") {
				t.Fatalf("%s child: %v\n%s", mode, err, out)
			}
			t.Logf("%s child:\n%s", mode, out)
		})
	}
}

// loadFilter sets no_new_privs and loads the filter, on a locked thread.
func loadFilter(t *testing.T, deny unix.Errno) {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatalf("no_new_privs: %v", err)
	}
	if err := installSeccomp(deny); err != nil {
		t.Fatalf("install: %v", err)
	}
	st, _ := os.ReadFile("/proc/self/status")
	if !strings.Contains(string(st), "Seccomp:\t2") {
		t.Fatalf("after install, status:\n%s\nwant Seccomp: 2", st)
	}
}

// ia32Getpid is amd64 machine code: mov eax, 20 (i386's getpid); int 0x80;
// ret. python3 runs it from an executable mapping.
const ia32Getpid = `import ctypes, mmap
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")
f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
print(f())`

// ia32Works says whether this host runs i386 system calls from a 64-bit
// process (amd64 with IA32 emulation, python3 present), unfiltered.
func ia32Works() bool {
	if runtime.GOARCH != "amd64" {
		return false
	}
	out, err := exec.Command("python3", "-c", ia32Getpid).Output()
	if err != nil {
		return false
	}
	_, err = strconv.Atoi(strings.TrimSpace(string(out)))
	return err == nil
}

func seccompEnforceChild(t *testing.T) {
	ia32 := ia32Works()
	// A process to ptrace, started before the filter.
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sleeper.Process.Kill(); sleeper.Wait() }()

	loadFilter(t, unix.EPERM)

	// Allowed: a plain call, the persona query, a fork and exec (clone
	// without namespace flags), which inherits the filter.
	if r, _, e := unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0); e != 0 || int(r) != os.Getpid() {
		t.Errorf("getpid = %d, %v; want %d", r, e, os.Getpid())
	}
	if _, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0); e != 0 {
		t.Errorf("personality(query) = %v; want allowed", e)
	}
	out, err := exec.Command("sh", "-c", "grep Seccomp: /proc/self/status").Output()
	if err != nil || !strings.Contains(string(out), "2") {
		t.Errorf("fork+exec under the filter: %q, %v; want it to run, filtered", out, err)
	}

	// Denied, each a call root makes successfully (or fails otherwise)
	// without the filter.
	expect := func(what string, got error, want unix.Errno) {
		t.Helper()
		if !errors.Is(got, want) {
			t.Errorf("%s = %v; want %v", what, got, want)
		}
	}
	errno := func(_, _ uintptr, e unix.Errno) error {
		if e == 0 {
			return nil
		}
		return e
	}
	if err := unix.PtraceAttach(sleeper.Process.Pid); err == nil {
		unix.PtraceDetach(sleeper.Process.Pid)
		t.Errorf("ptrace(PTRACE_ATTACH) succeeded")
	} else {
		expect("ptrace(PTRACE_ATTACH)", err, unix.EPERM)
	}
	var word uint64 = 42
	var got uint64
	local := []unix.Iovec{{Base: (*byte)(unsafe.Pointer(&got)), Len: 8}}
	remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&word)), Len: 8}}
	_, err = unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
	expect("process_vm_readv(self)", err, unix.EPERM)
	_, err = unix.ProcessVMWritev(os.Getpid(), local, remote, 0)
	expect("process_vm_writev(self)", err, unix.EPERM)
	expect("kcmp(self, self, KCMP_VM)", errno(unix.RawSyscall6(unix.SYS_KCMP, uintptr(os.Getpid()), uintptr(os.Getpid()), 1, 0, 0, 0)), unix.EPERM)
	_, err = unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false)
	expect("keyctl(KEYCTL_GET_KEYRING_ID)", err, unix.EPERM)
	expect("unshare(CLONE_NEWUTS)", unix.Unshare(unix.CLONE_NEWUTS), unix.EPERM)
	for _, f := range []uintptr{unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP, unix.CLONE_NEWUSER} {
		cmd := exec.Command("true")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: f}
		expect(fmt.Sprintf("clone(%#x)", f), cmd.Run(), unix.EPERM)
	}
	// ENODEV without the filter: no such filesystem.
	dir := t.TempDir()
	expect("mount", unix.Mount("none", dir, "shinken-no-such-fs", 0, ""), unix.EPERM)
	expect("personality(ADDR_NO_RANDOMIZE)", errno(unix.RawSyscall(unix.SYS_PERSONALITY, 0x0040000 /* ADDR_NO_RANDOMIZE */, 0, 0)), unix.EPERM)
	expect("userfaultfd", errno(unix.RawSyscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC, 0, 0)), unix.EPERM)
	// EINVAL without the filter (no arguments).
	expect("clone3", errno(unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)), unix.ENOSYS)
	if x32SyscallBit != 0 {
		expect("x32 getpid", errno(unix.RawSyscall(uintptr(x32SyscallBit)|unix.SYS_GETPID, 0, 0, 0)), unix.ENOSYS)
	}
	// Another arch's call kills the process (SIGSYS).
	if ia32 {
		err := exec.Command("python3", "-c", ia32Getpid).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGSYS {
			t.Errorf("an i386 call under the filter: %v; want the process killed by SIGSYS", err)
		}
	} else {
		t.Log("no i386 calls on this host: the arch check is not exercised")
	}
}

func seccompSweepChild(t *testing.T) {
	if os.Geteuid() == 0 {
		// Nobody: a call the filter failed to deny gets nothing done.
		if err := syscall.Setgroups(nil); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Setgid(65534); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Setuid(65534); err != nil {
			t.Fatal(err)
		}
	}
	loadFilter(t, sweepErrno)
	for _, g := range seccompDenied {
		for _, name := range g.calls {
			nr, ok := sysNumbers[name]
			if !ok {
				continue
			}
			want := sweepErrno
			switch g.act {
			case denyENOSYS:
				want = unix.ENOSYS
			case denyCloneNS:
				continue // a raw clone forks this process: the enforce child clones through exec
			case denyPersona:
				continue // 0 is PER_LINUX, allowed
			}
			args := [6]uintptr{}
			if name == "ptrace" {
				args = [6]uintptr{unix.PTRACE_ATTACH, 1} // PTRACE_TRACEME (0) would stop this process at its next signal
			}
			if _, _, e := unix.RawSyscall6(nr, args[0], args[1], args[2], args[3], args[4], args[5]); e != want {
				t.Errorf("%s (%d) = %v; want %v (%s)", name, nr, e, want, strings.SplitN(g.why, ":", 2)[0])
			}
			if x32SyscallBit != 0 {
				if _, _, e := unix.RawSyscall6(nr|uintptr(x32SyscallBit), args[0], args[1], args[2], args[3], args[4], args[5]); e != unix.ENOSYS {
					t.Errorf("x32 %s = %v; want ENOSYS", name, e)
				}
			}
		}
	}
	if _, _, e := unix.RawSyscall(unix.SYS_PERSONALITY, 0x0400000 /* READ_IMPLIES_EXEC */, 0, 0); e != sweepErrno {
		t.Errorf("personality(READ_IMPLIES_EXEC) = %v; want %v", e, sweepErrno)
	}
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER}
	if err := cmd.Run(); !errors.Is(err, sweepErrno) {
		t.Errorf("clone(CLONE_NEWUSER) = %v; want %v", err, sweepErrno)
	}
}

// seccompProbe runs, as the agent, each denied call the agent could
// otherwise make against a process of its own uid it did not start, and
// prints "name result" lines. argv[1] is that process's pid, argv[2] the
// numbers (JSON).
const seccompProbe = `import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *a):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in a])
    if r != -1:
        return "ok"
    e = ctypes.get_errno()
    return errno.errorcode.get(e, str(e))
class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(64)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 64)
remote = iovec(ctypes.cast(buf, ctypes.c_void_p), 64)
target = int(sys.argv[1])
N = json.loads(sys.argv[2])
s = lambda b: ctypes.cast(ctypes.c_char_p(b), ctypes.c_void_p).value
src, dst, fs = s(b"none"), s(b"/tmp"), s(b"tmpfs")
probes = [
    ("ptrace_attach", N["ptrace"], 16, target, 0, 0),
    ("ptrace_traceme", N["ptrace"], 0, 0, 0, 0),
    ("process_vm_readv", N["process_vm_readv"], target, ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0),
    ("process_vm_writev", N["process_vm_writev"], target, ctypes.addressof(local), 1, ctypes.addressof(remote), 1, 0),
    ("kcmp", N["kcmp"], os.getpid(), target, 1, 0, 0),
    ("mount", N["mount"], src, dst, fs, 0, 0),
    ("keyctl", N["keyctl"], 0, -3, 0),
    ("perf_event_open", N["perf_event_open"], 0, 0, -1, -1, 0),
    ("bpf", N["bpf"], 0, 0, 0),
    ("userfaultfd", N["userfaultfd"], 0),
    ("io_uring_setup", N["io_uring_setup"], 1, 0),
    ("setns", N["setns"], 0, 0),
    ("clone3", N["clone3"], 0, 0),
    ("personality_no_aslr", N["personality"], 0x0040000),
    ("personality_query", N["personality"], 0xffffffff),
    ("unshare_user", N["unshare"], 0x10000000),
]
if N.get("x32"):
    probes.append(("x32_getpid", N["x32"] | N["getpid"]))
for name, *args in probes:
    print(name, sc(*args), flush=True)
`

// TestSandboxHardening plays the agent inside a real sandbox: the denied
// calls fail against a process of its uid it did not start, another arch's
// calls kill, and the host kernel's files read nothing or are read-only.
// The desktop under the filter: TestSettleIdleUnderFilter.
func TestSandboxHardening(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("confined sandboxes need root (rootless is refused: TestRootlessRefused)")
	}
	if !seccompSupported() {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("the probes run with the sandbox's python3 (/usr/bin/python3)")
	}
	p := newTestProvider(t, Options{})
	sb := pooltest.Create(t, p)
	c := pooltest.Dial(t, sb)

	if caps := p.Capabilities(); caps.Confinement == nil || caps.Confinement.Seccomp != seccompProfileName {
		t.Errorf("confinement %+v; want seccomp %q", caps.Confinement, seccompProfileName)
	}
	// The filter is on guestd (checked from the host: the agent cannot see
	// it) and on the agent.
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.InitPID(sb.ID))); err != nil || !strings.Contains(string(st), "Seccomp:\t2") {
		t.Errorf("guestd's status (%v): want Seccomp: 2\n%s", err, st)
	}
	if st := pooltest.MustSh(t, c, "grep -E '^Seccomp:' /proc/self/status"); st != "Seccomp:\t2" {
		t.Errorf("agent: %q; want Seccomp: 2", st)
	}

	t.Run("calls", func(t *testing.T) {
		nums := map[string]uintptr{"getpid": unix.SYS_GETPID, "x32": uintptr(x32SyscallBit)}
		for _, n := range []string{"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "mount", "keyctl", "perf_event_open",
			"bpf", "userfaultfd", "io_uring_setup", "setns", "clone3", "personality", "unshare"} {
			nums[n] = sysNumbers[n]
		}
		js, _ := json.Marshal(nums)
		// The target: the agent's own, started apart from the probe, as a
		// desktop helper is.
		out := pooltest.MustSh(t, c, `setsid sleep 600 </dev/null >/dev/null 2>&1 & pid=$!
python3 -c '`+seccompProbe+`' "$pid" '`+string(js)+`'
kill "$pid"`)
		got := map[string]string{}
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				got[f[0]] = f[1]
			}
		}
		want := map[string]string{
			"ptrace_attach": "EPERM", "ptrace_traceme": "EPERM", "process_vm_readv": "EPERM", "process_vm_writev": "EPERM",
			"kcmp": "EPERM", "mount": "EPERM", "keyctl": "EPERM", "perf_event_open": "EPERM", "bpf": "EPERM",
			"userfaultfd": "EPERM", "io_uring_setup": "EPERM", "setns": "EPERM", "clone3": "ENOSYS",
			"personality_no_aslr": "EPERM", "personality_query": "ok", "unshare_user": "EPERM",
		}
		if x32SyscallBit != 0 {
			want["x32_getpid"] = "ENOSYS"
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s as the agent: %q; want %s", k, got[k], v)
			}
		}
		if t.Failed() {
			t.Logf("probe output:\n%s", out)
		}
		if ia32Works() {
			if out, code := pooltest.Sh(t, c, "python3 -c '"+ia32Getpid+"'"); code != 128+int(syscall.SIGSYS) {
				t.Errorf("an i386 call as the agent: exit %d (%q); want killed by SIGSYS", code, out)
			}
		}
		// A shell, a fork and an exec work.
		if out := pooltest.MustSh(t, c, "sh -c 'echo $((6*7))' | cat"); out != "42" {
			t.Errorf("shell pipeline: %q", out)
		}
	})

	t.Run("proc", func(t *testing.T) {
		mi := pooltest.MustSh(t, c, "cat /proc/self/mountinfo")
		opts := map[string]string{} // mount point → its options (the last mount there)
		for _, l := range strings.Split(mi, "\n") {
			if f := strings.Fields(l); len(f) > 5 {
				opts[f[4]] = f[5]
			}
		}
		for _, path := range maskedPaths {
			fi, err := os.Lstat(path)
			if err != nil || !strings.HasPrefix(path, "/proc/") {
				continue // the sandbox mounts no /sys
			}
			if _, ok := opts[path]; !ok {
				t.Errorf("%s: not masked (no mount there)", path)
			}
			cmd := "cat " + path + " 2>/dev/null | wc -c"
			if fi.IsDir() {
				cmd = "ls -A " + path + " | wc -l"
			}
			if out := pooltest.MustSh(t, c, cmd); out != "0" {
				t.Errorf("%s as the agent: %s bytes or entries; want none", path, out)
			}
		}
		for _, path := range readOnlyPaths {
			if _, err := os.Lstat(path); err != nil {
				continue
			}
			if o, ok := opts[path]; !ok || !slices.Contains(strings.Split(o, ","), "ro") {
				t.Errorf("%s: mount options %q; want a read-only mount", path, o)
			}
		}
		if out, code := pooltest.Sh(t, c, "echo h > /proc/sysrq-trigger 2>&1"); code == 0 {
			t.Errorf("writing /proc/sysrq-trigger succeeded (%q)", out)
		}
		// The IPC limits are still the sandbox's, though /proc/sys is
		// read-only.
		if out := pooltest.MustSh(t, c, "cat /proc/sys/kernel/shmmax"); out != strconv.FormatInt(p.opts.ShmBytes, 10) {
			t.Errorf("kernel.shmmax = %s; want %d", out, p.opts.ShmBytes)
		}
	})

}

// TestSettleIdleUnderFilter: the desktop boots and captures under the
// filter, and a settle still ends on quiescence, which guestd judges by
// reading the desktop's threads' syscall, schedstat and mem files in /proc
// with CAP_SYS_PTRACE (guest/quiesce.go): a ptrace access check, not the
// ptrace call the filter denies.
func TestSettleIdleUnderFilter(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("confined sandboxes need root (rootless is refused: TestRootlessRefused)")
	}
	if !seccompSupported() {
		t.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	p := newTestProvider(t, Options{})
	sb := pooltest.Create(t, p)
	c := pooltest.Dial(t, sb)
	if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.InitPID(sb.ID))); err != nil || !strings.Contains(string(st), "Seccomp:\t2") {
		t.Fatalf("guestd's status (%v): want Seccomp: 2", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if h, err := c.Health(ctx); err != nil || !h.X {
		t.Fatalf("health: %+v, %v", h, err)
	}
	if _, err := c.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.LaunchApp, App: "xterm", Args: []string{"-title", "hardened"}}}); err != nil {
		t.Fatalf("launch xterm: %v", err)
	}
	// A settle ends on quiescence once the xterm has drawn; a loaded
	// host may keep a thread running through a few.
	var settles []string
	for range 10 {
		s, err := c.Screenshot(ctx, wire.ObserveArgs{AfterInput: true,
			Observe: aci.Observe{Format: aci.FormatRaw, Settle: &aci.Settle{FirstMS: 200, QuietMS: 500, MaxMS: 8000}}})
		if err != nil {
			t.Fatalf("capture: %v", err)
		}
		if len(s.Data) == 0 || s.W == 0 || s.Settle == nil {
			t.Fatalf("capture: %dx%d, %d bytes, settle %+v", s.W, s.H, len(s.Data), s.Settle)
		}
		if s.Settle.Idle {
			return
		}
		settles = append(settles, fmt.Sprintf("%+v", *s.Settle))
	}
	t.Errorf("no settle ended on quiescence under the filter: %v", settles)
}

// BenchmarkSandboxSyscalls is a system-call-heavy load in a sandbox, as the
// agent: dd copying one byte at a time (a read and a write per byte).
// cpu-ns/syscall is dd's CPU time (user and system, as bash's time reads
// it) per call, the filter included (docs/architecture.md, "Process
// provider hardening").
//
//	go test -run '^$' -bench SandboxSyscalls -benchtime 20x ./pool/process/
func BenchmarkSandboxSyscalls(b *testing.B) {
	p := newTestProvider(b, Options{})
	ctx := context.Background()
	sb, err := p.Create(ctx, pool.Spec{})
	if err != nil {
		b.Fatal(err)
	}
	c, err := client.Dial(ctx, sb.GuestNetwork, sb.GuestAddr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const bytes = 200000
	var ns int64
	for b.Loop() {
		r, err := c.Exec(ctx, wire.ExecArgs{TimeoutMS: 60000, Argv: []string{"bash", "-c",
			fmt.Sprintf(`TIMEFORMAT='%%3U %%3S'; time dd if=/dev/zero of=/dev/null bs=1 count=%d 2>/dev/null`, bytes)}})
		if err != nil || r.ExitCode == nil || *r.ExitCode != 0 {
			b.Fatalf("dd: %v %+v", err, r)
		}
		var user, sys float64
		if _, err := fmt.Sscanf(strings.TrimSpace(string(r.Stderr)), "%f %f", &user, &sys); err != nil {
			b.Fatalf("dd: %q: %v", r.Stderr, err)
		}
		ns += int64((user + sys) * 1e9)
	}
	b.ReportMetric(float64(ns)/float64(b.N)/(2*bytes), "cpu-ns/syscall")
}

// BenchmarkSeccompCost is what the filter adds to one system call, in CPU
// time, in child processes run alternately without and with it: getppid,
// which the kernel's cache of always-allowed numbers lets through without
// running the filter (Linux 5.11 and later), and personality(query), whose
// argument the filter reads, so it runs on every call (as clone's does).
//
//	go test -run '^$' -bench SeccompCost -benchtime 40x ./pool/process/
func BenchmarkSeccompCost(b *testing.B) {
	if !seccompSupported() {
		b.Skip("no seccomp filter on " + runtime.GOARCH)
	}
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var sum [2][2]float64 // [plain, filtered][getppid, personality] ns
	for b.Loop() {
		for i, mode := range []string{"cost", "cost-filtered"} {
			cmd := exec.Command(self, "-test.run=^TestSeccompFilter$", "-test.count=1")
			cmd.Env = append(os.Environ(), seccompChildEnv+"="+mode, "SHINKEN_GUESTD=/nonexistent")
			out, err := cmd.CombinedOutput()
			var g, p float64
			if i := strings.Index(string(out), "cost getppid="); err != nil || i < 0 {
				b.Fatalf("%s child: %v\n%s", mode, err, out)
			} else if _, err := fmt.Sscanf(string(out[i:]), "cost getppid=%f personality=%f", &g, &p); err != nil {
				b.Fatalf("%s child: %v\n%s", mode, err, out)
			}
			sum[i][0] += g
			sum[i][1] += p
		}
	}
	n := float64(b.N)
	b.ReportMetric(sum[0][0]/n, "getppid-ns-plain")
	b.ReportMetric(sum[1][0]/n, "getppid-ns-filtered")
	b.ReportMetric(sum[0][1]/n, "personality-ns-plain")
	b.ReportMetric(sum[1][1]/n, "personality-ns-filtered")
}

// seccompCostChild times two system calls, under the filter or not, and
// prints "cost getppid=<ns> personality=<ns>".
func seccompCostChild(t *testing.T, filtered bool) {
	runtime.LockOSThread()
	if filtered {
		loadFilter(t, unix.EPERM)
	}
	// The thread's CPU time, not the wall clock: time other processes
	// take from a loaded host is not counted.
	cpu := func() int64 {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
			t.Fatal(err)
		}
		return ts.Nano()
	}
	const n = 500000
	t0 := cpu()
	for range n {
		unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
	}
	t1 := cpu()
	for range n {
		unix.RawSyscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)
	}
	t2 := cpu()
	fmt.Printf("cost getppid=%.1f personality=%.1f\n", float64(t1-t0)/n, float64(t2-t1)/n)
}
