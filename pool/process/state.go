package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/procstat"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/internal/safecopy"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"
)

// writableDirs are a sandbox's own directories that snapshots carry.
var writableDirs = []string{"home", "workspace", "tmp"}

// claimRun creates this provider's run directory, owned through an flock
// on <root>/runs/<run>.lock held for the provider's life. The lock file is
// locked before it becomes visible, so a sweeper never mistakes a starting
// run for an orphan.
func (p *Provider) claimRun() error {
	var idb [4]byte
	_, _ = rand.Read(idb[:])
	id := hex.EncodeToString(idb[:])
	runs := filepath.Join(p.opts.Root, "runs")
	tmp := filepath.Join(runs, "."+id+".lock")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("process: claim run: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return fmt.Errorf("process: claim run: %w", err)
	}
	p.runDir = filepath.Join(runs, id)
	for _, d := range []string{"sandboxes", "snapshots"} {
		if err := os.MkdirAll(filepath.Join(p.runDir, d), 0o755); err != nil {
			f.Close()
			return fmt.Errorf("process: claim run: %w", err)
		}
	}
	if err := os.Rename(tmp, filepath.Join(runs, id+".lock")); err != nil {
		f.Close()
		return fmt.Errorf("process: claim run: %w", err)
	}
	p.runLock = f
	return nil
}

// releaseRun removes the run directory and drops its lock.
func (p *Provider) releaseRun() {
	if p.runLock == nil {
		return
	}
	_ = os.RemoveAll(p.runDir)
	_ = os.Remove(p.runDir + ".lock")
	p.runLock.Close()
	p.runLock = nil
}

// sweep reaps every run under root whose owner is gone (its lock is free):
// it kills the sandboxes recorded there and removes their state. It
// returns how many sandboxes it found.
func sweep(ctx context.Context, root string, logf func(string, ...any)) int {
	runs := filepath.Join(root, "runs")
	locks, _ := filepath.Glob(filepath.Join(runs, "*.lock"))
	n := 0
	for _, lock := range locks {
		if strings.HasPrefix(filepath.Base(lock), ".") {
			continue
		}
		f, err := os.Open(lock)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close() // a live provider owns it
			continue
		}
		dir := strings.TrimSuffix(lock, ".lock")
		pids, _ := filepath.Glob(filepath.Join(dir, "sandboxes", "*", "pid"))
		for _, pf := range pids {
			n++
			if err := killRecorded(ctx, pf); err != nil {
				logf("process: sweep %s: %v", pf, err)
			}
		}
		removeRunCgroups(filepath.Base(dir))
		unmountRunStates(dir)
		_ = os.RemoveAll(dir)
		_ = os.Remove(lock)
		f.Close()
	}
	return n
}

// writePidFile records pid with its start time, so a sweep never kills a
// recycled pid.
func writePidFile(path string, pid int) error {
	st, err := startTime(pid)
	if err != nil {
		return err
	}
	return os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", pid, st), 0o644)
}

// startTime is the process's start time (procstat.Stat.Start).
func startTime(pid int) (uint64, error) {
	st, err := procstat.Read(pid)
	return st.Start, err
}

// killRecorded kills the process group recorded in a pid file if it is
// still the same process, and waits (bounded) until it is gone.
func killRecorded(ctx context.Context, pidFile string) error {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return err
	}
	var pid int
	var st uint64
	if _, err := fmt.Sscan(string(b), &pid, &st); err != nil || pid <= 1 {
		return fmt.Errorf("malformed pid file")
	}
	if cur, err := startTime(pid); err != nil || cur != st {
		return nil // gone, or the pid was reused
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL) // sandboxes lead their group
	_ = syscall.Kill(pid, syscall.SIGKILL)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		if cur, err := startTime(pid); err != nil || cur != st {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pid %d survived SIGKILL: %w", pid, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// displays hands out X display numbers, each held by an flock in dir until
// released, so concurrent providers sharing a root never share a display.
type displays struct {
	dir        string
	base, n    int
	stride     int // numbers handed out are base, base+stride, ... (n of them)
	mu         sync.Mutex
	held       map[int]*os.File
	next       int
	checkHostX bool   // unconfined: the host's /tmp holds the X locks
	what       string // what the numbers are, for errors
}

func newDisplays(dir string, base, n int) *displays {
	return &displays{dir: dir, base: base, n: n, stride: 1, held: make(map[int]*os.File), what: "display numbers"}
}

func (d *displays) acquire() (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range d.n {
		num := d.base + d.stride*((d.next+i)%d.n)
		if d.held[num] != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(d.dir, strconv.Itoa(num)+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return 0, fmt.Errorf("process: %s lock: %w", d.what, err)
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
			f.Close()
			continue
		}
		if d.checkHostX && !cleanStaleX(os.TempDir(), num) {
			f.Close()
			continue // a live X server outside our control owns it
		}
		d.held[num] = f
		d.next = ((num-d.base)/d.stride + 1) % d.n
		return num, nil
	}
	return 0, pool.Errorf(pool.ErrExhausted, aci.CodePoolExhausted, "process: all %d %s from %d are in use (raise Options.Displays / Options.UIDs)", d.n, d.what, d.base)
}

// release frees a display once its sandbox is confirmed gone.
func (d *displays) release(num int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f := d.held[num]; f != nil {
		f.Close()
		delete(d.held, num)
	}
}

// cleanStaleX removes display num's X lock and socket under tmp when the
// lock's owner is dead. It reports whether the display is free.
func cleanStaleX(tmp string, num int) bool {
	lock := filepath.Join(tmp, fmt.Sprintf(".X%d-lock", num))
	b, err := os.ReadFile(lock)
	if err == nil {
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && syscall.Kill(pid, 0) == nil {
			return false
		}
		_ = os.Remove(lock)
	}
	_ = os.Remove(filepath.Join(tmp, ".X11-unix", fmt.Sprintf("X%d", num)))
	return true
}

// makeDirs creates a sandbox's directories, seeded from a snapshot dir
// when seed is not empty (at most max bytes copied, as a snapshot counts
// them), owned by uid/gid (when uid >= 0).
func makeDirs(ctx context.Context, dir, seed string, uid, gid int, max int64) error {
	c := &safecopy.Copy{Ctx: ctx, UID: uid, GID: gid, Max: max, Skip: safecopy.SkipX}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range append([]string{"run"}, writableDirs...) {
		p := filepath.Join(dir, d)
		if seed != "" && d != "run" {
			if err := c.Tree(seed, d, p); err != nil {
				return err
			}
		} else if err := os.Mkdir(p, 0o755); err != nil {
			return err
		}
		if d == "run" {
			continue // the host's channel: guestd's, never the agent's
		}
		if err := chown(p, uid, gid); err != nil {
			return err
		}
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Chmod(tmp, 0o1777); err != nil {
		return err
	}
	rt := filepath.Join(tmp, "runtime")
	if err := os.MkdirAll(rt, 0o700); err != nil {
		return err
	}
	return chown(rt, uid, gid)
}

func chown(path string, uid, gid int) error {
	if uid < 0 {
		return nil
	}
	return os.Lchown(path, uid, gid)
}

// awaitHello polls the guest socket until guestd answers hello, the init
// exits, or ctx ends. guestd listens only once the desktop is ready, so a
// hello is the readiness probe.
func awaitHello(ctx context.Context, addr string, dead <-chan struct{}) error {
	wait := 2 * time.Millisecond
	var last error
	for {
		select {
		case <-dead:
			return pool.Errorf(pool.ErrSandboxDied, aci.CodeSandboxDied, "init exited before the guest answered")
		default:
		}
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", addr)
		if err == nil {
			err = hello(ctx, conn)
			conn.Close()
			if err == nil {
				return nil
			}
			var ae *aci.Error
			if errors.As(err, &ae) {
				return err
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("guest did not answer hello (last: %v): %w: %w", last, ctx.Err(), aci.Errorf(aci.CodeTimeout, "sandbox boot timed out"))
		case <-dead:
		case <-time.After(wait):
		}
		wait = min(wait*2, 50*time.Millisecond)
	}
}

// hello speaks one hello call on conn.
func hello(ctx context.Context, conn net.Conn) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	body, err := msgpack.Marshal(&wire.HelloArgs{Protocol: wire.Protocol, Client: "pool/process"})
	if err != nil {
		return err
	}
	frame, err := wire.Encode(&wire.Message{ID: 1, Type: wire.TypeCall, Method: wire.MethodHello, Body: body})
	if err != nil {
		return err
	}
	if err := wire.WriteFrame(conn, frame); err != nil {
		return err
	}
	for {
		b, err := wire.ReadFrame(conn, nil)
		if err != nil {
			return err
		}
		// The guest is not trusted: its frame is walked before decoding,
		// as every host reader of guest frames does.
		if err := client.CheckFrame(b); err != nil {
			return fmt.Errorf("guest sent a frame refused before decoding: %w", err)
		}
		m, err := wire.Decode(b)
		if err != nil {
			return err
		}
		if m.ID != 1 || m.Type != wire.TypeReply {
			continue
		}
		if m.Error != nil {
			return m.Error
		}
		return nil
	}
}
