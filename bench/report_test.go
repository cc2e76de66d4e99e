package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sampleReport is a report as Run fills it, for the renderers.
func sampleReport() *Report {
	return &Report{
		Version: ReportVersion, StartedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Quick: true, Machine: machine(),
		Server: ServerInfo{Provider: "process", Screen: "1280x800x24", Task: defaultTask},
		Latency: &Latency{Steps: 3, Method: "latency-method",
			Baseline: ModeLatency{Mode: "baseline", Method: "baseline-method", Dist: Dist{N: 3, P50: 100, P95: 150, P99: 160}},
			Modes:    []ModeLatency{{Mode: "png", Method: "png-method", Dist: Dist{N: 3, P50: 20, P95: 30, P99: 31}, SpeedupP50: 5, SpeedupP95: 5}}},
		Throughput: &Throughput{Method: "tp-method", Knee: 2, Points: []ThroughputPoint{
			{Policy: "random", Pool: 1, StepsPerSec: 10}, {Policy: "scripted", Pool: 1, StepsPerSec: 4},
			{Policy: "random", Pool: 2, StepsPerSec: 18}, {Policy: "scripted", Pool: 2, StepsPerSec: 7}}},
		Lifecycle: &Lifecycle{Pool: 2, Method: "lc-method", ResetCold: Timed{Method: "cold-method"}, ResetWarm: Timed{Method: "warm-method"},
			Forks: []ForkPoint{{N: 1, Dist: Dist{N: 1, P50: 500}}, {N: 4, Dist: Dist{N: 1, P50: 900}}}},
		Dedup: &Dedup{Replicas: 4, Steps: 2, Method: "dedup-method", Rows: []DedupRow{
			{Cache: "off", Mode: "per-env", Method: "per-env-method", WireBytes: 8000, Saving: 1},
			{Cache: "on", Mode: "per-env", Method: "per-env-method", WireBytes: 8000, Saving: 1},
			{Cache: "on", Mode: "batch", Method: "batch-method", WireBytes: 2000, Saving: 4}}},
		Errors: []string{"throughput: pool 4 failed"},
	}
}

func TestWriteReport(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	r := sampleReport()
	files, err := WriteReport(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{JSONFile, MarkdownFile, "throughput.svg", "episodes.svg", "latency.svg", "fork.svg", "dedup.svg"}
	for _, name := range want {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(files) != len(want) {
		t.Errorf("got %d files %v; want %d", len(files), files, len(want))
	}
	for _, f := range files {
		if strings.HasSuffix(f, ".svg") {
			b, _ := os.ReadFile(f)
			wellFormed(t, string(b))
		}
	}
	var back Report
	b, _ := os.ReadFile(filepath.Join(dir, JSONFile))
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Latency == nil || back.Latency.Modes[0].SpeedupP50 != 5 || back.Throughput.Knee != 2 {
		t.Errorf("JSON round trip lost figures: %s", b)
	}
	md, _ := os.ReadFile(filepath.Join(dir, MarkdownFile))
	// Every figure names how it was measured, and failures are visible.
	for _, s := range []string{"latency-method", "baseline-method", "png-method", "tp-method", "cold-method", "warm-method",
		"dedup-method", "per-env-method", "batch-method", "throughput: pool 4 failed", "(throughput.svg)", "5.0x"} {
		if !strings.Contains(string(md), s) {
			t.Errorf("report.md lacks %q", s)
		}
	}
	tab := Table(r)
	for _, s := range []string{"baseline", "png", "scripted", "fork n=4", "FAILED throughput"} {
		if !strings.Contains(tab, s) {
			t.Errorf("table lacks %q:\n%s", s, tab)
		}
	}
}

func TestWriteTasksAddsLongTask(t *testing.T) {
	tasks, err := loadShipped()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeTasks(dir, tasks, defaultTask); err != nil {
		t.Fatal(err)
	}
	back, err := loadTaskDir(dir)
	if err != nil {
		t.Fatalf("written suite does not load: %v", err)
	}
	if len(back) != len(tasks)+1 || back[longTask] == nil || back[longTask].MaxSteps < 1<<20 {
		t.Errorf("got %d tasks (long: %+v); want %d with a long %s", len(back), back[longTask], len(tasks)+1, longTask)
	}
	if got, want := len(back[longTask].Setup), len(tasks[defaultTask].Setup); got != want {
		t.Errorf("long task setup: got %d steps; want %d", got, want)
	}
}
