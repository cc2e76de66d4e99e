package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

func TestMain(m *testing.M) {
	maybeBurnChild()
	servertest.Main(m)
}

func loadShipped() (configs.Tasks, error)           { return configs.LoadTasks("") }
func loadTaskDir(dir string) (configs.Tasks, error) { return configs.LoadTasks(dir) }

// tinyRunner is a runner with the smallest sizes that still exercise every
// code path, against real servers.
func tinyRunner(t *testing.T) *runner {
	t.Helper()
	for _, bin := range []string{"Xvfb", "openbox", "xterm"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (make deps installs it): %v", bin, err)
		}
	}
	tasks, err := loadShipped()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := writeTasks(dir, tasks, defaultTask); err != nil {
		t.Fatal(err)
	}
	cfg, _ := configs.LoadServer("")
	return &runner{
		opts: Options{Task: defaultTask, GuestdPath: servertest.Guestd(t), Logf: t.Logf, ServerLogf: func(string, ...any) {}},
		sz: sizes{pools: []int{1}, window: 6 * time.Second, warmup: 2 * time.Second,
			dedupReplicas: 2, dedupSteps: 2},
		tasks: tasks, taskDir: dir, report: &Report{Server: ServerInfo{Screen: cfg.Screen}},
	}
}

// TestThroughputAndDedupOnRealServer runs the throughput and dedup
// scenarios at their smallest against real sandboxes.
func TestThroughputAndDedupOnRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("boots real sandboxes")
	}
	b := tinyRunner(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	tp, err := b.throughput(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tp.Points) != 2 {
		t.Fatalf("got %d throughput points; want 2 (random, scripted at pool 1)", len(tp.Points))
	}
	for _, p := range tp.Points {
		if p.PhaseMS["act"] <= 0 || p.CPUByProcess["guestd"] <= 0 {
			t.Errorf("%s pool %d: got phases %v and CPU by process %v; want act and guestd positive", p.Policy, p.Pool, p.PhaseMS, p.CPUByProcess)
		}
		if p.Steps <= 0 || p.StepsPerSec <= 0 || p.CPUPerStep <= 0 {
			t.Errorf("%s pool %d: got %d steps, %.2f steps/s, %.4f CPU s/step; want all positive", p.Policy, p.Pool, p.Steps, p.StepsPerSec, p.CPUPerStep)
		}
		// The reference solution solves the task: every finished scripted
		// episode scores 1.
		if p.Policy == "scripted" && p.Episodes > 0 && p.MeanReward != 1 {
			t.Errorf("scripted mean reward: got %v over %d episodes; want 1", p.MeanReward, p.Episodes)
		}
	}

	d, err := b.dedup(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Rows) != 6 {
		t.Fatalf("got %d dedup rows; want 6", len(d.Rows))
	}
	row := func(cache, mode string) DedupRow {
		for _, r := range d.Rows {
			if r.Cache == cache && r.Mode == mode {
				return r
			}
		}
		t.Fatalf("no dedup row %s/%s", cache, mode)
		return DedupRow{}
	}
	for _, cache := range []string{"off", "on"} {
		per, batch, have := row(cache, "per-env"), row(cache, "batch"), row(cache, "batch+have")
		if per.ImageBytes <= 0 || per.WireBytes <= per.ImageBytes {
			t.Errorf("cache %s per-env: got %.0f wire, %.0f image bytes; want image > 0 and wire > image", cache, per.WireBytes, per.ImageBytes)
		}
		// have never sends more image bytes than the same batch without it.
		// The bench screen runs a counter, so every frame is new and its PNG
		// size varies by a few bytes: allow that noise.
		if have.ImageBytes > batch.ImageBytes*1.05 {
			t.Errorf("cache %s: batch+have %.0f image bytes > batch %.0f", cache, have.ImageBytes, batch.ImageBytes)
		}
	}
	// Without the shared cache, every env-step of per-env requests encodes.
	if got := row("off", "per-env").Encodes; got < 0.99 {
		t.Errorf("cache off, per-env: got %.2f encodes per env-step; want 1", got)
	}
}

// TestStepCostOnRealServer runs the stepcost scenario at its smallest
// against a freshly built envserver binary (with guestd beside it): every
// format's steps change the screen, cost CPU, and report the guest's phases.
func TestStepCostOnRealServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds envserver and boots real sandboxes")
	}
	b := tinyRunner(t)
	dir := filepath.Dir(b.opts.GuestdPath)
	build := exec.Command("go", "build", "-o", dir, "github.com/shinken-rl/shinken/cmd/envserver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build envserver: %v\n%s", err, out)
	}
	b.opts.Envserver = filepath.Join(dir, "envserver")
	// CPU is read in clock ticks (10 ms): enough steps that a cheap
	// format's run reads more than zero of them.
	b.sz.costSteps = 16
	b.sz.costWarmup = 2
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sc, err := b.stepCost(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Runs) != 3 {
		t.Fatalf("got %d runs; want 3 (png, raw, jpeg)", len(sc.Runs))
	}
	for _, r := range sc.Runs {
		if r.Steps != 16 || r.CPUPerStepMS <= 0 || r.Changed <= 0 || r.FrameBytes <= 0 {
			t.Errorf("%s: got %d steps, %.2f CPU ms/step, %.2f changed, %.0f frame bytes; want 16 steps and the rest positive", r.Format, r.Steps, r.CPUPerStepMS, r.Changed, r.FrameBytes)
		}
		for _, ph := range []string{"act", "capture", "encode", "http"} {
			if _, ok := r.Phases[ph]; !ok {
				t.Errorf("%s: no %s phase in %v", r.Format, ph, r.Phases)
			}
		}
	}
}
