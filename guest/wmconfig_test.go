package guest

import (
	"os"
	"strings"
	"testing"
)

// TestWMConfigStartsNothing: the window manager's configuration, made from
// the system's, holds no binding that starts a program, shows the root menu
// (whose entries start programs) or ends the window manager, and keeps the
// rest (moving, focusing, the window menu).
func TestWMConfigStartsNothing(t *testing.T) {
	src, err := os.ReadFile(openboxRC[0])
	if err != nil {
		t.Skipf("openbox not installed: %v", err)
	}
	if !strings.Contains(string(src), `name="Execute"`) || !strings.Contains(string(src), "root-menu") {
		t.Fatalf("the system's rc.xml binds neither Execute nor the root menu: the test would prove nothing")
	}
	path, err := writeWMConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, bad := range []string{`name="Execute"`, `name="Exit"`, `name="Restart"`, `name="SessionLogout"`, "root-menu"} {
		if strings.Contains(got, bad) {
			t.Errorf("the window manager's configuration still holds %s", bad)
		}
	}
	for _, keep := range []string{`name="Move"`, "client-menu", `name="Focus"`, "<theme>"} {
		if strings.Contains(string(src), keep) && !strings.Contains(got, keep) {
			t.Errorf("the window manager's configuration lost %s", keep)
		}
	}
}
