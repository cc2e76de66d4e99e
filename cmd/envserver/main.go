// Command envserver serves Shinken's trainer-facing API over a warm pool of
// Linux desktop sandboxes.
//
//	envserver --pool 4                       # loopback, process provider
//	envserver --listen 0.0.0.0:8700 --token $T --provider docker
//	envserver tasks check --seeds 20         # prove every task family
//	envserver tasks count --seeds 2000       # distinct instances per family
package main

import (
	"context"
	"flag"
	"log"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/stack"
	"github.com/shinken-rl/shinken/internal/atomicfile"
	"github.com/shinken-rl/shinken/internal/pprofserve"
	"github.com/shinken-rl/shinken/pool/process"
)

func main() {
	// A sandbox's init re-executes this binary; it never returns from here.
	process.MaybeRunInit()
	if len(os.Args) > 1 && os.Args[1] == "tasks" {
		os.Exit(tasksMain(os.Args[2:]))
	}

	configPath := flag.String("config", "", "config file (JSON); the shipped configs/envserver.json is the default")
	listen := flag.String("listen", "", "address to serve on (default from config: 127.0.0.1:8700)")
	poolN := flag.Int("pool", -1, "warm sandboxes kept ahead")
	provider := flag.String("provider", "", "sandbox provider: one of "+strings.Join(stack.Providers(), ", "))
	resetMode := flag.String("reset-mode", "", "how a finished episode's sandbox is reused: inplace (reset in place, kept warm) or reboot (retired, a replica boots); default from config: inplace")
	token := flag.String("token", "", "bearer token clients must send (required beyond loopback; default $SHINKEN_TOKEN); --token-file keeps it off the command line")
	tokenFile := flag.String("token-file", "", "file holding the bearer token (default $SHINKEN_TOKEN_FILE)")
	tasks := flag.String("tasks", "", "task directory (default: the shipped suite)")
	allowUnchecked := flag.Bool("allow-unchecked", false, "serve task families that lack a passing check record")
	allowExec := flag.Bool("allow-exec", false, "serve POST /v1/exec: the trainer runs commands in its envs (config trainer_exec)")
	screens := flag.String("screens", "", "more screen sizes a reset may ask for, comma-separated WxH (config screens), each with its own warm pool")
	state := flag.String("state", "", "state directory: trajectories, frames, sandboxes")
	guestd := flag.String("guestd", "", "guestd binary (default: next to envserver, else PATH)")
	addrFile := flag.String("addr-file", "", "write the server's base URL here once it serves")
	quiet := flag.Bool("quiet", false, "log only errors")
	pprofAddr := flag.String("pprof", "", "serve Go's profiler (/debug/pprof/) on this loopback address, e.g. 127.0.0.1:6060; off by default")
	shutdownTimeout := flag.Duration("shutdown-timeout", 60*time.Second, "on SIGTERM, how long in-flight steps may finish before they are cancelled")
	flag.Parse()

	if *pprofAddr != "" {
		if err := servePprof(*pprofAddr); err != nil {
			log.Fatalf("envserver: %v", err)
		}
	}
	cfg, err := configs.LoadServer(*configPath)
	if err != nil {
		log.Fatalf("envserver: %v", err)
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *poolN >= 0 {
		cfg.Pool = *poolN
	}
	if *provider != "" {
		cfg.Provider = *provider
	}
	if *resetMode != "" {
		cfg.ResetMode = *resetMode
	}
	if *token != "" {
		cfg.Token = *token
	} else if t := os.Getenv("SHINKEN_TOKEN"); t != "" && cfg.Token == "" {
		cfg.Token = t
	}
	if *tokenFile == "" {
		*tokenFile = os.Getenv("SHINKEN_TOKEN_FILE")
	}
	if *tokenFile != "" {
		cfg.TokenFile = *tokenFile
	}
	if err := cfg.ReadToken(); err != nil {
		log.Fatalf("envserver: %v", err)
	}
	if *tasks != "" {
		cfg.Tasks = *tasks
	}
	if *state != "" {
		cfg.State = *state
	}
	if *allowUnchecked {
		cfg.AllowUnchecked = true
	}
	if *allowExec {
		cfg.TrainerExec = true
	}
	if *screens != "" {
		cfg.Screens = strings.Split(*screens, ",")
	}
	logf := log.Printf
	if *quiet {
		logf = func(string, ...any) {}
	}

	// The first SIGTERM/SIGINT starts a graceful stop; a second one exits
	// at once (every file the server writes is crash-safe, and sandboxes
	// die with their server).
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		sig := <-sigs
		log.Printf("envserver: %v: stopping (finishing in-flight steps for up to %v; signal again to exit now)", sig, *shutdownTimeout)
		stop()
		sig = <-sigs
		log.Printf("envserver: %v again: exiting now", sig)
		os.Exit(2)
	}()
	st, err := stack.Open(ctx, cfg, stack.Options{GuestdPath: *guestd, Logf: logf})
	if err != nil {
		log.Fatalf("envserver: %v", err)
	}
	if err := st.Serve(cfg.Listen, cfg.Token); err != nil {
		st.Close(context.Background())
		log.Fatalf("envserver: %v", err)
	}
	caps := st.Pool.Capabilities()
	log.Printf("envserver: serving %s (provider %s, pool %d, snapshot %s, confined %v, %d tasks)",
		st.URL, caps.Provider, cfg.Pool, caps.SnapshotKind, caps.Confined, len(st.Tasks))
	if caps.Notes != "" {
		log.Printf("envserver: provider notes: %s", caps.Notes)
	}
	if *addrFile != "" {
		if err := atomicfile.Write(*addrFile, []byte(st.URL+"\n"), 0o644); err != nil {
			log.Printf("envserver: addr file: %v", err)
		}
	}
	select {
	case <-ctx.Done():
	case err := <-st.Done():
		log.Printf("envserver: serve: %v", err)
	}
	// Close stops admission (new connections and requests are refused),
	// waits for in-flight requests up to the deadline and then cancels
	// them, saves every episode, and destroys every sandbox.
	sctx, cancel := context.WithTimeout(context.Background(), *shutdownTimeout)
	defer cancel()
	if err := st.Close(sctx); err != nil {
		log.Printf("envserver: shutdown: %v", err)
		os.Exit(1)
	}
	log.Printf("envserver: stopped")
}

func servePprof(addr string) error {
	a, err := pprofserve.Serve(addr)
	if err != nil {
		return err
	}
	log.Printf("envserver: profiler on http://%s/debug/pprof/", a)
	return nil
}
