package a11y_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest"
	"github.com/shinken-rl/shinken/guest/a11y"
)

// TestWalkCaps reads a real galculator under caps: a walk that reaches a
// cap returns what it read, labelled truncated by that cap.
func TestWalkCaps(t *testing.T) {
	for _, bin := range []string{"Xvfb", "galculator"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed", bin)
		}
	}
	if !guest.HasA11y() {
		t.Skip("dbus-daemon or at-spi2-registryd missing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sess, err := guest.StartSession(ctx, guest.SessionConfig{Screen: "800x600x24", WM: "none", A11y: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if sess.Bus() == nil {
		t.Fatal("no accessibility bus")
	}
	home := t.TempDir()
	cmd := exec.Command("galculator")
	cmd.Env = sess.AppEnv(append(os.Environ(), "DISPLAY="+sess.Display(), "HOME="+home))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()

	full := a11y.New(a11y.Config{Address: sess.Bus().A11yAddress()})
	defer full.Close()
	var tr *aci.A11yTree
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		if tr, err = full.Snapshot(ctx, aci.A11yFull, 0); err != nil {
			t.Fatal(err)
		}
		if tr.Error == nil && tr.Nodes > 30 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("galculator's tree never came: %+v", tr)
		case <-time.After(delay):
		}
	}
	if tr.Truncated {
		t.Fatalf("uncapped walk truncated by %s", tr.TruncatedBy)
	}
	for _, c := range []struct {
		caps a11y.Caps
		by   string
		max  int
	}{
		{a11y.Caps{MaxNodes: 10}, "nodes", 10},
		{a11y.Caps{MaxDepth: 1}, "depth", tr.Nodes - 1},
		{a11y.Caps{MaxChildren: 3}, "children", tr.Nodes - 1},
	} {
		cl := a11y.New(a11y.Config{Address: sess.Bus().A11yAddress(), Caps: c.caps})
		got, err := cl.Snapshot(ctx, aci.A11yFull, 0)
		cl.Close()
		if err != nil || got.Error != nil {
			t.Fatalf("%+v: %v %+v", c.caps, err, got.Error)
		}
		if !got.Truncated || got.TruncatedBy != c.by || got.Nodes == 0 || got.Nodes > c.max {
			t.Errorf("caps %+v: truncated %v by %q, %d nodes; want truncated by %s with 1..%d nodes", c.caps, got.Truncated, got.TruncatedBy, got.Nodes, c.by, c.max)
		}
	}
}
