package main

import (
	"context"
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
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

// alive: running and not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || len(s) < i+3 || s[i+2] != 'Z'
}
