package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/api/client"
	"github.com/shinken-rl/shinken/guest/wire"
)

// Apps is the real-applications scenario: per app (a terminal, a text
// editor, Chromium on an offline web app, the office suite's Calc and
// Writer), what a desktop running it costs to build, reset, hold and step,
// and what the same actions cost the way other harnesses take them.
type Apps struct {
	Method string   `json:"method"`
	Resets int      `json:"resets"`           // in-place resets per app
	Steps  int      `json:"steps_per_verb"`   // settled steps per action kind
	Slow   int      `json:"osworld_per_verb"` // action + 2 s + screenshot rounds per action kind
	Execs  int      `json:"xdotool_per_verb"` // xdotool+scrot rounds per action kind
	Rows   []AppRow `json:"rows"`
	Notes  []string `json:"notes,omitempty"`
}

// AppRow is one app's figures. Skipped or Error say why a row is empty.
type AppRow struct {
	App     string  `json:"app"`
	Task    string  `json:"task,omitempty"` // the shipped family measured
	Skipped string  `json:"skipped,omitempty"`
	Error   string  `json:"error,omitempty"`
	Seconds float64 `json:"seconds"`
	Click   [2]int  `json:"click_at"`
	Word    string  `json:"typed"`

	// BootCPU is the CPU-seconds of bench's process tree while a server
	// with a pool of one boots (one bare desktop plus the server's start).
	BootCPU float64 `json:"boot_cpu_s"`
	// Golden is the first reset of the family on that fresh server: wall
	// time, its lease (the golden build: setup on a warm sandbox and its
	// checkpoint) and instance phases from info.timings, and its CPU.
	GoldenMS         float64 `json:"golden_reset_ms"`
	GoldenLeaseMS    float64 `json:"golden_lease_ms"`
	GoldenInstanceMS float64 `json:"golden_instance_ms"`
	GoldenCPU        float64 `json:"golden_cpu_s"`
	// Reset is a reset of the same env, each once the pool holds an idle
	// replica of the golden (a sandbox reset in place); ResetInstance its
	// instance phase; ResetCPU the tree's CPU per reset, the in-place
	// reset that refills the replica included.
	Reset         Dist    `json:"reset"`
	ResetInstance Dist    `json:"reset_instance"`
	ResetCPU      float64 `json:"reset_cpu_s"`
	ResetErrors   int     `json:"reset_errors,omitempty"`
	// Memory of the leased desktop after its steps (its whole process
	// tree).
	PSSMiB float64 `json:"pss_mib"`
	RSSMiB float64 `json:"rss_mib"`
	Procs  int     `json:"procs"`

	ClickStep StepStats `json:"click"`
	TypeStep  StepStats `json:"type"`
	// SlowClick and SlowType are the OSWorld way: the action (no settle),
	// a fixed 2 s sleep, then a screenshot, both through the API.
	SlowClick SlowStats `json:"osworld_click"`
	SlowType  SlowStats `json:"osworld_type"`
	// XdoClick and XdoType are xdotool then scrot run inside the sandbox
	// through the guest's exec.
	XdoClick ExecStats `json:"xdotool_click"`
	XdoType  ExecStats `json:"xdotool_type"`
	// HostBaseline is bench's baseline harness (xdotool + scrot on a plain
	// Xvfb with an xterm redrawing a counter), for the xterm row only.
	HostBaseline *Dist `json:"host_baseline,omitempty"`
}

// StepStats is one action kind's settled steps through the API.
type StepStats struct {
	Dist   Dist      `json:"latency"`
	Settle SettleMix `json:"settle"`
	Errors int       `json:"errors,omitempty"`
}

// SlowStats is the OSWorld way for one action kind: Action is the action
// call (no settle), Shot the screenshot call after the sleep, Total the
// whole round (action, sleep, screenshot).
type SlowStats struct {
	Action Dist `json:"action"`
	Shot   Dist `json:"screenshot"`
	Total  Dist `json:"total"`
	Errors int  `json:"errors,omitempty"`
}

// ExecStats is xdotool then scrot inside the sandbox for one action kind:
// Act the xdotool call, Shot the scrot call, Total both (client wall time
// of each guest exec, from this process).
type ExecStats struct {
	Act    Dist `json:"xdotool"`
	Shot   Dist `json:"scrot"`
	Total  Dist `json:"total"`
	Errors int  `json:"errors,omitempty"`
}

// SettleMix counts how a sample of observations settled (aci.SettleInfo):
// Idle ended early because the desktop had gone idle, Frame on the
// browser's answer that the frame after the action was drawn, Damaged once the
// screen stayed quiet for quiet_ms after changing, Quiet once first_ms
// passed without a change, TimedOut at the ceiling with the screen still
// changing; None were not settled.
type SettleMix struct {
	N        int `json:"n"`
	Idle     int `json:"idle"`
	Frame    int `json:"frame"`
	Damaged  int `json:"damaged_window"`
	Quiet    int `json:"no_damage"`
	TimedOut int `json:"timed_out"`
	None     int `json:"none,omitempty"`
}

// Add counts one observation's settle outcome.
func (m *SettleMix) Add(s *aci.SettleInfo) {
	m.N++
	switch {
	case s == nil:
		m.None++
	case s.TimedOut:
		m.TimedOut++
	case s.Idle:
		m.Idle++
	case s.Frame:
		m.Frame++
	case s.Damaged:
		m.Damaged++
	default:
		m.Quiet++
	}
}

// Frac returns count as a fraction of the sample (0 when empty).
func (m SettleMix) Frac(count int) float64 {
	if m.N == 0 {
		return 0
	}
	return float64(count) / float64(m.N)
}

// String renders the mix as percentages, e.g. "idle 80% / frame 0% /
// damaged 15% / quiet 0% / timed out 5%".
func (m SettleMix) String() string {
	if m.N == 0 {
		return "-"
	}
	s := fmt.Sprintf("idle %.0f%% / frame %.0f%% / damaged %.0f%% / quiet %.0f%% / timed out %.0f%%",
		100*m.Frac(m.Idle), 100*m.Frac(m.Frame), 100*m.Frac(m.Damaged), 100*m.Frac(m.Quiet), 100*m.Frac(m.TimedOut))
	if m.None > 0 {
		s += fmt.Sprintf(" / unsettled %.0f%%", 100*m.Frac(m.None))
	}
	return s
}

// appKind is one row of the scenario: which family runs the app and where
// a click lands that changes nothing lasting (a terminal's text, an
// editor's text area, a blank part of the web page, a cell).
type appKind struct {
	App    string
	Prefer string // the family to take when shipped
	Match  func(*configs.Task) bool
	Click  [2]int
	Why    string // what Match looks for, for the skip note
}

var appKinds = []appKind{
	{App: "xterm", Prefer: "xterm-hello-file", Click: [2]int{200, 200}, Why: "a family whose only app is xterm",
		Match: func(t *configs.Task) bool { return slices.Equal(t.Apps, []string{"xterm"}) }},
	{App: "mousepad", Prefer: "mousepad-fix-config", Click: [2]int{640, 400}, Why: "a family whose only app is mousepad",
		Match: func(t *configs.Task) bool { return slices.Equal(t.Apps, []string{"mousepad"}) }},
	{App: "chromium", Prefer: "shop-buy-cheapest", Click: [2]int{574, 118}, Why: "a chromium family serving a web app",
		Match: func(t *configs.Task) bool { return slices.Contains(t.Apps, "chromium") && servesWeb(t) }},
	{App: "calc", Prefer: "calc-sum-total", Click: [2]int{640, 500}, Why: "a libreoffice family opening a .fods",
		Match: func(t *configs.Task) bool { return officeDoc(t) == "calc" }},
	{App: "writer", Click: [2]int{640, 500}, Why: "a libreoffice family opening a .fodt",
		Match: func(t *configs.Task) bool { return officeDoc(t) == "writer" }},
}

// appPick is the family chosen for an app, or why there is none.
type appPick struct {
	kind appKind
	task string
	skip string
}

// pickApps chooses, for every app kind, its preferred family when shipped,
// else the first family (by id) that matches.
func pickApps(tasks configs.Tasks) []appPick {
	var out []appPick
	for _, k := range appKinds {
		p := appPick{kind: k}
		if t := tasks[k.Prefer]; k.Prefer != "" && t != nil && k.Match(t) {
			p.task = k.Prefer
		} else {
			for _, id := range tasks.IDs() {
				if k.Match(tasks[id]) {
					p.task = id
					break
				}
			}
		}
		if p.task == "" {
			p.skip = "no shipped task: none is " + k.Why
		}
		out = append(out, p)
	}
	return out
}

func servesWeb(t *configs.Task) bool {
	for _, s := range append(slices.Clone(t.Setup), t.InstanceSetup...) {
		if s.Web != nil {
			return true
		}
	}
	return false
}

// officeDoc says which office app a family opens: "calc" for a flat
// spreadsheet (.fods), "writer" for a flat text document (.fodt), "" for
// neither or a family without libreoffice. The document's name is looked
// for in the setup and instance steps first, then in the parameters (a
// family draws the file name, and its steps name it by template).
func officeDoc(t *configs.Task) string {
	if !slices.Contains(t.Apps, "libreoffice") {
		return ""
	}
	steps, _ := json.Marshal(append(slices.Clone(t.Setup), t.InstanceSetup...))
	params, _ := json.Marshal(t.Params)
	for _, b := range [][]byte{steps, params} {
		s := string(b)
		ods, odt := strings.Contains(s, ".fods") || strings.Contains(s, ".ods"), strings.Contains(s, ".fodt") || strings.Contains(s, ".odt")
		switch {
		case ods && !odt:
			return "calc"
		case odt && !ods:
			return "writer"
		}
	}
	return ""
}

// appCopy is the id of bench's copy of a family: the same family with a
// step budget no run reaches, so one episode carries all of a row's steps.
func appCopy(id string) string { return "bench-" + id }

// appTasks are the families the apps and density scenarios may run.
func appTasks(tasks configs.Tasks, densityTask string) []string {
	var ids []string
	for _, p := range pickApps(tasks) {
		if p.task != "" {
			ids = append(ids, p.task)
		}
	}
	if densityTask != "" && tasks[densityTask] != nil && !slices.Contains(ids, densityTask) {
		ids = append(ids, densityTask)
	}
	return ids
}

// writeAppCopies writes appCopy of each family into dir.
func writeAppCopies(dir string, tasks configs.Tasks, ids []string) error {
	for _, id := range ids {
		t := *tasks[id]
		t.ID = appCopy(id)
		t.MaxSteps = 1 << 30
		if err := writeTask(dir, &t); err != nil {
			return err
		}
	}
	return nil
}

// writeTask writes one task file into dir.
func writeTask(dir string, t *configs.Task) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return fmt.Errorf("task %s: %w", t.ID, err)
	}
	return os.WriteFile(filepath.Join(dir, t.ID+".json"), b, 0o644)
}

const (
	appWord   = "hello"
	slowSleep = 2 * time.Second // the fixed wait of the OSWorld way
)

func (b *runner) apps(ctx context.Context) (*Apps, error) {
	out := &Apps{Resets: b.sz.appResets, Steps: b.sz.appSteps, Slow: b.sz.appSlow, Execs: b.sz.appExecs,
		Method: "per app a fresh server (shipped config, pool 1) and one env of bench's copy of the family (the family with an unbounded step budget; its golden is built the same way); latency is the client's wall time from this process; CPU is bench's process tree (client, in-process server, every sandbox) from /proc, sampled every 100 ms; memory is the env's sandbox tree from smaps_rollup"}
	for _, p := range pickApps(b.tasks) {
		row := AppRow{App: p.kind.App, Task: p.task, Click: p.kind.Click, Word: appWord}
		if len(b.opts.Apps) > 0 && !contains(b.opts.Apps, p.kind.App) {
			continue
		}
		if p.skip != "" {
			row.Skipped = p.skip
			out.Rows = append(out.Rows, row)
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b.opts.Logf("bench: apps: %s (%s) ...", p.kind.App, p.task)
		t0 := time.Now()
		if err := b.measureApp(ctx, p, &row); err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			row.Error = err.Error()
			b.opts.Logf("bench: apps: %s failed: %v", p.kind.App, err)
		}
		row.Seconds = time.Since(t0).Seconds()
		b.opts.Logf("bench: apps: %s done in %.0fs", p.kind.App, row.Seconds)
		out.Rows = append(out.Rows, row)
	}
	return out, nil
}

// measureApp fills row for one app on a server of its own.
func (b *runner) measureApp(ctx context.Context, p appPick, row *AppRow) error {
	task := b.tasks[p.task]
	id := appCopy(p.task)
	seed := func(i int) *int64 {
		if !task.Parameterized() {
			return nil
		}
		s := int64(i)
		return &s
	}

	cpu := StartCPUSampler(os.Getpid(), 100*time.Millisecond)
	srv, err := b.startServer(ctx, 1, nil)
	row.BootCPU = cpu.Stop()
	if err != nil {
		return err
	}
	defer srv.close()
	c := srv.c

	// The golden: the family's first reset on this server.
	cpu = StartCPUSampler(os.Getpid(), 100*time.Millisecond)
	t0 := time.Now()
	rr, err := reset(ctx, c, &api.ResetRequest{Envs: []api.ResetEnv{{Task: id, Seed: seed(0)}}})
	row.GoldenMS = ms(time.Since(t0))
	row.GoldenCPU = cpu.Stop()
	if err != nil {
		return fmt.Errorf("first reset: %w", err)
	}
	env := rr.Results[0].EnvID
	defer func() { c.Close(context.WithoutCancel(ctx), env) }()
	if in := rr.Results[0].Info; in != nil {
		row.GoldenLeaseMS = float64(in.Timings["lease_us"]) / 1000
		row.GoldenInstanceMS = float64(in.Timings["instance_us"]) / 1000
	}

	click := aci.Action{Verb: aci.Click, Target: aci.Px(float64(p.kind.Click[0]), float64(p.kind.Click[1]))}
	typ := aci.Action{Verb: aci.TypeText, Text: appWord}

	// Settled steps, click and type alternating.
	var clickDs, typeDs []time.Duration
	for i := 0; i < 2*b.sz.appSteps; i++ {
		st, ds := &row.ClickStep, &clickDs
		a := click
		if i%2 == 1 {
			st, ds, a = &row.TypeStep, &typeDs, typ
		}
		t0 := time.Now()
		res, err := step1(ctx, c, env, a, &api.Observe{Format: aci.FormatPNG})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			st.Errors++
			b.opts.Logf("bench: apps: %s step: %v", p.kind.App, err)
			continue
		}
		*ds = append(*ds, time.Since(t0))
		st.Settle.Add(res.Info.Settle)
	}
	row.ClickStep.Dist, row.TypeStep.Dist = Summarize(clickDs), Summarize(typeDs)
	if row.ClickStep.Errors+row.TypeStep.Errors > b.sz.appSteps {
		return fmt.Errorf("%d of %d settled steps failed", row.ClickStep.Errors+row.TypeStep.Errors, 2*b.sz.appSteps)
	}

	// Memory of the desktop in use.
	if mems := srv.envMemory([]string{env}); len(mems) > 0 {
		row.PSSMiB, row.RSSMiB, row.Procs = float64(mems[0].PSS)/(1<<20), float64(mems[0].RSS)/(1<<20), mems[0].Procs
	}

	// The OSWorld way: the action, a fixed sleep, a screenshot.
	noSettle := &api.Observe{Format: aci.FormatPNG, Settle: &aci.Settle{}}
	shot := aci.Action{Verb: aci.Screenshot}
	var slow [2][3][]time.Duration
	for i := 0; i < 2*b.sz.appSlow; i++ {
		k, a := i%2, click
		st := &row.SlowClick
		if k == 1 {
			a, st = typ, &row.SlowType
		}
		t0 := time.Now()
		if _, err := step1(ctx, c, env, a, noSettle); err != nil {
			st.Errors++
			continue
		}
		t1 := time.Now()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(slowSleep):
		}
		t2 := time.Now()
		if _, err := step1(ctx, c, env, shot, noSettle); err != nil {
			st.Errors++
			continue
		}
		t3 := time.Now()
		slow[k][0], slow[k][1], slow[k][2] = append(slow[k][0], t1.Sub(t0)), append(slow[k][1], t3.Sub(t2)), append(slow[k][2], t3.Sub(t0))
	}
	for k, st := range []*SlowStats{&row.SlowClick, &row.SlowType} {
		st.Action, st.Shot, st.Total = Summarize(slow[k][0]), Summarize(slow[k][1]), Summarize(slow[k][2])
	}

	// xdotool then scrot inside the sandbox, through the guest's exec.
	if err := b.execRounds(ctx, srv, env, p.kind.Click, row); err != nil {
		return err
	}
	if p.kind.App == "xterm" {
		if d, err := b.hostBaseline(ctx, p.kind.Click); err != nil {
			b.opts.Logf("bench: apps: host baseline: %v", err)
		} else {
			row.HostBaseline = d
		}
	}

	// Resets of the same env, each once an idle replica is there.
	var rs, inst []time.Duration
	cpu = StartCPUSampler(os.Getpid(), 100*time.Millisecond)
	for i := 0; i < b.sz.appResets; i++ {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		_ = srv.st.Pool.WaitReplicas(wctx, id, 1)
		cancel()
		t0 := time.Now()
		rr, err := reset(ctx, c, &api.ResetRequest{Envs: []api.ResetEnv{{EnvID: env, Task: id, Seed: seed(i + 1)}}})
		if err != nil {
			if ctx.Err() != nil {
				cpu.Stop()
				return ctx.Err()
			}
			row.ResetErrors++
			b.opts.Logf("bench: apps: %s reset: %v", p.kind.App, err)
			continue
		}
		rs = append(rs, time.Since(t0))
		if in := rr.Results[0].Info; in != nil {
			inst = append(inst, time.Duration(in.Timings["instance_us"])*time.Microsecond)
		}
	}
	// The last reset's release is reset in place too: wait for it, so
	// that every reset's CPU is in.
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	_ = srv.st.Pool.WaitReplicas(wctx, id, 1)
	cancel()
	if n := len(rs); n > 0 {
		row.ResetCPU = cpu.Stop() / float64(n)
	} else {
		cpu.Stop()
	}
	row.Reset, row.ResetInstance = Summarize(rs), Summarize(inst)
	return nil
}

// execRounds runs xdotool then scrot inside env's sandbox, click and type
// alternating, appExecs rounds each.
func (b *runner) execRounds(ctx context.Context, srv *server, env string, at [2]int, row *AppRow) error {
	g, ok := srv.st.Server.EnvGuest(env)
	if !ok {
		return errors.New("no guest connection for the env")
	}
	run := func(argv ...string) (time.Duration, error) {
		t0 := time.Now()
		xr, err := g.Exec(ctx, wire.ExecArgs{Argv: argv, TimeoutMS: 20000})
		d := time.Since(t0)
		if err != nil {
			return 0, err
		}
		if xr.ExitCode == nil || *xr.ExitCode != 0 {
			return 0, fmt.Errorf("%s: exit %s: %s", argv[0], exitOf(xr.ExitCode), strings.TrimSpace(string(xr.Stderr)))
		}
		return d, nil
	}
	var ds [2][3][]time.Duration
	for i := 0; i < 2*b.sz.appExecs; i++ {
		k := i % 2
		st := &row.XdoClick
		act := []string{"xdotool", "mousemove", strconv.Itoa(at[0]), strconv.Itoa(at[1]), "click", "1"}
		if k == 1 {
			st, act = &row.XdoType, []string{"xdotool", "type", appWord}
		}
		da, err := run(act...)
		if err != nil {
			st.Errors++
			b.opts.Logf("bench: apps: %s: %v", row.App, err)
			continue
		}
		dsh, err := run("scrot", "-o", "/tmp/bench-shot.png")
		if err != nil {
			st.Errors++
			b.opts.Logf("bench: apps: %s: %v", row.App, err)
			continue
		}
		ds[k][0], ds[k][1], ds[k][2] = append(ds[k][0], da), append(ds[k][1], dsh), append(ds[k][2], da+dsh)
	}
	for k, st := range []*ExecStats{&row.XdoClick, &row.XdoType} {
		st.Act, st.Shot, st.Total = Summarize(ds[k][0]), Summarize(ds[k][1]), Summarize(ds[k][2])
	}
	if row.XdoClick.Errors+row.XdoType.Errors == 2*b.sz.appExecs && b.sz.appExecs > 0 {
		row.Error = "xdotool/scrot inside the sandbox failed every round (see the log)"
	}
	return nil
}

// hostBaseline runs the baseline harness (its own Xvfb, openbox and xterm
// on the host) for appExecs click steps.
func (b *runner) hostBaseline(ctx context.Context, at [2]int) (*Dist, error) {
	bl, err := StartBaseline(ctx)
	if err != nil {
		return nil, err
	}
	defer bl.Close()
	var ds []time.Duration
	for i := 0; i < b.sz.appExecs; i++ {
		t0 := time.Now()
		if _, err := bl.Step(ctx, at[0], at[1]); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
	}
	d := Summarize(ds)
	return &d, nil
}

// step1 steps one env with one action and fails on any error in its slot.
func step1(ctx context.Context, c *client.Client, env string, a aci.Action, obs *api.Observe) (*api.Result, error) {
	rep, err := c.Step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &a}}, Observe: obs})
	if err != nil {
		return nil, err
	}
	if err := client.FirstError(rep, 1); err != nil {
		return nil, err
	}
	res := &rep.Results[0]
	if res.Info == nil {
		return nil, errors.New("step reply without info")
	}
	if res.Info.Error != nil {
		return nil, res.Info.Error
	}
	return res, nil
}

func exitOf(c *int) string {
	if c == nil {
		return "none (killed)"
	}
	return strconv.Itoa(*c)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// appsTable renders the scenario for a terminal.
func appsTable(a *Apps) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Real applications (%d resets, %d settled steps per action, %d OSWorld-way and %d xdotool+scrot rounds per action):\n",
		a.Resets, a.Steps, a.Slow, a.Execs)
	sb.WriteString(appsMarkdownTables(a))
	return sb.String()
}

// appsMarkdownTables renders the scenario's tables (Markdown, also
// readable on a terminal).
func appsMarkdownTables(a *Apps) string {
	var sb strings.Builder
	sb.WriteString("| app | task | golden build ms (lease / instance) | golden CPU s | boot CPU s | reset in place p50 / p95 ms (instance p50) | reset CPU s | PSS MiB (RSS, procs) |\n|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range a.Rows {
		if r.Skipped != "" || (r.Error != "" && r.GoldenMS == 0) {
			fmt.Fprintf(&sb, "| %s | %s | %s | | | | | |\n", r.App, dash(r.Task), cellNote(r))
			continue
		}
		fmt.Fprintf(&sb, "| %s | %s | %.0f (%.0f / %.0f) | %.2f | %.2f | %.0f / %.0f (%.0f) | %.2f | %.1f (%.0f, %d) |\n",
			r.App, r.Task, r.GoldenMS, r.GoldenLeaseMS, r.GoldenInstanceMS, r.GoldenCPU, r.BootCPU,
			r.Reset.P50, r.Reset.P95, r.ResetInstance.P50, r.ResetCPU, r.PSSMiB, r.RSSMiB, r.Procs)
	}
	sb.WriteString("\n| app | action | settled step p50 / p95 ms | settle outcome | OSWorld way: action / screenshot p50 ms, round p50 ms | xdotool + scrot in the sandbox p50 ms (xdotool / scrot) | errors |\n|---|---|---:|---|---:|---:|---:|\n")
	for _, r := range a.Rows {
		if r.Skipped != "" || r.ClickStep.Dist.N+r.TypeStep.Dist.N == 0 {
			continue
		}
		for _, v := range []struct {
			name string
			st   StepStats
			sl   SlowStats
			x    ExecStats
		}{{"click", r.ClickStep, r.SlowClick, r.XdoClick}, {"type " + r.Word, r.TypeStep, r.SlowType, r.XdoType}} {
			fmt.Fprintf(&sb, "| %s | %s | %.0f / %.0f | %s | %.0f / %.0f, %.0f | %.0f (%.0f / %.0f) | %d |\n", r.App, v.name,
				v.st.Dist.P50, v.st.Dist.P95, v.st.Settle, v.sl.Action.P50, v.sl.Shot.P50, v.sl.Total.P50,
				v.x.Total.P50, v.x.Act.P50, v.x.Shot.P50, v.st.Errors+v.sl.Errors+v.x.Errors)
		}
	}
	for _, r := range a.Rows {
		if r.HostBaseline != nil {
			fmt.Fprintf(&sb, "\nBaseline harness on the host (plain Xvfb, openbox, an xterm redrawing a counter; xdotool click + scrot): p50 %.0f ms, p95 %.0f ms over %d steps.\n",
				r.HostBaseline.P50, r.HostBaseline.P95, r.HostBaseline.N)
		}
	}
	for _, r := range a.Rows {
		if r.Error != "" && r.GoldenMS != 0 {
			fmt.Fprintf(&sb, "\n%s: %s\n", r.App, r.Error)
		}
	}
	return sb.String()
}

func cellNote(r AppRow) string {
	if r.Skipped != "" {
		return "skipped: " + r.Skipped
	}
	return "failed: " + strings.ReplaceAll(r.Error, "|", "/")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// appsMarkdown is the scenario's section of report.md.
func appsMarkdown(a *Apps) string {
	var sb strings.Builder
	sb.WriteString("## Real applications\n\n")
	fmt.Fprintf(&sb, "How: %s. %d resets, %d settled steps per action kind (click and typing %q alternating), %d OSWorld-way rounds and %d xdotool+scrot rounds per action kind.\n\n",
		a.Method, a.Resets, a.Steps, appWord, a.Slow, a.Execs)
	sb.WriteString(appsMarkdownTables(a))
	sb.WriteString("\n*golden build*: the family's first reset on a fresh server (lease = setup on a warm sandbox and its checkpoint, instance = the seeded instance's own steps, from info.timings). " +
		"*boot CPU*: CPU-seconds while the server with a pool of one starts (one bare desktop: Xvfb, openbox, buses, guestd). " +
		"*reset in place*: POST /v1/reset of the same env, each once the pool holds an idle replica; *reset CPU* is the tree's CPU per reset, including the in-place reset of the released sandbox. " +
		"*PSS*: the env's sandbox tree after its steps. " +
		"*settled step*: POST /v1/step with the server's default settle, PNG reply. *settle outcome*: info.settle (idle = the desktop went idle first; damaged = quiet_ms without damage after a change; quiet = first_ms passed with no change; timed out = the ceiling). " +
		"*OSWorld way*: the action (settle off), a fixed 2 s sleep, a screenshot step (settle off), all through the API. " +
		"*xdotool + scrot*: `xdotool mousemove X Y click 1` or `xdotool type WORD`, then `scrot -o`, each a guest exec inside the sandbox.\n\n")
	for _, n := range a.Notes {
		fmt.Fprintf(&sb, "- %s\n", n)
	}
	return sb.String()
}
