// Command bench measures Shinken's throughput on this machine and writes a
// report: a table on stdout, report.json, report.md and SVG charts.
//
//	bench --quick --out bench-out     # the CI smoke run, under 2 minutes
//	bench --out bench-out             # the full set
//	bench --scenarios latency,dedup   # some scenarios only
//	bench --scenarios apps            # real applications, per app
//	bench --scenarios density --density-n 48 --density-task shop-buy-cheapest
//
// guestd must sit next to the bench binary (make build puts both in bin/)
// or be passed with --guestd.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/shinken-rl/shinken/bench"
	"github.com/shinken-rl/shinken/pool/process"
)

func main() {
	// A sandbox's init re-executes this binary; it never returns from here.
	process.MaybeRunInit()

	quick := flag.Bool("quick", false, "the small set (pool sizes 1,2,4, few steps): under 2 minutes")
	out := flag.String("out", "bench-out", "directory for report.json, report.md and the charts")
	guestd := flag.String("guestd", "", "guestd binary (default: next to bench, else PATH)")
	task := flag.String("task", "", "task for latency, throughput and forks (default xterm-hello-file)")
	scenarios := flag.String("scenarios", "", "comma-separated subset of: "+strings.Join(bench.Scenarios, ","))
	pools := flag.String("pools", "", "comma-separated pool sizes for the throughput scenario (default 1,2,4,8,16,32; quick 1,2,4)")
	verbose := flag.Bool("v", false, "also print the servers' logs")
	envserver := flag.String("envserver", "", "envserver binary the stepcost scenario runs (default: next to bench, else PATH)")
	baseline := flag.String("baseline-envserver", "", "an older envserver binary (its guestd beside it) the stepcost scenario also measures, in the same run")
	resetMode := flag.String("reset-mode", "", "the servers' reset mode: inplace or reboot (default: the shipped config's); run once per mode to compare")
	episodes := flag.Int("episodes", 0, "episodes the integrity scenario plays (default 1000; quick 24)")
	apps := flag.String("apps", "", "comma-separated rows of the apps scenario (xterm,mousepad,chromium,calc,writer; default all)")
	densityTask := flag.String("density-task", bench.DefaultDensityTask, "task the density scenario holds live episodes of")
	densityN := flag.Int("density-n", bench.DefaultDensityN, "live episodes the density scenario holds at once (its server's pool size too)")
	densityHold := flag.Duration("density-hold", bench.DefaultDensityHold, "how long the density scenario steps its episodes once all are live")
	densityBatch := flag.Int("density-batch", bench.DefaultDensityBatch, "envs per POST /v1/reset of the density scenario's burst (batches go one after the other)")
	flag.Parse()

	opts := bench.Options{Quick: *quick, GuestdPath: *guestd, Task: *task, ResetMode: *resetMode, Logf: log.Printf,
		Envserver: *envserver, BaselineEnvserver: *baseline, Episodes: *episodes,
		DensityTask: *densityTask, DensityN: *densityN, DensityHold: *densityHold, DensityBatch: *densityBatch}
	if *verbose {
		opts.ServerLogf = log.Printf
	}
	if *scenarios != "" {
		for _, s := range strings.Split(*scenarios, ",") {
			s = strings.TrimSpace(s)
			if !contains(bench.Scenarios, s) {
				log.Fatalf("bench: unknown scenario %q (want %s)", s, strings.Join(bench.Scenarios, ", "))
			}
			opts.Scenarios = append(opts.Scenarios, s)
		}
	}
	if *apps != "" {
		for _, s := range strings.Split(*apps, ",") {
			opts.Apps = append(opts.Apps, strings.TrimSpace(s))
		}
	}
	if *pools != "" {
		for _, s := range strings.Split(*pools, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				log.Fatalf("bench: bad pool size %q", s)
			}
			opts.Pools = append(opts.Pools, n)
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, err := bench.Run(ctx, opts)
	if r != nil {
		fmt.Print(bench.Table(r))
		files, werr := bench.WriteReport(r, *out)
		if werr != nil {
			log.Printf("bench: %v", werr)
			os.Exit(1)
		}
		fmt.Printf("\nwrote %s\n", strings.Join(files, " "))
	}
	if err != nil {
		log.Printf("bench: %v", err)
		os.Exit(1)
	}
	if len(r.Errors) > 0 {
		os.Exit(1)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
