package guest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest"
	"github.com/shinken-rl/shinken/guest/wire"
)

// a11yDesk is appDesk's desktop with the session's buses: apps launched on
// it export their accessibility trees.
func a11yDesk(t testing.TB) *desk {
	t.Helper()
	needXvfb(t)
	if !guest.HasA11y() {
		t.Skip("dbus-daemon or at-spi2-registryd missing (install dbus and at-spi2-core); skipping a11y tests")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sess, err := guest.StartSession(ctx, guest.SessionConfig{Screen: sizeSpec(1280, 800), WM: "openbox", A11y: true})
	if err != nil {
		t.Fatalf("StartSession: %v", err)
	}
	t.Cleanup(func() { sess.Close() })
	if sess.Bus() == nil {
		t.Fatal("session started without its accessibility bus")
	}
	home, err := os.MkdirTemp("", "shinken-a11y-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.MkdirAll(filepath.Join(home, ".config/gtk-3.0"), 0o755)
	os.WriteFile(filepath.Join(home, ".config/gtk-3.0/settings.ini"), []byte("[Settings]\ngtk-cursor-blink = false\ngtk-enable-animations = false\n"), 0o644)
	for _, n := range []string{"docs", "downloads", "notes.txt", "data.csv"} {
		if filepath.Ext(n) == "" {
			os.MkdirAll(filepath.Join(home, n), 0o755)
		} else {
			os.WriteFile(filepath.Join(home, n), []byte(n+"\n"), 0o644)
		}
	}
	dir := t.TempDir()
	env := sess.AppEnv(append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "NO_AT_BRIDGE=1"))
	srv, err := guest.NewServer(guest.Config{Display: sess.Display(), StateDir: filepath.Join(dir, "state"), Env: env, A11yBus: sess.Bus().A11yAddress()})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "guest.sock")
	ln, err := guest.Listen("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { defer close(served); srv.Serve(context.Background(), ln) }()
	t.Cleanup(func() { srv.Close(); <-served })
	return dialDesk(t, sess, srv, sock)
}

// tree observes the structured observation in mode (tree or diff).
func tree(t testing.TB, d *desk, mode string) *aci.A11yTree {
	t.Helper()
	shot, err := d.cl.Screenshot(ctxT(t), wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG, A11y: mode, Settle: &aci.Settle{QuietMS: 100, MaxMS: 3000}}})
	if err != nil {
		t.Fatal(err)
	}
	if shot.A11y == nil {
		t.Fatalf("observe a11y=%s: no tree in the shot", mode)
	}
	if shot.A11y.Error != nil {
		t.Fatalf("observe a11y=%s: %v", mode, shot.A11y.Error)
	}
	return shot.A11y
}

// find returns the first element with role and a name containing name.
func find(tr *aci.A11yTree, role, name string) (aci.Element, bool) {
	for _, e := range tr.Elements {
		if e.Role == role && strings.Contains(e.Name, name) {
			return e, true
		}
	}
	return aci.Element{}, false
}

func TestA11yDump(t *testing.T) {
	d := a11yDesk(t)
	for _, app := range []string{"galculator", "mousepad", "pcmanfm"} {
		launchApp(t, d, shippedApp{app: app})
		tr := tree(t, d, aci.A11yFull)
		t.Logf("%s: nodes %d walk %dms settle %dms events %d trunc %q\n%s", app, tr.Nodes, tr.WalkMS, tr.SettleMS, tr.Events, tr.TruncatedBy, tr.Text)
	}
}
