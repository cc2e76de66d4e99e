package guest

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The app exports reach the verifier only as regular files within the
// bound: a link, a FIFO, a directory or an oversized file where vlcrc
// belongs is left out (the verifier finds no vlcrc), never followed or
// waited on.
func TestExportAppsHostile(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("qt-bgcone=0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, plant := range map[string]func(p string) error{
		"link":      func(p string) error { return os.Symlink(secret, p) },
		"fifo":      func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"directory": func(p string) error { return os.Mkdir(p, 0o700) },
		"oversized": func(p string) error { return os.WriteFile(p, bytes.Repeat([]byte("#x=1\n"), (2<<20)/5), 0o600) },
		"missing":   func(p string) error { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			home, out := t.TempDir(), filepath.Join(t.TempDir(), "apps")
			if err := os.MkdirAll(filepath.Join(home, ".config", "vlc"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := plant(filepath.Join(home, ".config", "vlc", "vlcrc")); err != nil {
				t.Fatal(err)
			}
			n, err := exportApps(home, out, nil)
			if err != nil || n != 0 {
				t.Fatalf("exported %d, %v; want none", n, err)
			}
			if _, err := os.Stat(filepath.Join(out, "vlcrc")); err == nil {
				t.Error("vlcrc handed over")
			}
		})
	}
	// A private regular vlcrc is handed over as it is.
	home, out := t.TempDir(), filepath.Join(t.TempDir(), "apps")
	if err := os.MkdirAll(filepath.Join(home, ".config", "vlc"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".config", "vlc", "vlcrc"), []byte("[qt]\nqt-bgcone=0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := exportApps(home, out, nil); err != nil || n != 1 {
		t.Fatalf("exported %d, %v; want 1", n, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "vlcrc")); err != nil || string(b) != "[qt]\nqt-bgcone=0\n" {
		t.Errorf("vlcrc: %q %v", b, err)
	}
	// A linked .config (a link below the home) is not followed either.
	home2 := t.TempDir()
	if err := os.Symlink(filepath.Join(home, ".config"), filepath.Join(home2, ".config")); err != nil {
		t.Fatal(err)
	}
	if n, _ := exportApps(home2, filepath.Join(t.TempDir(), "apps"), nil); n != 0 {
		t.Errorf("exported %d through a linked .config", n)
	}
}
