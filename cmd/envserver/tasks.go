package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver"
	"github.com/shinken-rl/shinken/envserver/stack"
	"github.com/shinken-rl/shinken/internal/atomicfile"
)

// tasksMain is `envserver tasks check|count|import-osworld`: the task
// checker (docs/tasks.md, "The task checker") on real sandboxes, a count
// of each family's distinct instances, and the OSWorld importer
// (docs/osworld.md).
func tasksMain(args []string) int {
	if len(args) > 0 && args[0] == "import-osworld" {
		return importOSWorldMain(args[1:])
	}
	if len(args) == 0 || (args[0] != "check" && args[0] != "count") {
		fmt.Fprintln(os.Stderr, "usage: envserver tasks check [--family F]... [--seeds N] [--pool P] [--provider process|docker] [--tasks DIR]\n       envserver tasks count [--seeds N] [--tasks DIR]\n       envserver tasks import-osworld EXAMPLES_DIR --out DIR [--cache DIR] [--only test_all.json] [--json]")
		return 2
	}
	fs := flag.NewFlagSet("tasks "+args[0], flag.ExitOnError)
	var families multiFlag
	fs.Var(&families, "family", "family to check (repeat; default every family)")
	seeds := fs.Int("seeds", 3, "check: train seeds 0..N-1 of each family; count: seeds drawn")
	poolN := fs.Int("pool", 4, "warm sandboxes")
	parallel := fs.Int("parallel", 0, "episodes at once, over up to parallel/2 families at a time (default: the pool size)")
	hostile := fs.Int("hostile", 0, "hostile kinds planted per output (0: all)")
	provider := fs.String("provider", "process", "sandbox provider: process or docker")
	tasks := fs.String("tasks", "", "task directory (default: the shipped suite)")
	guestd := fs.String("guestd", "", "guestd binary (default: next to envserver, else PATH)")
	jsonOut := fs.String("json", "", "also write the results here as JSON")
	record := fs.Bool("record", false, "write the families that pass into the task directory's check record (needs --tasks)")
	_ = fs.Parse(args[1:])

	if args[0] == "count" {
		return countMain(*tasks, *seeds)
	}
	if *record && *tasks == "" {
		log.Fatalf("envserver tasks check: --record needs --tasks DIR (the record is written beside the task files)")
	}
	cfg, err := configs.LoadServer("")
	if err != nil {
		log.Fatalf("envserver tasks: %v", err)
	}
	state, err := os.MkdirTemp("", "shinken-check-")
	if err != nil {
		log.Fatalf("envserver tasks: %v", err)
	}
	defer os.RemoveAll(state)
	cfg.Pool, cfg.Provider, cfg.Tasks, cfg.State, cfg.Listen = *poolN, *provider, *tasks, state, "127.0.0.1:0"
	cfg.AllowUnchecked = true // what is being checked is served
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := stack.Open(ctx, cfg, stack.Options{GuestdPath: *guestd, Logf: func(string, ...any) {}})
	if err != nil {
		log.Fatalf("envserver tasks: %v", err)
	}
	defer st.Close(context.Background())
	if *parallel <= 0 {
		*parallel = max(1, *poolN)
	}
	t0 := time.Now()
	checks, err := st.Server.CheckTasks(ctx, envserver.CheckOptions{Families: families, Seeds: *seeds,
		Hostile: *hostile, Parallel: *parallel, Logf: log.Printf})
	if err != nil {
		log.Printf("envserver tasks check: %v", err)
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "family\tversion\tseeds\tepisodes\tseconds\tresult")
	failed := 0
	for _, c := range checks {
		res := "ok"
		if !c.OK() {
			failed++
			res = fmt.Sprintf("FAILED (%d)", len(c.Failures))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.1f\t%s\n", c.Family, c.Version, c.Seeds, c.Episodes, c.Seconds, res)
	}
	tw.Flush()
	for _, c := range checks {
		for _, f := range c.Failures {
			fmt.Printf("%s: %s\n", c.Family, f)
		}
	}
	fmt.Printf("%d families, %d failed, %.0f s\n", len(checks), failed, time.Since(t0).Seconds())
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(checks, "", "  ")
		if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
			log.Printf("envserver tasks check: %v", err)
		}
	}
	if *record {
		if err := writeRecord(*tasks, checks); err != nil {
			log.Printf("envserver tasks check: %v", err)
			return 1
		}
	}
	if failed > 0 || err != nil {
		return 1
	}
	return 0
}

// writeRecord adds the families that passed to dir's check record (a
// family checked with fewer seeds than recorded keeps the larger count
// only when its definition is unchanged) and drops those that failed.
func writeRecord(dir string, checks []*envserver.TaskCheck) error {
	rec, err := configs.LoadChecks(dir)
	if err != nil {
		return err
	}
	for _, c := range checks {
		if !c.OK() {
			delete(rec, c.Family)
			continue
		}
		seeds := c.Seeds
		if old, ok := rec[c.Family]; ok && old.Def == c.Def {
			seeds = max(seeds, old.Seeds)
		}
		rec[c.Family] = configs.Checked{Version: c.Version, Def: c.Def, Seeds: seeds}
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, configs.CheckFile), append(b, '\n'), 0o644)
}

// countMain prints each family's distinct instances among train seeds
// 0..n-1, counted by instance hash.
func countMain(dir string, n int) int {
	ts, err := configs.LoadTasks(dir)
	if err != nil {
		log.Fatalf("envserver tasks count: %v", err)
	}
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "family\tapps\tdistinct\tof seeds")
	for _, id := range ts.IDs() {
		d, err := ts[id].Distinct(n)
		if err != nil {
			log.Fatalf("envserver tasks count: %v", err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", id, strings.Join(ts[id].Apps, ","), d, n)
	}
	tw.Flush()
	return 0
}

// importOSWorldMain is `envserver tasks import-osworld EXAMPLES_DIR`: it
// converts OSWorld's tasks into fixed-instance tasks under --out and
// prints the report (docs/osworld.md).
func importOSWorldMain(args []string) int {
	fs := flag.NewFlagSet("tasks import-osworld", flag.ExitOnError)
	cache := fs.String("cache", "", "directory of the files OSWorld downloads (docs/osworld.md, \"The cache\")")
	out := fs.String("out", "", "task directory to write the imported tasks to (default: none, a dry run)")
	only := fs.String("only", "", "read only the tasks this list names (OSWorld's test_all.json)")
	jsonOut := fs.Bool("json", false, "print the report as one JSON object")
	// The examples directory may come before the flags.
	var dir string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		dir, args = args[0], args[1:]
	}
	_ = fs.Parse(args)
	if dir == "" && fs.NArg() == 1 {
		dir = fs.Arg(0)
	} else if dir == "" || fs.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: envserver tasks import-osworld EXAMPLES_DIR --out DIR [--cache DIR] [--only test_all.json] [--json]")
		return 2
	}
	opt := configs.OSWorldOptions{Examples: dir, Cache: *cache, Out: *out}
	if *only != "" {
		m, err := configs.LoadOSWorldList(*only)
		if err != nil {
			log.Printf("envserver tasks import-osworld: %v", err)
			return 1
		}
		opt.Only = m
	}
	rep, err := configs.ImportOSWorld(opt)
	if err != nil {
		log.Printf("envserver tasks import-osworld: %v", err)
		return 1
	}
	if *jsonOut {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Println(string(b))
	} else {
		rep.WriteText(os.Stdout)
	}
	return 0
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
