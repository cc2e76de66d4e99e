// Command rollout runs a policy over a matrix of tasks × seeds × replicas
// against an env server and writes the run's trajectories, results,
// summary and verl export.
//
//	rollout --url http://127.0.0.1:8700 --tasks all --policy oracle --seeds 8 --out runs/smoke
//	rollout --url ... --tasks xterm-hello-file --seeds 4 --replicas 8 --fork \
//	    --policy openai --model-url http://127.0.0.1:8000/v1 --model qwen --dialect xml --token-ids --out runs/q1
//	rollout --url ... --policy openai --model-url ... --model ui-tars-1.5 --dialect uitars --coords smart-resize --out runs/u1
//	rollout --server http://10.0.0.1:8700 --server http://10.0.0.2:8700 --tasks all --seeds 16 --out runs/wide
//	rollout --server k8s://shinken/app.kubernetes.io/name=shinken-envserver --tasks all --seeds 16 --out runs/k8s
//
// A k8s://<namespace>/<label selector> server names the ready envserver pods
// the Kubernetes API lists (credentials: the pod's service account inside a
// pod, else $KUBECONFIG or ~/.kube/config), listed again as pods come and go
// (docs/kubernetes.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/shinken-rl/shinken/aci/dialect"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/rollout"
)

func main() {
	if err := run(); err != nil {
		log.SetFlags(0)
		msg := err.Error()
		if !strings.HasPrefix(msg, "rollout: ") {
			msg = "rollout: " + msg
		}
		log.Fatal(msg)
	}
}

// urlList is a repeatable flag.
type urlList []string

func (l *urlList) String() string     { return strings.Join(*l, ",") }
func (l *urlList) Set(v string) error { *l = append(*l, v); return nil }

func run() error {
	var servers urlList
	flag.Var(&servers, "server", "an env server base URL, repeated to spread the envs over several, or one k8s://<namespace>/<label selector> (overrides --url)")
	var (
		url         = flag.String("url", "http://127.0.0.1:8700", "env server base URL")
		token       = flag.String("token", os.Getenv("SHINKEN_TOKEN"), "bearer token (default $SHINKEN_TOKEN)")
		tasks       = flag.String("tasks", "all", `comma-separated task ids, or "all" for every task the server lists`)
		seeds       = flag.Int("seeds", 1, "seeds per task (0..N-1): distinct instances of each task family")
		replicas    = flag.Int("replicas", 1, "replicas per (task, seed)")
		fork        = flag.Bool("fork", false, "start each (task, seed)'s replicas by forking one golden env")
		policy      = flag.String("policy", "oracle", "oracle (each instance's reference solution; scripted is its old name) | wrong (its first wrong solution) | random | openai")
		split       = flag.String("split", "", "instances' split: train (default) or test")
		taskDir     = flag.String("task-dir", "", "task files for the scripted policy's solutions (default: the shipped suite)")
		modelURL    = flag.String("model-url", "", "OpenAI-compatible base URL for --policy openai (e.g. http://127.0.0.1:8000/v1)")
		model       = flag.String("model", "", "model name for --policy openai")
		apiKey      = flag.String("api-key", os.Getenv("OPENAI_API_KEY"), "API key for --policy openai (default $OPENAI_API_KEY)")
		dialectName = flag.String("dialect", "pyautogui", "model output dialect: "+strings.Join(dialect.Names(), " | "))
		coords      = flag.String("coords", "", "coordinate space the model writes in: screen | frame | norm | norm1000 | WxH | "+
			rollout.CoordsSmartResize+" (default: the dialect's own)")
		tokenIDs    = flag.Bool("token-ids", false, "ask the endpoint for token ids and logprobs (vLLM return_token_ids)")
		maxTokens   = flag.Int("max-tokens", 1024, "completion token limit for --policy openai")
		temperature = flag.Float64("temperature", 0, "sampling temperature for --policy openai")
		maxImages   = flag.Int("max-images", 0, "screenshots kept in the conversation (0: all)")
		doneProb    = flag.Float64("done-prob", 0, "per-step chance that --policy random sends done")
		concurrency = flag.Int("concurrency", 4, "episodes in flight")
		attempts    = flag.Int("max-attempts", 3, "attempts per job when infrastructure fails")
		format      = flag.String("format", "png", "observation format: png | jpeg | raw")
		maxEdge     = flag.Int("max-long-edge", 0, "downscale observations to this long edge (0: full size)")
		out         = flag.String("out", "", "run directory: trajectories/, results.jsonl, summary.json, verl.jsonl")
		resume      = flag.Bool("resume", false, "continue the run in --out, skipping finished jobs")
		frames      = flag.Bool("frames", false, "store every observed frame under --out")
		observe     = flag.String("observe", "frame", "what --policy openai reads: frame (screenshot) | a11y (accessibility tree text) | both")
		quiet       = flag.Bool("quiet", false, "no per-job log lines")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if len(servers) == 0 && rollout.IsK8sURL(*url) {
		servers = urlList{*url}
	}
	var client rollout.EnvAPI = rollout.NewClient(*url, *token, nil)
	if k8s := slices.ContainsFunc(servers, rollout.IsK8sURL); k8s && len(servers) > 1 {
		return errors.New("--server k8s://... names every server itself: give it alone")
	} else if k8s {
		c, err := rollout.NewK8sServers(ctx, servers[0], *token, nil, nil)
		if err != nil {
			return err
		}
		client = c
	} else if len(servers) > 1 {
		c, err := rollout.NewServers(servers, *token, nil)
		if err != nil {
			return err
		}
		client = c
	} else if len(servers) == 1 {
		client = rollout.NewClient(servers[0], *token, nil)
	}
	var pol rollout.Policy
	switch *policy {
	case "oracle", "scripted", "wrong":
		ts, err := configs.LoadTasks(*taskDir)
		if err != nil {
			return err
		}
		pol = &rollout.Scripted{Tasks: ts, Split: *split, Wrong: *policy == "wrong"}
	case "random":
		pol = &rollout.Random{DoneProb: *doneProb}
	case "openai":
		if *modelURL == "" || *model == "" {
			return errors.New("--policy openai needs --model-url and --model")
		}
		if *format == "raw" {
			return errors.New("--policy openai needs --format png or jpeg")
		}
		if err := rollout.CheckObserve(*observe); err != nil {
			return fmt.Errorf("--observe: %w", err)
		}
		if err := rollout.CheckCoords(*coords); err != nil {
			return fmt.Errorf("--coords: %w", err)
		}
		pol = &rollout.OpenAI{URL: *modelURL, Model: *model, APIKey: *apiKey, Dialect: *dialectName, Coords: *coords,
			TokenIDs: *tokenIDs, MaxTokens: *maxTokens, Temperature: *temperature, MaxImages: *maxImages, Observe: *observe}
	default:
		return fmt.Errorf("unknown --policy %q (want oracle, wrong, random or openai)", *policy)
	}
	ids := strings.Split(*tasks, ",")
	if *tasks == "all" {
		spec, err := client.Spec(ctx)
		if err != nil {
			return fmt.Errorf("reading the server's tasks: %w", err)
		}
		ids = ids[:0]
		for _, t := range spec.Tasks {
			ids = append(ids, t.ID)
		}
	}
	logf := log.Printf
	if *quiet {
		logf = func(string, ...any) {}
	}
	sum, err := rollout.Run(ctx, rollout.Config{
		Client: client, Policy: pol, Tasks: ids, Seeds: *seeds, Split: *split, Replicas: *replicas, Fork: *fork,
		Concurrency: *concurrency, MaxAttempts: *attempts, Out: *out, Resume: *resume, SaveFrames: *frames,
		Observe: &api.Observe{Format: *format, MaxLongEdge: *maxEdge, A11y: rollout.ObserveTree(*observe)}, Logf: logf,
	})
	if sum != nil {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(sum)
	}
	return err
}
