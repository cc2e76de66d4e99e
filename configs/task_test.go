package configs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestShippedTasksLoad(t *testing.T) {
	ts, err := LoadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) < 10 {
		t.Errorf("got %d shipped tasks; want at least 10", len(ts))
	}
	for _, id := range ts.IDs() {
		task := ts[id]
		if len(task.Solution) == 0 || len(task.Wrong) == 0 || len(task.Wrong[0]) == 0 {
			t.Errorf("task %s: needs a reference solution and a wrong one", id)
		}
		if len(task.Solution) > task.MaxSteps {
			t.Errorf("task %s: solution takes %d steps, over max_steps %d", id, len(task.Solution), task.MaxSteps)
		}
	}
}

func TestLoadTasksRejectsBadFiles(t *testing.T) {
	cases := map[string]string{
		"unknown field":  `{"id":"x","max_steps":1,"verifier":{"shell":"echo 1"},"bogus":1}`,
		"no verifier":    `{"id":"x","max_steps":1}`,
		"id mismatch":    `{"id":"y","max_steps":1,"verifier":{"shell":"echo 1"}}`,
		"two-kind step":  `{"id":"x","max_steps":1,"verifier":{"shell":"echo 1"},"setup":[{"exec":{"shell":"true"},"put_file":{"path":"a","text":""}}]}`,
		"unknown verb":   `{"id":"x","max_steps":1,"verifier":{"shell":"echo 1"},"solution":[[{"verb":"teleport"}]]}`,
		"zero max_steps": `{"id":"x","verifier":{"shell":"echo 1"}}`,
	}
	for name, body := range cases {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "x.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadTasks(dir); err == nil {
			t.Errorf("%s: got no error; want one", name)
		} else if !strings.Contains(err.Error(), "x.json") {
			t.Errorf("%s: error %q does not name the file", name, err)
		}
	}
}

// TestShippedFamiliesChecked: every shipped family that draws from its seed
// holds a passing check of its current definition, at 20 seeds or more
// (`envserver tasks check --tasks configs/tasks --seeds 20 --record`), or 5
// for the browser's and the office suite's families, whose episodes cost
// ten times a terminal's (docs/tasks.md, "The checker"): a family edited
// without being proven again would be refused by servers.
func TestShippedFamiliesChecked(t *testing.T) {
	ts, err := LoadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := LoadChecks("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ts.IDs() {
		task := ts[id]
		if !task.Parameterized() {
			continue
		}
		c, ok := rec[id]
		switch {
		case !ok:
			t.Errorf("%s: no check record", id)
		case c.Def != task.DefHash():
			t.Errorf("%s: the record is of another definition (%s, now %s): check it again", id, c.Def, task.DefHash())
		case c.Seeds < minCheckSeeds(task):
			t.Errorf("%s: checked at %d seeds; want at least %d", id, c.Seeds, minCheckSeeds(task))
		}
	}
	for id := range rec {
		if ts[id] == nil {
			t.Errorf("the record names %s, which is not shipped", id)
		}
	}
}

// minCheckSeeds is the fewest seeds a shipped family's record may hold.
func minCheckSeeds(t *Task) int {
	if slices.Contains(t.Apps, "chromium") || slices.Contains(t.Apps, "libreoffice") {
		return 5
	}
	return 20
}
