package main_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImportOSWorldEndToEnd imports three tasks written in OSWorld's format
// (testdata/osworld: a command getter, a file compared with a cached gold
// file under conj "and", an infeasible task), serves them unchecked, and
// plays scripted episodes from the Python client: solved scores 1,
// unsolved, ended with fail, or a FIFO where the file belongs 0, and the
// infeasible task 1 only when the agent ends with fail.
func TestImportOSWorldEndToEnd(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	bin, guestd := binaries(t)
	out := t.TempDir()
	imp := exec.Command(bin, "tasks", "import-osworld", "testdata/osworld/examples", "--cache", "testdata/osworld/cache", "--out", out, "--json")
	b, err := imp.Output()
	if err != nil {
		t.Fatalf("import-osworld: %v", err)
	}
	var rep struct {
		Imported int `json:"imported"`
		Refused  int `json:"refused"`
	}
	if err := json.Unmarshal(b, &rep); err != nil || rep.Imported != 3 || rep.Refused != 0 {
		t.Fatalf("import-osworld report: %v %s", err, b)
	}
	s := startServerPool(t, bin, guestd, t.TempDir(), 1, "--allow-unchecked", "--tasks", out)
	drive := exec.Command("/usr/bin/python3", "drive.py", s.url)
	drive.Dir = filepath.Join("testdata", "osworld")
	var stderr strings.Builder
	drive.Stderr = &stderr
	got, err := drive.Output()
	if err != nil {
		t.Fatalf("drive.py: %v\n%s", err, stderr.String())
	}
	var rewards map[string]any
	if err := json.Unmarshal(got, &rewards); err != nil {
		t.Fatalf("drive.py printed %q: %v", got, err)
	}
	want := map[string]float64{
		"mkdir solved": 1, "mkdir unsolved": 0, "mkdir solved, then fail": 0,
		"note solved": 1, "note unsolved": 0, "note a FIFO": 0,
		"infeasible fail": 1, "infeasible done": 0,
	}
	for k, w := range want {
		if r, ok := rewards[k].(float64); !ok || r != w {
			t.Errorf("%s: reward %v, want %v", k, rewards[k], w)
		}
	}
}
