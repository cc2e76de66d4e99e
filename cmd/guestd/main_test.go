package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/procstat"
)

// The test binary doubles as guestd when this variable is set.
const asGuestd = "SHINKEN_TEST_AS_GUESTD"

func TestMain(m *testing.M) {
	if os.Getenv(asGuestd) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSessionDaemon runs guestd --session as a process: a hello means the
// desktop is ready, apps recorded in --state come back with --relaunch, and
// SIGTERM ends everything it started.
func TestSessionDaemon(t *testing.T) {
	for _, bin := range []string{"Xvfb", "openbox"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not on PATH; skipping", bin)
		}
	}
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	os.MkdirAll(state, 0o755)
	marker := filepath.Join(dir, "relaunched")
	os.WriteFile(filepath.Join(state, "apps.json"), []byte(`[{"app":"sh","args":["-c","echo $$ > `+marker+`; exec sleep 60"]}]`), 0o644)
	sock := filepath.Join(dir, "guest.sock")
	cmd := exec.Command(os.Args[0], "--session", "--screen", "320x240x24", "--listen", "unix:"+sock, "--state", state, "--relaunch")
	cmd.Env = append(os.Environ(), asGuestd+"=1", "HOME="+dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var cl *client.Client
	for cl == nil {
		c, err := client.Dial(ctx, "unix", sock)
		if err == nil {
			cl = c
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("guestd never answered hello: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer cl.Close()
	h, err := cl.Health(ctx)
	if err != nil || !h.X || !h.WM {
		t.Fatalf("health right after hello got %+v, %v; want x and wm ready", h, err)
	}
	if w := cl.Welcome(); w.Screen != (wire.Size{W: 320, H: 240}) {
		t.Errorf("welcome screen %+v; want 320x240", w.Screen)
	}
	var appPID int
	for appPID == 0 && ctx.Err() == nil {
		b, _ := os.ReadFile(marker)
		appPID, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(10 * time.Millisecond)
	}
	if appPID == 0 {
		t.Fatal("the recorded app was not relaunched")
	}
	res, err := cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.Click, Target: aci.Norm(0.5, 0.5)}, Observe: &wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG}}})
	if err != nil || res.Obs == nil || res.Pointer != [2]int{160, 120} {
		t.Fatalf("act+observe got %+v, %v", res, err)
	}
	// Find the Xvfb and WM the daemon started: its children.
	kids := childrenOf(cmd.Process.Pid)
	if len(kids) < 3 {
		t.Fatalf("guestd children %v; want Xvfb, openbox and the app", kids)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("guestd did not exit on SIGTERM")
	}
	for _, pid := range append(kids, appPID) {
		if alive(pid) {
			t.Errorf("process %d still running after guestd exited", pid)
		}
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
}

// childrenOf lists pid's child processes (whichever thread forked them).
func childrenOf(pid int) []int {
	var out []int
	for _, p := range procstat.All() {
		if p.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out
}

// alive: running and not a zombie.
func alive(pid int) bool {
	st, err := procstat.Read(pid)
	return err == nil && st.State != 'Z'
}

// TestNotDumpable: guestd running as an unprivileged uid is not dumpable,
// so another process of that same uid (the agent, where it shares guestd's
// uid) can read neither its environment nor its memory, while it can read
// a plain process of that uid (the control: the check can fail).
func TestNotDumpable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run guestd and the attacker as another uid")
	}
	const uid = 65534
	dir := t.TempDir()
	// The uid needs to reach and write its home (the test's dirs are root's).
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	start := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		cmd.Env = []string{asGuestd + "=1", "HOME=" + dir, "SECRET_TOKEN=guestd-secret"}
		cmd.SysProcAttr = cred
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	sock := filepath.Join(dir, "g.sock")
	// The test binary is guestd; copied where the uid may run it.
	bin := filepath.Join(dir, "guestd")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	g := start(bin, "--listen", "unix:"+sock, "--display", ":9", "--state", filepath.Join(dir, "state"))
	plain := start("sleep", "60")
	// guestd listens once it has set itself up (dumpable flag first).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("guestd did not listen on %s", sock)
		case <-time.After(10 * time.Millisecond):
		}
	}
	read := func(pid int, file string) error {
		cmd := exec.Command("head", "-c", "64", fmt.Sprintf("/proc/%d/%s", pid, file))
		cmd.SysProcAttr = cred
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := read(plain.Process.Pid, "environ"); err != nil {
		t.Fatalf("control: uid %d cannot read its own plain process's environ: %v", uid, err)
	}
	for _, f := range []string{"environ", "mem", "fd/0"} {
		if err := read(g.Process.Pid, f); err == nil {
			t.Errorf("uid %d read guestd's /proc/%d/%s; want permission denied (not dumpable)", uid, g.Process.Pid, f)
		}
	}
}
