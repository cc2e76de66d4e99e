package main_test

import (
	"encoding/json"
	"fmt"
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
	harness(t, s.url)
}

// harness runs OSWorld's single-example loop (testdata/osworld/harness.py)
// over shinken.osworld.DesktopEnv on the imported tasks: both action
// spaces, a screen size other than the server's, the special actions, and
// evaluate on an episode the agent never ended.
func harness(t *testing.T, url string) {
	cmd := exec.Command("/usr/bin/python3", "harness.py", url, t.TempDir())
	cmd.Dir = filepath.Join("testdata", "osworld")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("harness.py: %v\n%s", err, stderr.String())
	}
	type run struct {
		Score       float64        `json:"score"`
		Steps       int            `json:"steps"`
		Screenshots int            `json:"screenshots"`
		Size        [2]int         `json:"size"`
		Done        bool           `json:"done"`
		Info        map[string]any `json:"info"`
		Result      string         `json:"result"`
	}
	var runs map[string]run
	if err := json.Unmarshal(got, &runs); err != nil {
		t.Fatalf("harness.py printed %q: %v", got, err)
	}
	want := map[string]struct {
		score        float64
		steps, shots int // shots: at least one file a turn (a turn's actions share its name within a second)
		done         bool
		size         [2]int
	}{
		"pyautogui solved":                         {1, 3, 3, true, [2]int{1280, 800}},
		"pyautogui unsolved, out of turns":         {0, 3, 3, false, [2]int{1280, 800}},
		"pyautogui solved, then FAIL":              {0, 3, 3, true, [2]int{1280, 800}},
		"computer_13 solved on a 1920x1080 screen": {1, 4, 3, true, [2]int{1920, 1080}},
		"infeasible FAIL":                          {1, 1, 1, true, [2]int{1280, 800}},
		"infeasible DONE":                          {0, 1, 1, true, [2]int{1280, 800}},
	}
	for name, w := range want {
		r, ok := runs[name]
		switch {
		case !ok:
			t.Errorf("%s: not run", name)
		case r.Score != w.score || r.Result != fmt.Sprintf("%.1f", w.score):
			t.Errorf("%s: score %v (result.txt %q), want %v", name, r.Score, r.Result, w.score)
		case r.Steps != w.steps || r.Screenshots < w.shots || r.Screenshots > w.steps || r.Done != w.done:
			t.Errorf("%s: %d steps, %d screenshots, done %v; want %d, %d, %v", name, r.Steps, r.Screenshots, r.Done, w.steps, w.shots, w.done)
		case r.Size != w.size:
			t.Errorf("%s: screenshots %v, want %v", name, r.Size, w.size)
		}
	}
	if f := runs["pyautogui solved, then FAIL"].Info; f["fail"] != true || f["exit_reason"] != "task_complete" {
		t.Errorf("FAIL step's info %v: want fail and the exit reason", f)
	}
}
