package guest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// What an episode can leave outside its files and processes: POSIX shared
// memory and message queues (files of /dev/shm and /dev/mqueue) and System
// V IPC objects, which outlive the processes that made them. A reset in
// place removes them all (docs/architecture.md, "Reward integrity"); only
// guestd's own survive: the X server's framebuffer segment and guestd's
// capture segments, made by processes the reset keeps.

// ipcDirs are the sandbox's POSIX IPC directories, emptied by a reset.
var ipcDirs = []string{"/dev/shm", "/dev/mqueue"}

// clearIPC removes every POSIX and System V IPC object of the episode. It
// only acts as its pid namespace's PID 1, whose /dev and IPC namespace are
// the sandbox's own; elsewhere they are the host's.
func (s *Server) clearIPC(ctx context.Context, keep map[int]bool) error {
	if os.Getpid() != 1 {
		return nil
	}
	for _, dir := range ipcDirs {
		if err := emptyDir(dir); err != nil {
			return fmt.Errorf("reset: %s: %w", dir, err)
		}
	}
	args := sysvLeft(keep, os.Geteuid())
	if len(args) == 0 {
		return nil
	}
	// IPC_RMID takes the object's owner or CAP_SYS_ADMIN, which guestd
	// does not hold: ipcrm runs as the agent, who owns them.
	cmd := exec.Command("ipcrm", args...)
	s.asAgent(cmd)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := s.run(ctx, cmd, nil, 5*time.Second, nil, s.procs.start, func(pid int) { signalGroup(pid, syscall.SIGKILL) })
	if err != nil {
		return fmt.Errorf("reset: ipcrm: %w", err)
	}
	if left := sysvLeft(keep, os.Geteuid()); len(left) > 0 {
		return fmt.Errorf("reset: System V IPC objects left after ipcrm %v: %v (%s)", args, left, bytes.TrimSpace(res.Stderr))
	}
	return nil
}

// emptyDir removes every entry of dir (links are unlinked, never followed);
// a missing dir is empty.
func emptyDir(dir string) error {
	f, err := os.Open(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

// sysvLeft lists, as ipcrm arguments, the System V objects of this IPC
// namespace that the episode left: shared memory segments not made by a
// kept process, semaphore sets and message queues not made by self.
func sysvLeft(keep map[int]bool, self int) []string {
	var args []string
	// /proc/sysvipc/shm: key shmid perms size cpid lpid nattch uid gid cuid ...
	for _, f := range sysvTable("shm") {
		if len(f) > 4 {
			if cpid, err := strconv.Atoi(f[4]); err == nil && !keep[cpid] {
				args = append(args, "-m", f[1])
			}
		}
	}
	// sem: key semid perms nsems uid gid cuid ...; msg: key msqid perms
	// cbytes qnum lspid lrpid uid gid cuid ...
	for _, t := range []struct {
		name, flag string
		cuid       int
	}{{"sem", "-s", 6}, {"msg", "-q", 9}} {
		for _, f := range sysvTable(t.name) {
			if len(f) > t.cuid && f[t.cuid] != strconv.Itoa(self) {
				args = append(args, t.flag, f[1])
			}
		}
	}
	return args
}

// sysvTable reads /proc/sysvipc/<name> as fields, header left out.
func sysvTable(name string) [][]string {
	b, err := os.ReadFile("/proc/sysvipc/" + name)
	if err != nil {
		return nil
	}
	var out [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for first := true; sc.Scan(); first = false {
		if first {
			continue
		}
		if f := bytes.Fields(sc.Bytes()); len(f) > 1 {
			row := make([]string, len(f))
			for i, x := range f {
				row[i] = string(x)
			}
			out = append(out, row)
		}
	}
	return out
}
