package process

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// osDirs are the host directories a sandbox sees (read-only, nosuid): the
// OS its apps need. A usr-merged host's /bin, /lib... are symlinks and are
// copied as such. Nothing else of the host is visible: no checkout, no
// configs, no server binaries, no state directory, no other sandbox.
var osDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// hiddenOSDirs are covered by an empty read-only tmpfs even though they lie
// under osDirs: locally installed software, where a server binary (which
// embeds its task suite) would live.
var hiddenOSDirs = []string{"/usr/local"}

// sharedCaches are host caches bound read-only into every sandbox: derived
// from files the sandbox sees anyway (the fonts under /usr/share/fonts, the
// Compose tables under /usr/share/X11/locale), they spare each desktop its
// own build of them. Without the system's fontconfig cache every new
// sandbox's window manager and apps scan all fonts and write a private cache
// into the agent's home, seconds of CPU per boot and a writer racing an
// in-place reset's restore; without libX11's Compose cache (written by
// images/compose-cache.sh) the window manager and every xterm parse half a
// megabyte of Compose table at start-up (docs/architecture.md, "Sandbox
// lifecycle and reset in place").
var sharedCaches = []string{"/var/cache/fontconfig", "/var/cache/libx11/compose"}

// maskedPaths are the kernel files a container runtime hides by default,
// and so does a sandbox's init (docs/architecture.md, "Process provider
// hardening"): a file is covered by /dev/null, a directory by an empty
// read-only tmpfs. They show the host's kernel (its memory, the keyrings,
// timers and interrupt counts that tell what other tenants do, hardware),
// none of which a desktop needs. The sandbox mounts no /sys; its two are
// listed for a root that would.
var maskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
	"/sys/firmware", "/sys/devices/virtual/powercap",
}

// readOnlyPaths are the kernel files a container runtime makes read-only
// by default: the host's sysctls (IPC limits excepted, set before: see
// runInit), sysrq, IRQ affinities, buses and filesystems. guestd keeps root
// in the sandbox; these keep it from tuning the host's kernel.
var readOnlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}

// maskKernelPaths applies maskedPaths and readOnlyPaths under root (where
// they exist: a kernel without ACPI has no /proc/acpi).
func maskKernelPaths(root string) error {
	for _, p := range maskedPaths {
		fi, err := os.Lstat(root + p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return fmt.Errorf("mask %s: %w", p, err)
		case fi.IsDir():
			if err := unix.Mount("tmpfs", root+p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0555"); err != nil {
				return fmt.Errorf("mask %s: %w", p, err)
			}
		default:
			if err := unix.Mount("/dev/null", root+p, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("mask %s: %w", p, err)
			}
			if err := setattr(root+p, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC); err != nil {
				return err
			}
		}
	}
	for _, p := range readOnlyPaths {
		if _, err := os.Lstat(root + p); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := unix.Mount(root+p, root+p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", p, err)
		}
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC}
		if err := unix.MountSetattr(-1, root+p, unix.AT_RECURSIVE, attr); err != nil {
			return fmt.Errorf("read-only %s: %w", p, err)
		}
	}
	return nil
}

// devNodes are the host device nodes a sandbox gets.
var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

// confine builds the sandbox's minimal root and pivots into it: a fresh
// tmpfs holding the OS directories read-only, the sandbox's own home,
// workspace, /tmp and /run writable, a private /dev (a few nodes, its own
// devpts and /dev/shm), and a /proc of its own pid namespace in which the
// agent sees only its own processes, the host kernel's files in it masked
// or read-only (maskedPaths, readOnlyPaths). It also brings up loopback.
func confine(cfg *initConfig) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	root := filepath.Join(cfg.Dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	tmpfs := func(target, opts string, flags uintptr) error {
		if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|flags, opts); err != nil {
			return fmt.Errorf("tmpfs %s: %w", target, err)
		}
		return nil
	}
	bind := func(src, dst string, ro bool) error {
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", dst, err)
		}
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if ro {
			attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
		} else {
			attr.Attr_clr = unix.MOUNT_ATTR_RDONLY
		}
		if err := unix.MountSetattr(-1, dst, unix.AT_RECURSIVE, attr); err != nil {
			return fmt.Errorf("bind %s: attributes: %w", dst, err)
		}
		return nil
	}
	mkdir := func(p string, mode os.FileMode) error {
		if err := os.MkdirAll(p, mode); err != nil {
			return err
		}
		return os.Chmod(p, mode)
	}
	if err := tmpfs(root, "mode=0755,size=4m", 0); err != nil {
		return err
	}
	for _, d := range osDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&os.ModeSymlink != 0:
			t, err := os.Readlink(d)
			if err != nil {
				return err
			}
			if err := os.Symlink(t, root+d); err != nil {
				return err
			}
		case fi.IsDir():
			if err := mkdir(root+d, 0o755); err != nil {
				return err
			}
			if err := bind(d, root+d, true); err != nil {
				return err
			}
		}
	}
	for _, h := range append(hiddenOSDirs, cfg.Hide...) {
		if fi, err := os.Stat(root + h); err == nil && fi.IsDir() {
			if err := tmpfs(root+h, "size=4k,mode=0755", unix.MS_RDONLY|unix.MS_NOEXEC); err != nil {
				return err
			}
		}
	}
	// The sandbox's own writable directories.
	for _, d := range []string{"/home", "/run", "/var", "/proc", "/dev"} {
		if err := mkdir(root+d, 0o755); err != nil {
			return err
		}
	}
	if err := mkdir(root+"/tmp", 0o1777); err != nil {
		return err
	}
	if err := os.Symlink("/tmp", root+"/var/tmp"); err != nil {
		return err
	}
	for _, d := range sharedCaches {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		if err := os.MkdirAll(root+d, 0o755); err != nil {
			return err
		}
		if err := bind(d, root+d, true); err != nil {
			return err
		}
	}
	if err := tmpfs(root+"/home", "mode=0755,size=1m", 0); err != nil {
		return err
	}
	for _, d := range []struct{ src, dst string }{
		{"home", sandboxHome}, {"workspace", sandboxWorkspace}, {"tmp", "/tmp"},
	} {
		if d.dst != "/tmp" {
			if err := mkdir(root+d.dst, 0o755); err != nil {
				return err
			}
		}
		if err := bind(filepath.Join(cfg.Dir, d.src), root+d.dst, false); err != nil {
			return err
		}
	}
	// OSWorld's tasks name the home /home/user (docs/osworld.md): a name
	// for the same home, in the sandbox's own read-only /home.
	if err := os.Symlink(filepath.Base(sandboxHome), root+osworldHome); err != nil {
		return err
	}
	// /run: the guest socket's directory (the host's channel) and guestd.
	if err := tmpfs(root+"/run", "mode=0755,size=1m", 0); err != nil {
		return err
	}
	if err := mkdir(root+sandboxRun, 0o755); err != nil {
		return err
	}
	if err := bind(filepath.Join(cfg.Dir, "run"), root+sandboxRun, false); err != nil {
		return err
	}
	if len(cfg.Cgroups) > 0 {
		if err := mkdir(root+sandboxCgroupDir, 0o700); err != nil {
			return err
		}
		for ctl, dir := range cfg.Cgroups {
			if err := mkdir(root+sandboxCgroupDir+"/"+ctl, 0o700); err != nil {
				return err
			}
			if err := unix.Mount(dir, root+sandboxCgroupDir+"/"+ctl, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind cgroup %s: %w", ctl, err)
			}
			if err := setattr(root+sandboxCgroupDir+"/"+ctl, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC); err != nil {
				return err
			}
		}
	}
	if err := os.WriteFile(root+sandboxGuestd, nil, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(cfg.Guestd, root+sandboxGuestd, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind guestd: %w", err)
	}
	if err := setattr(root+sandboxGuestd, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
		return err
	}
	if err := makeDev(root+"/dev", cfg.ShmSize, tmpfs); err != nil {
		return err
	}
	// A proc of the sandbox's pid namespace (the agent sees only its own
	// processes). Mounted while the host's /proc is still visible: a user
	// namespace may mount proc only where one is already fully visible.
	if err := unix.Mount("proc", root+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=invisible"); err != nil {
		return fmt.Errorf("proc: %w", err)
	}
	if err := maskKernelPaths(root); err != nil {
		return err
	}
	// Pivot: the host's root is gone from the sandbox's mount namespace.
	old := root + "/.old"
	if err := os.Mkdir(old, 0o700); err != nil {
		return err
	}
	if err := unix.PivotRoot(root, old); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Unmount("/.old", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host root: %w", err)
	}
	if err := os.Remove("/.old"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("make the root read-only: %w", err)
	}
	return loopbackUp()
}

// makeDev fills the tmpfs at dev: the device nodes of devNodes bound from
// the host, a private devpts and /dev/shm, and the usual symlinks.
func makeDev(dev string, shm int64, tmpfs func(string, string, uintptr) error) error {
	if err := tmpfs(dev, "mode=0755,size=64k", unix.MS_NOEXEC); err != nil {
		return err
	}
	if err := unix.Mount("", dev, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	for _, n := range devNodes {
		if err := os.WriteFile(dev+"/"+n, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount("/dev/"+n, dev+"/"+n, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind /dev/%s: %w", n, err)
		}
		if err := setattr(dev+"/"+n, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC); err != nil {
			return err
		}
	}
	for _, d := range []string{"pts", "shm", "mqueue"} {
		if err := os.Mkdir(dev+"/"+d, 0o755); err != nil {
			return err
		}
	}
	// The IPC namespace's POSIX message queues, where guestd can see (and a
	// reset remove) what an episode left in them.
	if err := unix.Mount("mqueue", dev+"/mqueue", "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mqueue: %w", err)
	}
	if err := unix.Mount("devpts", dev+"/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return fmt.Errorf("devpts: %w", err)
	}
	if err := tmpfs(dev+"/shm", fmt.Sprintf("mode=1777,size=%d", shm), 0); err != nil {
		return err
	}
	for name, target := range map[string]string{
		"ptmx": "pts/ptmx", "fd": "/proc/self/fd", "stdin": "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, dev+"/"+name); err != nil {
			return err
		}
	}
	return nil
}

// setattr sets mount attributes on the mount at path (the flags of a bind
// mount are its own, not its source's nor its parent's).
func setattr(path string, set uint64) error {
	if err := unix.MountSetattr(-1, path, 0, &unix.MountAttr{Attr_set: set}); err != nil {
		return fmt.Errorf("mount attributes of %s: %w", path, err)
	}
	return nil
}

// limitCaps drops every capability but keep from the bounding set, so that
// guestd, which stays root to run the agent and the scorer as their own
// uids, cannot remount, load modules, or reach past its namespaces.
func limitCaps(keep []int) error {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return fmt.Errorf("caps: %w", err)
	}
	last, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("caps: %w", err)
	}
	kept := map[int]bool{}
	for _, c := range keep {
		kept[c] = true
	}
	for c := 0; c <= last; c++ {
		if kept[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}
