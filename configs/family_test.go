package configs

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstanceDeterministic: the same (family, version, split, seed) is the
// same instance, byte for byte; distinct seeds give distinct instances.
func TestInstanceDeterministic(t *testing.T) {
	ts, err := LoadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ts.IDs() {
		task := ts[id]
		a, err := task.Instantiate(SplitTrain, 42)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := task.Instantiate(SplitTrain, 42)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("%s: seed 42 drew two different instances", id)
		}
		if !task.Parameterized() {
			continue
		}
		seen := map[string]bool{}
		const n = 200
		for seed := int64(0); seed < n; seed++ {
			in, err := task.Instantiate(SplitTrain, seed)
			if err != nil {
				t.Fatal(err)
			}
			if in.Split != SplitTrain {
				t.Fatalf("%s: train seed %d drew a %s instance", id, seed, in.Split)
			}
			seen[in.Hash] = true
		}
		if len(seen) < n*9/10 {
			t.Errorf("%s: %d seeds drew %d distinct instances; want at least 90%%", id, n, len(seen))
		}
		for seed := int64(0); seed < 50; seed++ {
			in, err := task.Instantiate(SplitTest, seed)
			if err != nil {
				t.Fatal(err)
			}
			if in.Split != SplitTest || seen[in.Hash] {
				t.Fatalf("%s: test seed %d drew a train instance", id, seed)
			}
		}
	}
}

// every is a family that draws every parameter kind.
const every = `{
  "id": "every-kind", "version": 3, "max_steps": 2,
  "instruction": "{{.i}} {{.n}} {{.c}} {{.w}} {{join .s \",\"}} {{join .is \",\"}} {{.p}} {{.d}} {{index .tx 0}} {{len .tb.Rows}} {{.v}}",
  "params": [
    {"name": "i", "int": {"min": -5, "max": 5000}},
    {"name": "n", "number": {"min": 1, "max": 99, "decimals": 2}},
    {"name": "c", "choice": ["a", "b", "c"]},
    {"name": "w", "word": "animals"},
    {"name": "s", "sample": {"list": "cities", "count": [2, 4]}},
    {"name": "is", "ints": {"count": 3, "min": 1, "max": 9, "distinct": true}},
    {"name": "p", "person": true},
    {"name": "d", "date": {"from": "2020-01-01", "to": "2026-12-31"}},
    {"name": "tx", "text": {"lines": [1, 3], "words": [2, 5]}},
    {"name": "tb", "table": {"rows": [3, 6], "columns": [{"name": "item", "word": "products", "unique": true}, {"name": "price", "number": {"min": 1, "max": 50, "decimals": 2}}]}},
    {"name": "v", "value": "{{sumcents (col .tb \"price\")}}"}
  ],
  "instance": [{"put_file": {"path": "~/t.csv", "text": "{{csv .tb \",\"}}"}}],
  "expect": {"total": "{{.v}}"},
  "verifier": {"shell": "echo 0"},
  "solution": [[{"verb": "type_text", "text": "{{.v}}"}], [{"verb": "done"}]]
}`

func loadEvery(t *testing.T) *Task {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "every-kind.json"), []byte(every), 0o644); err != nil {
		t.Fatal(err)
	}
	ts, err := LoadTasks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ts["every-kind"]
}

// TestDrawsArePinned pins what a seed draws: the generator, the bounded
// draws and the word lists are part of the instance, and no Go release or
// machine may change them (docs/tasks.md, "Determinism"). A change here
// changes every family's instances: bump their versions.
func TestDrawsArePinned(t *testing.T) {
	task := loadEvery(t)
	want := map[int64]string{
		0: "34cbbfd9959c08b98b40196b", 1: "a023f2395a6c170401549efb", 2: "d5fb521e5e9555aeffb5a847",
	}
	for seed := range want {
		in, err := task.Instantiate(SplitTrain, seed)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("seed %d: %s %s", seed, in.Hash, in.Instruction)
		if in.Hash != want[seed] {
			t.Errorf("seed %d drew instance %s; pinned %s", seed, in.Hash, want[seed])
		}
	}
}

// TestInstantiateLeavesTheFamily: rendering an instance never writes
// through to the family's own templates.
func TestInstantiateLeavesTheFamily(t *testing.T) {
	task := loadEvery(t)
	before := task.DefHash()
	for seed := int64(0); seed < 20; seed++ {
		if _, err := task.Instantiate(SplitTrain, seed); err != nil {
			t.Fatal(err)
		}
	}
	if task.DefHash() != before {
		t.Fatal("instantiating changed the family's definition")
	}
	in, _ := task.Instantiate(SplitTrain, 5)
	tb := in.Params["tb"].(*Table)
	if got := in.Expect["total"]; got != in.Params["v"] || !strings.Contains(got, ".") {
		t.Errorf("expect total %q; want the price column's exact sum %v", got, in.Params["v"])
	}
	if csv := in.InstanceSetup[0].PutFile.Text; strings.Count(csv, "\n") != len(tb.Rows)+1 || !strings.HasPrefix(csv, "item,price\n") {
		t.Errorf("csv %q: want a header and %d rows", csv, len(tb.Rows))
	}
	seen := map[string]bool{}
	for _, r := range tb.Rows {
		if seen[r[0]] {
			t.Errorf("unique column repeats %q", r[0])
		}
		seen[r[0]] = true
	}
}

// TestSplitsAreDisjoint: no instance is in both splits, whatever seeds
// draw it, and every seed names an instance of each.
func TestSplitsAreDisjoint(t *testing.T) {
	task := loadEvery(t)
	split := map[string]string{}
	for _, sp := range []string{SplitTrain, SplitTest} {
		for seed := int64(0); seed < 300; seed++ {
			in, err := task.Instantiate(sp, seed)
			if err != nil {
				t.Fatal(err)
			}
			if in.Split != sp {
				t.Fatalf("%s seed %d is a %s instance", sp, seed, in.Split)
			}
			if was, ok := split[in.Hash]; ok && was != sp {
				t.Fatalf("instance %s is in both splits", in.Hash)
			}
			split[in.Hash] = sp
		}
	}
	if _, err := task.Instantiate("dev", 0); err == nil {
		t.Error("an unknown split drew an instance")
	}
}

func TestSumCentsIsExact(t *testing.T) {
	got, err := render(`{{sumcents .x}}`, map[string]any{"x": []string{"0.10", "0.20", "19.99", "-1.5", "3"}})
	if err != nil || got != "21.79" {
		t.Errorf("sumcents: %q, %v; want 21.79", got, err)
	}
}

func TestGeneratedDocuments(t *testing.T) {
	b64, err := pdfBase64([]string{"Invoice (copy)", "Total: 12.50", "Grüße"})
	if err != nil {
		t.Fatal(err)
	}
	pdf, _ := base64.StdEncoding.DecodeString(b64)
	// The cross-reference table points at each object.
	x := bytes.LastIndex(pdf, []byte("startxref\n"))
	var xref int
	fmt.Sscanf(string(pdf[x+len("startxref\n"):]), "%d", &xref)
	if !bytes.HasPrefix(pdf[xref:], []byte("xref\n")) {
		t.Fatalf("startxref %d does not point at the xref table", xref)
	}
	for i := 1; i <= 5; i++ {
		var off int
		fmt.Sscanf(string(pdf[xref+len("xref\n0 6\n")+20*i:]), "%d", &off)
		if !bytes.HasPrefix(pdf[off:], []byte(fmt.Sprintf("%d 0 obj", i))) {
			t.Errorf("xref entry %d points at %q", i, pdf[off:off+10])
		}
	}
	if !bytes.Contains(pdf, []byte(`(Invoice \(copy\)) Tj`)) || !bytes.Contains(pdf, []byte(`Gr\374\337e`)) {
		t.Errorf("text not escaped as PDF strings:\n%s", pdf)
	}
	pb, err := pngBase64([]string{"CODE 42"}, 3, "black", "#ffffff")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.StdEncoding.DecodeString(pb)
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil || img.Bounds().Dx() < 7*7*3 {
		t.Fatalf("png: %v, %v", err, img.Bounds())
	}
}
