package process

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// OOM scores (docs/architecture.md, "Sandbox limits"): the kernel's OOM
// killer, when the host itself runs out, picks a sandbox's process long
// before the server that owns all of them.
const (
	serverOOMScoreAdj  = -500
	sandboxOOMScoreAdj = 1000
)

// gateFD is the init's end of the start gate: it reads it to EOF before
// doing anything, and the provider closes the other end once the init is
// in its cgroup (so nothing of the sandbox is ever born outside it).
const gateFD = 3

// limitHit is the limit b was ended by, or the one its cgroup reports
// reached now; "" for none.
func (b *box) limitHit() string {
	if r, _ := b.limit.Load().(string); r != "" {
		return r
	}
	if b.cg != nil {
		return b.cg.limitHit()
	}
	return ""
}

// limitKill ends b because its cgroup reached its memory limit on a v1
// host (v2's memory.oom.group already killed it whole): one OOM-killed
// process would leave a half-dead desktop. The pool sees it die, with the
// reason (pool.Sandbox.LimitHit).
func (p *Provider) limitKill(b *box, reason string) {
	b.limit.CompareAndSwap(nil, reason)
	select {
	case <-b.dead:
		return
	default:
	}
	p.opts.Logf("process: sandbox %s reached its %s limit: ending it", filepath.Base(b.dir), reason)
	b.cg.thaw()
	_ = b.cmd.Process.Kill() // a pidfd: never a reused pid
}

// mountState makes dir a tmpfs of size bytes (nosuid, nodev): the
// sandbox's writable state (home, workspace, /tmp, its guest socket) is
// bounded, and what it writes is charged to its memory cgroup.
func mountState(dir string, size int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	opts := fmt.Sprintf("size=%d,mode=0755", size)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("tmpfs %s: %w", dir, err)
	}
	return nil
}

// unmountState detaches the tmpfs mountState made; a dir that is no
// mount point is not an error.
func unmountState(dir string) error {
	err := unix.Unmount(dir, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmount %s: %w", dir, err)
}

// unmountRunStates detaches the state tmpfs of every sandbox of an
// orphaned run directory.
func unmountRunStates(run string) {
	dirs, _ := filepath.Glob(filepath.Join(run, "sandboxes", "*"))
	for _, d := range dirs {
		_ = unmountState(d)
	}
}

// removeRunCgroups removes the cgroups an orphaned run left.
func removeRunCgroups(run string) {
	if h := probeCgroups(); h != nil {
		h.removeRun(run)
	}
}

// awaitGate blocks until the provider opens the start gate (closes its
// end); a provider that died closes it too, and pdeathsig ends the init.
func awaitGate() error {
	f := os.NewFile(gateFD, "gate")
	if f == nil {
		return errors.New("start gate: no fd")
	}
	defer f.Close()
	if _, err := io.Copy(io.Discard, f); err != nil {
		return fmt.Errorf("start gate: %w", err)
	}
	return nil
}

// ipcLimits are the SysV IPC limits set in each sandbox's own IPC
// namespace (they are per namespace): shared memory bounded like its
// /dev/shm, few segments and queues.
func ipcLimits(shm int64) map[string]string {
	page := int64(os.Getpagesize())
	return map[string]string{
		"shmmax": strconv.FormatInt(shm, 10),
		"shmall": strconv.FormatInt((shm+page-1)/page, 10),
		"shmmni": "256",
		"msgmni": "32",
		"msgmnb": "65536",
	}
}

// setIPCLimits writes ipcLimits through the sandbox's /proc (its own IPC
// namespace's view of kernel.*).
func setIPCLimits(shm int64) error {
	for k, v := range ipcLimits(shm) {
		if err := os.WriteFile("/proc/sys/kernel/"+k, []byte(v), 0); err != nil {
			return fmt.Errorf("sysv ipc %s: %w", k, err)
		}
	}
	return nil
}
