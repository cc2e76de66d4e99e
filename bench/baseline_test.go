package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestBaselineStepAndClose(t *testing.T) {
	for _, tool := range BaselineTools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (make deps installs it): %v", tool, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bl, err := StartBaseline(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bl.Warning != "" {
		t.Log(bl.Warning)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			bl.Close()
		}
	})
	n, err := bl.Step(ctx, clickX, clickY)
	if err != nil {
		t.Fatal(err)
	}
	png, err := os.ReadFile(filepath.Join(bl.dir, "shot.png"))
	if err != nil {
		t.Fatal(err)
	}
	if n != len(png) || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("baseline step: got %d bytes (file %d, prefix %q); want a PNG of that size", n, len(png), png[:min(8, len(png))])
	}
	// The counter keeps the screen changing: a later capture differs.
	// (Captured again until it does, within a deadline: the ticker's
	// period is not the test's to guess.)
	changed := false
	for deadline := time.Now().Add(10 * time.Second); !changed && time.Now().Before(deadline); {
		if _, err := bl.Step(ctx, clickX, clickY); err != nil {
			t.Fatal(err)
		}
		png2, _ := os.ReadFile(filepath.Join(bl.dir, "shot.png"))
		changed = !bytes.Equal(png, png2)
	}
	if !changed {
		t.Errorf("baseline captures stayed identical for 10 s; want the ticker to change the screen")
	}
	pids := make([]int, len(bl.procs))
	for i, p := range bl.procs {
		pids[i] = p.Process.Pid
	}
	dir := bl.dir
	bl.Close()
	closed = true
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d still running after Close", pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("baseline dir %s: got %v; want removed", dir, err)
	}
}
