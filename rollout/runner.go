package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/internal/atomicfile"
	"github.com/shinken-rl/shinken/trajectory"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
)

// Config describes a batch run.
type Config struct {
	Client EnvAPI // one server (*Client) or several (*Servers)
	Policy Policy
	// Tasks are the task ids to run; they must be on the server's /v1/spec.
	Tasks []string
	// Seeds runs seeds 0..Seeds-1 of each task (each seed a distinct
	// instance of the task family: docs/tasks.md); default 1.
	Seeds int
	// Split is the instances' split: train (default) or test.
	Split string
	// Replicas runs each (task, seed) this many times; default 1.
	Replicas int
	// Fork starts each (task, seed)'s replicas by forking one env reset to
	// the task's golden state, instead of resetting each. Where the server
	// cannot fork (unsupported) it falls back to resets. A retry after an
	// infrastructure failure always uses a fresh reset.
	Fork bool
	// Concurrency bounds the episodes in flight; default 4.
	Concurrency int
	// MaxAttempts bounds the attempts of one job when infrastructure fails
	// (sandbox_died, setup_error, pool_exhausted, timeouts); default 3. Task
	// outcomes — any reward, max_steps, agent_error, scorer_error — are
	// never retried.
	MaxAttempts int
	// Out, when set, is the run directory: trajectories/ (a trajectory
	// store), results.jsonl, summary.json and verl.jsonl.
	Out string
	// Resume skips the jobs whose trajectory Out already holds with a
	// non-infrastructure exit. Without it a non-empty Out is an error.
	Resume bool
	// Observe is sent with every reset, fork and step; nil: server default.
	Observe *api.Observe
	// SaveFrames stores every frame the run sees under Out (content-addressed).
	SaveFrames bool
	// PassReward is the reward at or above which an episode passes; default 1.
	PassReward float64
	// Logf, if set, gets one line per finished job.
	Logf func(format string, args ...any)
}

// Job is one cell of the run matrix.
type Job struct {
	Task    string `json:"task"`
	Seed    int64  `json:"seed"`
	Replica int    `json:"replica"`
}

// Key names the job; it is stored in the trajectory's labels as LabelJob.
func (j Job) Key() string { return fmt.Sprintf("%s/%d/%d", j.Task, j.Seed, j.Replica) }

// Labels the runner sets on the trajectories it writes.
const (
	LabelJob     = "rollout.job"
	LabelAttempt = "rollout.attempt"
)

// ExitPolicyError and ExitError are the outcomes of jobs that ended without
// a scored episode: the policy failed, or the server refused the request.
const (
	ExitPolicyError = "policy_error"
	ExitError       = "error"
)

// Result is one job's outcome.
type Result struct {
	Job           Job      `json:"job"`
	EpisodeID     string   `json:"episode_id,omitempty"`
	Reward        float64  `json:"reward"`
	Passed        bool     `json:"passed"`
	ExitReason    string   `json:"exit_reason"`
	Steps         int      `json:"steps"`
	Attempts      int      `json:"attempts"`
	InfraFailures []string `json:"infra_failures,omitempty"` // why earlier attempts were retried
	WallMS        int64    `json:"wall_ms"`
	Error         string   `json:"error,omitempty"`
	Resumed       bool     `json:"resumed,omitempty"`
}

// TaskSummary is one task's line of the summary.
type TaskSummary struct {
	Jobs     int     `json:"jobs"`
	Passed   int     `json:"passed"`
	PassRate float64 `json:"pass_rate"`
}

// Summary totals a run.
type Summary struct {
	Jobs         int                     `json:"jobs"`
	Completed    int                     `json:"completed"` // jobs that ended in a scored episode
	Passed       int                     `json:"passed"`
	PassRate     float64                 `json:"pass_rate"` // passed / jobs
	MeanReward   float64                 `json:"mean_reward"`
	Steps        int                     `json:"steps"`
	MeanSteps    float64                 `json:"mean_steps"`
	WallS        float64                 `json:"wall_s"`
	ExitReasons  map[string]int          `json:"exit_reasons"`
	InfraRetries int                     `json:"infra_retries"` // attempts retried after an infra failure
	InfraFailed  int                     `json:"infra_failed"`  // jobs still failing on infra after MaxAttempts
	Errors       int                     `json:"errors"`        // policy or request errors
	Resumed      int                     `json:"resumed"`       // jobs taken from an earlier run
	PerTask      map[string]*TaskSummary `json:"per_task"`
	Verl         *trajectory.ExportStats `json:"verl,omitempty"`
	Results      []Result                `json:"-"`
}

// infraExit reports whether an episode's exit reason is the infrastructure's fault.
func infraExit(reason string) bool { return trajectory.ExitReason(reason).Retryable() }

type runner struct {
	cfg   Config
	tasks map[string]api.TaskInfo
	store *trajectory.Store
	sem   *semaphore.Weighted
	limit int64

	mu      sync.Mutex
	results []Result
}

// Run executes the run matrix and returns its summary. It fails early on a
// bad config, an unknown task or an unreachable server; once jobs run, a
// job's failure is recorded in its Result and the run goes on.
func Run(ctx context.Context, cfg Config) (*Summary, error) {
	if cfg.Client == nil || cfg.Policy == nil {
		return nil, errors.New("rollout: Client and Policy are required")
	}
	if len(cfg.Tasks) == 0 {
		return nil, errors.New("rollout: no tasks")
	}
	cfg.Seeds = max(cfg.Seeds, 1)
	cfg.Replicas = max(cfg.Replicas, 1)
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 4
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 3
	}
	if cfg.PassReward == 0 {
		cfg.PassReward = 1
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	spec, err := cfg.Client.Spec(ctx)
	if err != nil {
		return nil, fmt.Errorf("rollout: reading server spec: %w", err)
	}
	r := &runner{cfg: cfg, tasks: map[string]api.TaskInfo{}, limit: int64(cfg.Concurrency)}
	r.sem = semaphore.NewWeighted(r.limit)
	for _, t := range spec.Tasks {
		r.tasks[t.ID] = t
	}
	var jobs []Job
	for _, id := range cfg.Tasks {
		if _, ok := r.tasks[id]; !ok {
			return nil, fmt.Errorf("rollout: task %q is not on the server", id)
		}
		for seed := range cfg.Seeds {
			for rep := range cfg.Replicas {
				jobs = append(jobs, Job{Task: id, Seed: int64(seed), Replica: rep})
			}
		}
	}
	done := map[string]Result{}
	if cfg.Out != "" {
		r.store, err = trajectory.NewStore(filepath.Join(cfg.Out, "trajectories"),
			trajectory.StoreOptions{MaxEpisodes: max(trajectory.DefaultMaxEpisodes, 2*len(jobs))})
		if err != nil {
			return nil, fmt.Errorf("rollout: %w", err)
		}
		if done, err = r.finished(); err != nil {
			return nil, err
		}
		if len(done) > 0 && !cfg.Resume {
			return nil, fmt.Errorf("rollout: %s already holds %d finished jobs; pass Resume (--resume) to continue it, or use another directory", cfg.Out, len(done))
		}
	}
	start := time.Now()
	var todo []Job
	for _, j := range jobs {
		if res, ok := done[j.Key()]; ok {
			r.results = append(r.results, res)
			continue
		}
		todo = append(todo, j)
	}
	var g errgroup.Group
	if cfg.Fork {
		for _, grp := range groupJobs(todo) {
			g.Go(func() error { r.forkGroup(ctx, grp); return nil })
		}
	} else {
		g.SetLimit(cfg.Concurrency)
		for _, j := range todo {
			if ctx.Err() != nil {
				break
			}
			g.Go(func() error { r.record(r.job(ctx, j, nil, nil)); return nil })
		}
	}
	g.Wait()
	sum := r.summarize(time.Since(start))
	if cfg.Out != "" {
		if err := r.writeOutputs(sum); err != nil {
			return sum, err
		}
	}
	if err := ctx.Err(); err != nil {
		return sum, fmt.Errorf("rollout: run interrupted after %d of %d jobs: %w", len(sum.Results), len(jobs), err)
	}
	return sum, nil
}

// finished reads the jobs already done in the store: those whose saved
// trajectory ended for a reason other than the infrastructure.
func (r *runner) finished() (map[string]Result, error) {
	ids, err := r.store.List()
	if err != nil {
		return nil, fmt.Errorf("rollout: %w", err)
	}
	done := map[string]Result{}
	for _, id := range ids {
		t, err := r.store.Load(id)
		if err != nil {
			return nil, fmt.Errorf("rollout: resuming: %w", err)
		}
		key := t.Labels[LabelJob]
		if key == "" || t.EndedAt == nil || infraExit(string(t.ExitReason)) || t.ExitReason == "" {
			continue
		}
		j, ok := parseKey(key)
		if !ok {
			continue
		}
		attempts, _ := strconv.Atoi(t.Labels[LabelAttempt])
		done[key] = Result{Job: j, EpisodeID: t.EpisodeID, Reward: t.Reward, Passed: t.Reward >= r.cfg.PassReward,
			ExitReason: string(t.ExitReason), Steps: len(t.Steps), Attempts: attempts,
			WallMS: t.EndedAt.Sub(t.StartedAt).Milliseconds(), Resumed: true}
	}
	return done, nil
}

func parseKey(key string) (Job, bool) {
	var j Job
	// task ids hold no '/', so the last two fields are seed and replica.
	i := len(key) - 1
	parts := []string{}
	for n := 0; n < 2; n++ {
		for i >= 0 && key[i] != '/' {
			i--
		}
		if i < 0 {
			return j, false
		}
		parts = append(parts, key[i+1:])
		key = key[:i]
		i = len(key) - 1
	}
	seed, err1 := strconv.ParseInt(parts[1], 10, 64)
	rep, err2 := strconv.Atoi(parts[0])
	if err1 != nil || err2 != nil || key == "" {
		return j, false
	}
	return Job{Task: key, Seed: seed, Replica: rep}, true
}

// groupJobs groups jobs by (task, seed), in order.
func groupJobs(jobs []Job) [][]Job {
	var out [][]Job
	idx := map[string]int{}
	for _, j := range jobs {
		k := fmt.Sprintf("%s/%d", j.Task, j.Seed)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], j)
	}
	return out
}

func (r *runner) record(res Result) {
	r.mu.Lock()
	r.results = append(r.results, res)
	r.mu.Unlock()
	msg := fmt.Sprintf("rollout: %s: %s reward=%g steps=%d attempts=%d", res.Job.Key(), res.ExitReason, res.Reward, res.Steps, res.Attempts)
	if res.Error != "" {
		msg += " error=" + res.Error
	}
	r.cfg.Logf("%s", msg)
}

// forkGroup runs one (task, seed)'s replicas from one golden state: reset a
// parent env, fork it len(jobs) times, close the parent, run each child. A
// group holds min(len(jobs), Concurrency) of the run's slots, and runs its
// children that many at a time (forked envs wait their turn, leased).
func (r *runner) forkGroup(ctx context.Context, jobs []Job) {
	w := min(int64(len(jobs)), r.limit)
	if err := r.sem.Acquire(ctx, w); err != nil {
		return // interrupted
	}
	defer r.sem.Release(w)
	if ctx.Err() != nil {
		return
	}
	children, frames := r.forkChildren(ctx, jobs)
	var g errgroup.Group
	g.SetLimit(int(w))
	for i, j := range jobs {
		var start *api.Result
		if children != nil && children[i].Error == nil && children[i].Obs != nil {
			start = &children[i]
		} else if children != nil && children[i].EnvID != "" {
			r.closeEnv(children[i].EnvID)
		}
		g.Go(func() error {
			if ctx.Err() != nil {
				r.closeEnv(envOf(start))
				return nil
			}
			r.record(r.job(ctx, j, start, frames))
			return nil
		})
	}
	g.Wait()
}

func envOf(res *api.Result) string {
	if res == nil {
		return ""
	}
	return res.EnvID
}

// forkChildren resets a parent and forks it; nil when that fails (the jobs
// then start with resets of their own).
func (r *runner) forkChildren(ctx context.Context, jobs []Job) ([]api.Result, map[string][]byte) {
	j := jobs[0]
	seed := j.Seed
	var parent string
	for attempt := 0; attempt < r.cfg.MaxAttempts && parent == ""; attempt++ {
		rep, err := r.cfg.Client.Reset(ctx, &api.ResetRequest{Envs: []api.ResetEnv{{Task: j.Task, Seed: &seed, Split: r.cfg.Split}}, Observe: r.observe(j.Task)})
		if err != nil {
			r.cfg.Logf("rollout: %s/%d: golden reset: %v", j.Task, j.Seed, err)
			continue
		}
		res := rep.Results[0]
		if res.Error != nil {
			if res.EnvID != "" {
				r.closeEnv(res.EnvID)
			}
			r.cfg.Logf("rollout: %s/%d: golden reset: %v", j.Task, j.Seed, res.Error)
			continue
		}
		parent = res.EnvID
	}
	if parent == "" {
		return nil, nil
	}
	defer r.closeEnv(parent)
	rep, err := r.cfg.Client.Fork(ctx, &api.ForkRequest{EnvID: parent, N: len(jobs), Observe: r.observe(j.Task)})
	if err != nil || len(rep.Results) != len(jobs) {
		r.cfg.Logf("rollout: %s/%d: fork: %v (falling back to resets)", j.Task, j.Seed, err)
		if err == nil {
			for _, c := range rep.Results {
				r.closeEnv(c.EnvID)
			}
		}
		return nil, nil
	}
	return rep.Results, rep.Frames
}

func (r *runner) closeEnv(envID string) {
	if envID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.cfg.Client.Close(ctx, envID); err != nil {
		r.cfg.Logf("rollout: closing env %s: %v", envID, err)
	}
}

// job runs one job to a result, retrying infrastructure failures on a fresh
// env up to MaxAttempts. start, when set, is a forked env to begin on.
func (r *runner) job(ctx context.Context, j Job, start *api.Result, frames map[string][]byte) Result {
	t0 := time.Now()
	res := Result{Job: j}
	for attempt := 1; ; attempt++ {
		res.Attempts = attempt
		out := r.episode(ctx, j, attempt, attempt == r.cfg.MaxAttempts, start, frames)
		start, frames = nil, nil
		res.EpisodeID, res.Reward, res.Steps = out.episodeID, out.reward, out.steps
		res.ExitReason, res.Error = out.exit, out.err
		if out.infra == "" || attempt >= r.cfg.MaxAttempts || ctx.Err() != nil {
			break
		}
		res.InfraFailures = append(res.InfraFailures, out.infra)
		r.cfg.Logf("rollout: %s: attempt %d: infrastructure failure (%s); retrying on a fresh env", j.Key(), attempt, out.infra)
	}
	res.Passed = res.Error == "" && res.Reward >= r.cfg.PassReward && !infraExit(res.ExitReason)
	res.WallMS = time.Since(t0).Milliseconds()
	return res
}

// outcome is how one attempt ended. infra is set (to a code or exit reason)
// when the infrastructure failed and the job may be retried.
type outcome struct {
	episodeID string
	reward    float64
	steps     int
	exit      string
	err       string
	infra     string
}

func (o outcome) failed(exit string, err error) outcome {
	o.exit, o.err = exit, err.Error()
	return o
}

// episode runs one attempt: reset (or the forked start), then turns until
// the episode ends, then saves its trajectory. An attempt the
// infrastructure broke is saved only when it is the last one.
func (r *runner) episode(ctx context.Context, j Job, attempt int, last bool, start *api.Result, frames map[string][]byte) (o outcome) {
	task := r.tasks[j.Task]
	if start == nil {
		seed := j.Seed
		rep, err := r.cfg.Client.Reset(ctx, &api.ResetRequest{Envs: []api.ResetEnv{{Task: j.Task, Seed: &seed, Split: r.cfg.Split}}, Observe: r.observe(j.Task)})
		if err != nil {
			o = o.failed(ExitError, fmt.Errorf("reset: %w", err))
			if c := aci.CodeOf(err); isInfra(c) {
				o.exit, o.infra = string(trajectory.SetupError), string(c)
			}
			return o
		}
		start, frames = &rep.Results[0], rep.Frames
		if start.Error != nil {
			r.closeEnv(start.EnvID)
			o = o.failed(ExitError, fmt.Errorf("reset: %w", start.Error))
			if c := start.Error.Code; isInfra(c) || c == aci.CodeInvalidAction || c == aci.CodeUnsupported {
				reason := string(trajectory.SetupError)
				if start.Info != nil && start.Info.ExitReason != "" {
					reason = start.Info.ExitReason
				}
				o.exit, o.infra = reason, string(c)
			}
			return o
		}
	}
	envID := start.EnvID
	defer r.closeEnv(envID)
	o.episodeID = start.EpisodeID
	obs := start.Obs
	cache := map[string][]byte{}
	r.keepFrames(cache, frames, obs)
	if start.Info != nil && start.Info.Instruction != "" {
		// The instance's instruction, not the family's template.
		task.Instruction = start.Info.Instruction
	}
	agent, err := r.cfg.Policy.Start(ctx, task, j.Seed)
	if err != nil {
		return o.failed(ExitPolicyError, err)
	}
	var lastErr *aci.Error
	for step := 0; ; step++ {
		turn := Turn{Task: task, EnvID: envID, EpisodeID: o.episodeID, Step: step, Obs: obs, LastError: lastErr}
		if obs != nil {
			turn.Frame = cache[obs.Frame]
		}
		dec, err := agent.Act(ctx, turn)
		if err != nil {
			return o.failed(ExitPolicyError, err)
		}
		se := api.StepEnv{EnvID: envID, Tokens: dec.Tokens, Coords: dec.Coords}
		if dec.Actions != nil {
			se.Actions = dec.Actions
		} else {
			text := dec.Text
			se.Text, se.Dialect = &text, dec.Dialect
		}
		se.Coords = stepCoords(r.cfg.Observe, dec)
		req := &api.StepRequest{Steps: []api.StepEnv{se}, Observe: r.observe(j.Task)}
		if obs != nil {
			req.Have = []string{obs.Frame}
		}
		rep, err := r.cfg.Client.Step(ctx, req)
		if err != nil {
			o = o.failed(ExitError, fmt.Errorf("step %d: %w", step, err))
			if c := aci.CodeOf(err); isInfra(c) {
				o.exit, o.infra = string(trajectory.SandboxDied), string(c)
			}
			return o
		}
		res := rep.Results[0]
		o.steps = step + 1
		if res.Error != nil {
			o = o.failed(ExitError, fmt.Errorf("step %d: %w", step, res.Error))
			if isInfra(res.Error.Code) {
				o.exit, o.infra = string(trajectory.SandboxDied), string(res.Error.Code)
				if res.Info != nil && res.Info.ExitReason != "" {
					o.exit = res.Info.ExitReason
				}
				if last {
					r.save(ctx, &o, j, attempt)
				}
			}
			return o
		}
		obs = res.Obs
		r.keepFrames(cache, rep.Frames, obs)
		lastErr = nil
		if res.Info != nil {
			lastErr = res.Info.Error
		}
		if res.Terminated || res.Truncated {
			o.reward, _ = res.Scored() // not a score: the exit reason is infrastructure's
			if res.Info != nil {
				o.exit = res.Info.ExitReason
			}
			if infraExit(o.exit) {
				o.infra = o.exit
			}
			if o.infra == "" || last {
				r.save(ctx, &o, j, attempt)
			}
			return o
		}
	}
}

// keepFrames keeps the current screen's bytes (and stores new frames when
// asked), dropping older ones.
func (r *runner) keepFrames(cache, frames map[string][]byte, obs *aci.Observation) {
	if obs == nil {
		return
	}
	b, ok := frames[obs.Frame]
	if !ok {
		b, ok = cache[obs.Frame]
	}
	clear(cache)
	if ok {
		cache[obs.Frame] = b
		if r.store != nil && r.cfg.SaveFrames {
			if err := r.store.PutFrame(obs.Frame, obs.Format, b); err != nil {
				r.cfg.Logf("rollout: storing frame: %v", err)
			}
		}
	}
}

// save fetches the episode's trajectory from the server and writes it to
// the run's store with the job's labels; the episode's step count comes
// from it too.
func (r *runner) save(ctx context.Context, o *outcome, j Job, attempt int) {
	if r.store == nil || o.episodeID == "" {
		return
	}
	t, err := r.cfg.Client.Episode(ctx, o.episodeID)
	if err != nil {
		o.err = fmt.Sprintf("fetching trajectory: %v", err)
		return
	}
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[LabelJob] = j.Key()
	t.Labels[LabelAttempt] = strconv.Itoa(attempt)
	if err := r.store.Save(t); err != nil {
		o.err = fmt.Sprintf("saving trajectory: %v", err)
	}
}

func (r *runner) summarize(wall time.Duration) *Summary {
	s := &Summary{ExitReasons: map[string]int{}, PerTask: map[string]*TaskSummary{}, WallS: wall.Seconds()}
	sort.Slice(r.results, func(a, b int) bool { return jobLess(r.results[a].Job, r.results[b].Job) })
	s.Results = r.results
	var reward float64
	for _, res := range r.results {
		s.Jobs++
		s.ExitReasons[res.ExitReason]++
		s.Steps += res.Steps
		s.InfraRetries += len(res.InfraFailures)
		reward += res.Reward
		ts := s.PerTask[res.Job.Task]
		if ts == nil {
			ts = &TaskSummary{}
			s.PerTask[res.Job.Task] = ts
		}
		ts.Jobs++
		if res.Resumed {
			s.Resumed++
		}
		switch {
		case infraExit(res.ExitReason):
			s.InfraFailed++
		case res.ExitReason == ExitPolicyError || res.ExitReason == ExitError:
			s.Errors++
		default:
			s.Completed++
		}
		if res.Passed {
			s.Passed++
			ts.Passed++
		}
	}
	for _, ts := range s.PerTask {
		ts.PassRate = float64(ts.Passed) / float64(ts.Jobs)
	}
	if s.Jobs > 0 {
		s.PassRate = float64(s.Passed) / float64(s.Jobs)
		s.MeanReward = reward / float64(s.Jobs)
		s.MeanSteps = float64(s.Steps) / float64(s.Jobs)
	}
	return s
}

func jobLess(a, b Job) bool {
	if a.Task != b.Task {
		return a.Task < b.Task
	}
	if a.Seed != b.Seed {
		return a.Seed < b.Seed
	}
	return a.Replica < b.Replica
}

// writeOutputs writes results.jsonl, verl.jsonl and summary.json under Out.
func (r *runner) writeOutputs(s *Summary) error {
	var ts []*trajectory.Trajectory
	ids, err := r.store.List()
	if err != nil {
		return err
	}
	for _, id := range ids {
		t, err := r.store.Load(id)
		if err != nil {
			return fmt.Errorf("rollout: export: %w", err)
		}
		if t.Labels[LabelJob] != "" {
			ts = append(ts, t)
		}
	}
	st, err := writeFile(filepath.Join(r.cfg.Out, "verl.jsonl"), func(f *os.File) (any, error) {
		return trajectory.ExportVerl(f, ts)
	})
	if err != nil {
		return fmt.Errorf("rollout: verl export: %w", err)
	}
	vs := st.(trajectory.ExportStats)
	s.Verl = &vs
	if _, err := writeFile(filepath.Join(r.cfg.Out, "results.jsonl"), func(f *os.File) (any, error) {
		enc := json.NewEncoder(f)
		for _, res := range s.Results {
			if err := enc.Encode(res); err != nil {
				return nil, err
			}
		}
		return nil, nil
	}); err != nil {
		return fmt.Errorf("rollout: results: %w", err)
	}
	if _, err := writeFile(filepath.Join(r.cfg.Out, "summary.json"), func(f *os.File) (any, error) {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return nil, enc.Encode(s)
	}); err != nil {
		return fmt.Errorf("rollout: summary: %w", err)
	}
	return nil
}

// writeFile writes a file crash-safely with the content fill produces, and
// returns fill's value.
func writeFile(path string, fill func(*os.File) (any, error)) (v any, err error) {
	err = atomicfile.WriteFunc(path, 0o600, func(w io.Writer) error {
		var ferr error
		v, ferr = fill(w.(*os.File))
		return ferr
	})
	return v, err
}
