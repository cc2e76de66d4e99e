package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Output file names inside the report directory.
const (
	JSONFile     = "report.json"
	MarkdownFile = "report.md"
)

// WriteReport writes the JSON report, the Markdown report and every chart
// into dir (created if needed) and returns the paths written.
func WriteReport(r *Report, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report dir: %w", err)
	}
	var files []string
	write := func(name, content string) error {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		files = append(files, p)
		return nil
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode report: %w", err)
	}
	if err := write(JSONFile, string(js)+"\n"); err != nil {
		return files, err
	}
	charts := Charts(r)
	for _, ch := range charts {
		if err := write(ch.File, ch.SVG); err != nil {
			return files, err
		}
	}
	if err := write(MarkdownFile, Markdown(r, charts)); err != nil {
		return files, err
	}
	return files, nil
}

// ChartFile is one rendered chart.
type ChartFile struct {
	File, Title, SVG string
}

// Charts renders the report's charts: throughput and episodes vs pool
// size, step latency per mode, fork latency and dedup bytes.
func Charts(r *Report) []ChartFile {
	var out []ChartFile
	add := func(file string, c *Chart, bars bool) {
		svg := c.LineSVG()
		if bars {
			svg = c.BarSVG()
		}
		out = append(out, ChartFile{File: file, Title: c.Title, SVG: svg})
	}
	if t := r.Throughput; t != nil && len(t.Points) > 0 {
		pools, byPolicy := throughputGrid(t)
		cats := make([]string, len(pools))
		for i, p := range pools {
			cats[i] = strconv.Itoa(p)
		}
		steps := &Chart{Title: "Rollout throughput vs pool size", XLabel: "pool size (concurrent envs)", YLabel: "env steps / s",
			Categories: cats, Note: "steps finished in the measurement window / its length; one worker per env, task " + r.Server.Task}
		eps := &Chart{Title: "Episodes per minute vs pool size", XLabel: "pool size (concurrent envs)", YLabel: "episodes / min",
			Categories: cats, Note: "episodes ending (terminated or truncated) in the window, per minute"}
		for _, pol := range []string{"random", "scripted"} {
			row := byPolicy[pol]
			if row == nil {
				continue
			}
			s, e := Series{Name: pol}, Series{Name: pol}
			for _, p := range pools {
				if pt, ok := row[p]; ok {
					s.Y, e.Y = append(s.Y, pt.StepsPerSec), append(e.Y, pt.EpisodesPerMin)
				} else {
					s.Y, e.Y = append(s.Y, math.NaN()), append(e.Y, math.NaN())
				}
			}
			steps.Series, eps.Series = append(steps.Series, s), append(eps.Series, e)
		}
		add("throughput.svg", steps, false)
		add("episodes.svg", eps, false)
	}
	if l := r.Latency; l != nil {
		c := &Chart{Title: "Step latency (click + observe, 1280x800)", XLabel: "mode", YLabel: "ms per step",
			Note: "client wall time per step; baseline = xdotool + scrot subprocesses on Xvfb, same run, interleaved"}
		p50, p95, p99 := Series{Name: "p50"}, Series{Name: "p95"}, Series{Name: "p99"}
		for _, m := range append([]ModeLatency{l.Baseline}, l.Modes...) {
			c.Categories = append(c.Categories, m.Mode)
			p50.Y, p95.Y, p99.Y = append(p50.Y, m.Dist.P50), append(p95.Y, m.Dist.P95), append(p99.Y, m.Dist.P99)
		}
		c.Series = []Series{p50, p95, p99}
		add("latency.svg", c, true)
	}
	if lc := r.Lifecycle; lc != nil && len(lc.Forks) > 0 {
		c := &Chart{Title: "Fork latency vs n", XLabel: "replicas forked (n)", YLabel: "ms per POST /v1/fork",
			Note: "client wall time of POST /v1/fork until every child's first observation is back"}
		s := Series{Name: "p50"}
		for _, f := range lc.Forks {
			c.Categories = append(c.Categories, strconv.Itoa(f.N))
			s.Y = append(s.Y, nanIfZero(f.Dist.N, f.Dist.P50))
		}
		c.Series = []Series{s}
		add("fork.svg", c, false)
	}
	if d := r.Dedup; d != nil && len(d.Rows) > 0 {
		c := &Chart{Title: fmt.Sprintf("Bytes on the wire per env-step, %d forked replicas", d.Replicas), XLabel: "client mode",
			YLabel: "KiB per env-step", Note: "TCP bytes both ways incl. headers / (steps x replicas); shared frame cache off vs on"}
		byCache := map[string]map[string]float64{}
		var modes []string
		for _, row := range d.Rows {
			if byCache[row.Cache] == nil {
				byCache[row.Cache] = map[string]float64{}
			}
			if !contains(modes, row.Mode) {
				modes = append(modes, row.Mode)
			}
			byCache[row.Cache][row.Mode] = row.WireBytes / 1024
		}
		c.Categories = modes
		for _, cache := range []string{"off", "on"} {
			if byCache[cache] == nil {
				continue
			}
			s := Series{Name: "shared cache " + cache}
			for _, m := range modes {
				v, ok := byCache[cache][m]
				if !ok {
					v = math.NaN()
				}
				s.Y = append(s.Y, v)
			}
			c.Series = append(c.Series, s)
		}
		add("dedup.svg", c, true)
	}
	return out
}

func nanIfZero(n int, v float64) float64 {
	if n == 0 {
		return math.NaN()
	}
	return v
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

// throughputGrid indexes throughput points by policy and pool size.
func throughputGrid(t *Throughput) (pools []int, byPolicy map[string]map[int]ThroughputPoint) {
	byPolicy = map[string]map[int]ThroughputPoint{}
	for _, p := range t.Points {
		if byPolicy[p.Policy] == nil {
			byPolicy[p.Policy] = map[int]ThroughputPoint{}
		}
		byPolicy[p.Policy][p.Pool] = p
		if len(pools) == 0 || pools[len(pools)-1] != p.Pool {
			pools = append(pools, p.Pool)
		}
	}
	return pools, byPolicy
}

// Table renders the report for a terminal.
func Table(r *Report) string {
	var sb strings.Builder
	tw := tabwriter.NewWriter(&sb, 2, 4, 2, ' ', 0)
	m := r.Machine
	fmt.Fprintf(&sb, "Shinken bench (%s) on %s: %d CPUs, %.1f GiB, load %.2f at start, %s; %.0fs\n\n",
		runKind(r), m.Hostname, m.CPUs, float64(m.MemBytes)/(1<<30), m.Load1, r.Server.Provider, r.Seconds)
	if l := r.Latency; l != nil {
		fmt.Fprintf(&sb, "Step latency, click+observe at 1280x800, %d steps per mode (ms):\n", l.Steps)
		fmt.Fprintln(tw, "mode\tp50\tp95\tp99\tmean\tfresh\tbytes/step\tspeedup p50\tspeedup p95\t")
		for _, md := range append([]ModeLatency{l.Baseline}, l.Modes...) {
			sp50, sp95 := "1 (baseline)", ""
			if md.Mode != "baseline" {
				sp50, sp95 = fmt.Sprintf("%.1fx", md.SpeedupP50), fmt.Sprintf("%.1fx", md.SpeedupP95)
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.0f%%\t%s\t%s\t%s\t\n", md.Mode, md.Dist.P50, md.Dist.P95, md.Dist.P99, md.Dist.Mean,
				100*md.FreshFrac, humanBytes(md.WireBytes), sp50, sp95)
		}
		tw.Flush()
		sb.WriteString("\n")
	}
	if t := r.Throughput; t != nil {
		sb.WriteString("Rollout throughput:\n")
		fmt.Fprintln(tw, "policy\tpool\tsteps/s\tepisodes/min\tstep p50 ms\treset p50 ms\treset p95 ms\tCPU s/step (tree)\tCPU s/step (host)\tmean reward\terrors\t")
		for _, p := range t.Points {
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.0f\t%.0f\t%.3f\t%.3f\t%.2f\t%d\t\n", p.Policy, p.Pool, p.StepsPerSec, p.EpisodesPerMin,
				p.StepP50, p.ResetP50, p.ResetP95, p.CPUPerStep, p.HostCPUPerStep, p.MeanReward, p.Errors)
		}
		tw.Flush()
		for _, p := range t.Points {
			fmt.Fprintf(&sb, "  %s pool %d: CPU ms/step by process: %s; phases ms/step: %s\n", p.Policy, p.Pool, fmtMS(p.CPUByProcess), fmtMS(p.PhaseMS))
		}
		fmt.Fprintf(&sb, "stops scaling after pool %d", t.Knee)
		if t.Stopped != "" {
			fmt.Fprintf(&sb, " (%s)", t.Stopped)
		}
		sb.WriteString("\n\n")
	}
	if lc := r.Lifecycle; lc != nil {
		fmt.Fprintf(&sb, "Lifecycle (pool %d, booted in %.1fs):\n", lc.Pool, lc.BootSeconds)
		fmt.Fprintln(tw, "what\tn\tp50 ms\tp95 ms\tmax ms\t")
		fmt.Fprintf(tw, "reset cold\t%d\t%.0f\t%.0f\t%.0f\t\n", lc.ResetCold.Dist.N, lc.ResetCold.Dist.P50, lc.ResetCold.Dist.P95, lc.ResetCold.Dist.Max)
		fmt.Fprintf(tw, "reset warm\t%d\t%.0f\t%.0f\t%.0f\t\n", lc.ResetWarm.Dist.N, lc.ResetWarm.Dist.P50, lc.ResetWarm.Dist.P95, lc.ResetWarm.Dist.Max)
		for _, f := range lc.Forks {
			fmt.Fprintf(tw, "fork n=%d\t%d\t%.0f\t%.0f\t%.0f\t\n", f.N, f.Dist.N, f.Dist.P50, f.Dist.P95, f.Dist.Max)
		}
		tw.Flush()
		fmt.Fprintf(&sb, "warm reset is %.1fx faster than cold (p50)\n", lc.WarmSpeedup)
		for _, sp := range lc.Seeded {
			fmt.Fprintf(&sb, "seeded reset of %s: p50 %.0f ms, p95 %.0f ms (instance setup p50 %.0f ms) vs fixed %.0f / %.0f ms: %.2fx at p50, %.2fx at p95\n",
				sp.Task, sp.Seeded.P50, sp.Seeded.P95, sp.InstanceMS.P50, sp.Fixed.P50, sp.Fixed.P95, sp.Ratio, sp.RatioP95)
		}
		fmt.Fprintf(&sb, "memory per sandbox: idle %.1f MiB PSS (%.1f RSS, %d measured), leased %.1f MiB PSS (%.1f RSS, %d measured)\n\n",
			lc.Memory.Idle.PSSMiB, lc.Memory.Idle.RSSMiB, lc.Memory.Idle.Sandboxes, lc.Memory.Leased.PSSMiB, lc.Memory.Leased.RSSMiB, lc.Memory.Leased.Sandboxes)
	}
	if d := r.Dedup; d != nil {
		fmt.Fprintf(&sb, "Dedup, %d forked replicas in lockstep, %d steps per row (per env-step):\n", d.Replicas, d.Steps)
		fmt.Fprintln(tw, "shared cache\tclient\twire\timage bytes\tencodes\tdistinct frames\tsaving\t")
		for _, row := range d.Rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.2f\t%.1f\t%.1fx\t\n", row.Cache, row.Mode, humanBytes(row.WireBytes), humanBytes(row.ImageBytes),
				row.Encodes, row.Distinct, row.Saving)
		}
		tw.Flush()
		sb.WriteString("\n")
	}
	if c := r.StepCost; c != nil {
		fmt.Fprintf(&sb, "Step cost, one env typing into xterm, %d changed steps per format (server-tree CPU ms per step):\n", c.Steps)
		fmt.Fprintln(tw, "server\tformat\tCPU ms/step\tstep p50 ms\tframe bytes\tby process\tphases (wall ms)\t")
		for _, run := range c.Runs {
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t\n", run.Server, run.Format, run.CPUPerStepMS, run.StepP50, humanBytes(run.FrameBytes),
				fmtMS(run.ByProcess), fmtMS(run.Phases))
		}
		tw.Flush()
		sb.WriteString("\n")
	}
	if a := r.Apps; a != nil {
		sb.WriteString(appsTable(a))
		sb.WriteString("\n")
	}
	if d := r.Density; d != nil {
		sb.WriteString("Density: ")
		sb.WriteString(densityTables(d))
		sb.WriteString("\n")
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&sb, "FAILED %s\n", e)
	}
	return sb.String()
}

func runKind(r *Report) string {
	if r.Quick {
		return "quick"
	}
	return "full"
}

func humanBytes(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}

// Markdown renders the report with every figure's method and the charts.
func Markdown(r *Report, charts []ChartFile) string {
	var sb strings.Builder
	m := r.Machine
	fmt.Fprintf(&sb, "# Shinken benchmark report (%s run)\n\n", runKind(r))
	fmt.Fprintf(&sb, "Taken %s on `%s`: %s/%s, %d CPUs (%s), %.1f GiB, kernel %s, load %.2f at start, %s. Run took %.0f s.\n\n",
		r.StartedAt.Format("2006-01-02 15:04 UTC"), m.Hostname, m.OS, m.Arch, m.CPUs, m.CPUModel, float64(m.MemBytes)/(1<<30), m.Kernel, m.Load1, m.Go, r.Seconds)
	fmt.Fprintf(&sb, "Servers: provider `%s` (snapshot %s, confined %v, reset mode %s), screen %s, task `%s`; %s. "+
		"Every ratio below is between figures of this same run.\n\n", r.Server.Provider, r.Server.SnapshotKind, r.Server.Confined, cmp.Or(r.Server.ResetMode, "unreported"), r.Server.Screen, r.Server.Task, r.Server.Config)
	for _, e := range r.Errors {
		fmt.Fprintf(&sb, "> **Failed:** %s\n\n", e)
	}
	if l := r.Latency; l != nil {
		sb.WriteString("## Step latency\n\n")
		fmt.Fprintf(&sb, "How: %s. %d steps per mode.\n\n", l.Method, l.Steps)
		sb.WriteString("| mode | p50 ms | p95 ms | p99 ms | mean ms | fresh frames | bytes/step | speedup p50 | speedup p95 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, md := range append([]ModeLatency{l.Baseline}, l.Modes...) {
			sp50, sp95 := "1 (baseline)", "1 (baseline)"
			if md.Mode != "baseline" {
				sp50, sp95 = fmt.Sprintf("%.1fx", md.SpeedupP50), fmt.Sprintf("%.1fx", md.SpeedupP95)
			}
			fmt.Fprintf(&sb, "| %s | %.1f | %.1f | %.1f | %.1f | %.0f%% | %s | %s | %s |\n", md.Mode, md.Dist.P50, md.Dist.P95, md.Dist.P99,
				md.Dist.Mean, 100*md.FreshFrac, humanBytes(md.WireBytes), sp50, sp95)
		}
		sb.WriteString("\nModes:\n\n")
		for _, md := range append([]ModeLatency{l.Baseline}, l.Modes...) {
			fmt.Fprintf(&sb, "- **%s**: %s.\n", md.Mode, md.Method)
		}
		sb.WriteString("\n*fresh frames*: share of steps whose frame was new in that format (needed a capture and an encode). *bytes/step*: TCP bytes both ways for Shinken; the PNG file for the baseline. *speedup*: baseline latency / mode latency at that percentile.\n\n")
	}
	if t := r.Throughput; t != nil {
		sb.WriteString("## Rollout throughput\n\n")
		fmt.Fprintf(&sb, "How: %s.\n\n", t.Method)
		sb.WriteString("| policy | pool | steps/s | episodes/min | step p50 ms | step p95 ms | reset p50 ms | reset p95 ms | CPU s/step (bench tree) | CPU s/step (host) | mean reward | errors | boot s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, p := range t.Points {
			fmt.Fprintf(&sb, "| %s | %d | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f | %.3f | %.3f | %.2f | %d | %.1f |\n", p.Policy, p.Pool, p.StepsPerSec, p.EpisodesPerMin,
				p.StepP50, p.StepP95, p.ResetP50, p.ResetP95, p.CPUPerStep, p.HostCPUPerStep, p.MeanReward, p.Errors, p.BootSeconds)
		}
		sb.WriteString("\nWhere a step's time and CPU go (CPU ms per step by process; wall ms per step by phase from info.timings, http = client wall time outside them):\n\n| policy | pool | CPU by process | phases |\n|---|---:|---|---|\n")
		for _, p := range t.Points {
			fmt.Fprintf(&sb, "| %s | %d | %s | %s |\n", p.Policy, p.Pool, fmtMS(p.CPUByProcess), fmtMS(p.PhaseMS))
		}
		fmt.Fprintf(&sb, "\n**Where it stops scaling:** total steps/s (random + scripted) last improved by more than 10%% at pool %d.", t.Knee)
		if t.Stopped != "" {
			fmt.Fprintf(&sb, " %s.", t.Stopped)
		}
		sb.WriteString(" *CPU s/step (bench tree)* counts bench, the in-process server and every sandbox; *(host)* is the whole machine's busy time, so it includes other load.\n\n")
	}
	if in := r.Integrity; in != nil {
		sb.WriteString("## Reward integrity under a hostile policy\n\n")
		fmt.Fprintf(&sb, "How: %s.\n\n", in.Method)
		fmt.Fprintf(&sb, "| episodes | solved | unsolved | leaks | retried | lost | wall s |\n|---:|---:|---:|---:|---:|---:|---:|\n| %d | %d | %d | **%d** | %d | %d | %.0f |\n\n",
			in.Episodes, in.Solved, in.Unsolved, in.Leaks, in.Retried, in.Lost, in.WallS)
		fmt.Fprintf(&sb, "Exit reasons: %v. Drops by reason: %v. Leaking seeds: %v. Scored 1 though the script spoils its answer: %v.\n\n", in.ExitReasons, in.DropReasons, in.LeakSeeds, in.Unexplained)
	}
	if lc := r.Lifecycle; lc != nil {
		sb.WriteString("## Reset, fork, memory\n\n")
		fmt.Fprintf(&sb, "How: %s. Boot: %s: %.1f s.\n\n", lc.Method, lc.BootMethod, lc.BootSeconds)
		sb.WriteString("| what | n | p50 ms | p95 ms | max ms | how |\n|---|---:|---:|---:|---:|---|\n")
		fmt.Fprintf(&sb, "| reset cold | %d | %.0f | %.0f | %.0f | %s |\n", lc.ResetCold.Dist.N, lc.ResetCold.Dist.P50, lc.ResetCold.Dist.P95, lc.ResetCold.Dist.Max, lc.ResetCold.Method)
		fmt.Fprintf(&sb, "| reset warm | %d | %.0f | %.0f | %.0f | %s |\n", lc.ResetWarm.Dist.N, lc.ResetWarm.Dist.P50, lc.ResetWarm.Dist.P95, lc.ResetWarm.Dist.Max, lc.ResetWarm.Method)
		for _, f := range lc.Forks {
			errs := ""
			if f.Errors > 0 {
				errs = fmt.Sprintf("; %d failed", f.Errors)
			}
			fmt.Fprintf(&sb, "| fork n=%d | %d | %.0f | %.0f | %.0f | POST /v1/fork of a live env after one step, pool refilled first; %.0f ms per replica (p50)%s |\n",
				f.N, f.Dist.N, f.Dist.P50, f.Dist.P95, f.Dist.Max, f.PerReplica, errs)
		}
		fmt.Fprintf(&sb, "\nWarm reset is **%.1fx** faster than cold at p50.\n\n", lc.WarmSpeedup)
		if len(lc.Seeded) > 0 {
			sb.WriteString("Seeded resets (a new instance each), alternated with the fixed task's warm reset:\n\n| family | n | seeded p50 / p95 ms | instance setup p50 ms | fixed p50 / p95 ms | ratio p50 | ratio p95 |\n|---|---:|---:|---:|---:|---:|---:|\n")
			for _, sp := range lc.Seeded {
				fmt.Fprintf(&sb, "| %s | %d | %.0f / %.0f | %.0f | %.0f / %.0f | %.2fx | %.2fx |\n", sp.Task, sp.Seeded.N, sp.Seeded.P50, sp.Seeded.P95,
					sp.InstanceMS.P50, sp.Fixed.P50, sp.Fixed.P95, sp.Ratio, sp.RatioP95)
			}
			sb.WriteString("\n")
		}
		fmt.Fprintf(&sb, "Memory per sandbox (%s):\n\n| state | sandboxes | PSS MiB | RSS MiB | processes |\n|---|---:|---:|---:|---:|\n", lc.Memory.Method)
		fmt.Fprintf(&sb, "| idle (warm, not leased) | %d | %.1f | %.1f | %.1f |\n", lc.Memory.Idle.Sandboxes, lc.Memory.Idle.PSSMiB, lc.Memory.Idle.RSSMiB, lc.Memory.Idle.Procs)
		fmt.Fprintf(&sb, "| leased (task apps running) | %d | %.1f | %.1f | %.1f |\n\n", lc.Memory.Leased.Sandboxes, lc.Memory.Leased.PSSMiB, lc.Memory.Leased.RSSMiB, lc.Memory.Leased.Procs)
	}
	if d := r.Dedup; d != nil {
		sb.WriteString("## Frame dedup on the wire\n\n")
		fmt.Fprintf(&sb, "How: %s; %d steps per row.\n\n", d.Method, d.Steps)
		sb.WriteString("| shared cache | client | wire bytes / env-step | image bytes / env-step | encodes / env-step | distinct frames / step | wire saving vs first row |\n|---|---|---:|---:|---:|---:|---:|\n")
		for _, row := range d.Rows {
			fmt.Fprintf(&sb, "| %s | %s | %s | %s | %.2f | %.1f | %.1fx |\n", row.Cache, row.Mode, humanBytes(row.WireBytes), humanBytes(row.ImageBytes), row.Encodes, row.Distinct, row.Saving)
		}
		sb.WriteString("\nClients: ")
		seen := map[string]bool{}
		for _, row := range d.Rows {
			if !seen[row.Mode] {
				seen[row.Mode] = true
				fmt.Fprintf(&sb, "**%s**: %s. ", row.Mode, row.Method)
			}
		}
		sb.WriteString("Shared cache off = the server's frame cache bound set to 1 byte, so nothing is cached.\n\n")
	}
	if c := r.StepCost; c != nil {
		sb.WriteString("## Cost of a changed step\n\n")
		fmt.Fprintf(&sb, "How: %s.\n\n", c.Method)
		sb.WriteString("| server | format | CPU ms / step | step p50 ms | frame bytes | CPU ms / step by process | phases, wall ms / step |\n|---|---|---:|---:|---:|---|---|\n")
		for _, run := range c.Runs {
			fmt.Fprintf(&sb, "| %s | %s | %.1f | %.1f | %s | %s | %s |\n", run.Server, run.Format, run.CPUPerStepMS, run.StepP50, humanBytes(run.FrameBytes),
				fmtMS(run.ByProcess), fmtMS(run.Phases))
		}
		sb.WriteString("\n*phases*: act (input, with its settle), observe (settle, capture, encode in guestd, and the server's handling of the frame), settle/capture/encode where the guest reports them, http = the client's wall time outside those (request and reply encoding and transfer).\n\n")
	}
	if a := r.Apps; a != nil {
		sb.WriteString(appsMarkdown(a))
	}
	if d := r.Density; d != nil {
		sb.WriteString(densityMarkdown(d))
	}
	if len(charts) > 0 {
		sb.WriteString("## Charts\n\n")
		for _, c := range charts {
			fmt.Fprintf(&sb, "![%s](%s)\n\n", c.Title, c.File)
		}
	}
	return sb.String()
}
