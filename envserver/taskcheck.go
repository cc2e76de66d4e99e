package envserver

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/trajectory"
)

// The task checker (docs/tasks.md, "The task checker") proves a family on
// real sandboxes before it is served: for each seed, doing nothing scores
// the minimum, the oracle the maximum, each wrong solution and the oracle
// of another seed less; the verifier gives the minimum, never a
// scorer_error, on hostile files where the agent's work belongs; the same
// seed twice starts the same files.

// CheckOptions says what CheckTasks runs.
type CheckOptions struct {
	Families []string // default: every task of the server
	Seeds    int      // train seeds 0..Seeds-1 of each family; default 3
	// Hostile is how many hostile kinds to plant per output path (in the
	// order of HostileKinds, rotated by family so a sample still covers
	// them all); 0 or more than there are: all.
	Hostile  int
	Parallel int // episodes at once, over up to Parallel/2 families at a time; default 2
	// Transfer replays seed 0's oracle on this many other train seeds of
	// each family (drawn by hash, the same every run) and reports the mean
	// normalized reward (TaskCheck.Transfer): what memorizing one answer
	// per family earns. It passes or fails nothing by itself.
	Transfer int
	// Smoke plays only doing nothing and the oracle on each seed: a
	// quick proof that a recorded family still works here (the suite
	// test's pass over the browser and office families), not a check to
	// record.
	Smoke bool
	Logf  func(format string, args ...any)
}

// TaskCheck is one family's result.
type TaskCheck struct {
	Family   string   `json:"family"`
	Version  int      `json:"version"`
	Def      string   `json:"def"` // configs.Task.DefHash of what was checked
	Seeds    int      `json:"seeds"`
	Episodes int      `json:"episodes"`
	Failures []string `json:"failures,omitempty"`
	Seconds  float64  `json:"seconds"`
	// Transfer is seed 0's oracle replayed on other seeds (CheckOptions.Transfer).
	Transfer *Transfer `json:"transfer,omitempty"`
}

// Transfer is what one memorized oracle earned on other instances.
type Transfer struct {
	Episodes int     `json:"episodes"`
	Scored   float64 `json:"scored"` // sum of rewards normalized to [0, 1]
}

// OK reports whether every check of the family passed.
func (c *TaskCheck) OK() bool { return len(c.Failures) == 0 }

// HostileKinds are the files the checker plants where a verifier reads the
// agent's work (docs/architecture.md, "Verifiers read the agent's files
// safely"); "$P" is the output's path.
var HostileKinds = []struct{ Name, Shell string }{
	{"fifo", `mkfifo "$P"`},
	{"link to /dev/zero", `ln -s /dev/zero "$P"`},
	{"unreadable", `printf x > "$P" && chmod 000 "$P"`},
	// As large as the sandbox lets the agent write (sparse).
	{"huge", `n=$(ulimit -f); if [ "$n" = unlimited ]; then s=8G; else s=$((n*512-512)); fi; truncate -s "$s" "$P"`},
	{"directory", `mkdir -p "$P/x"`},
	{"link loop", `ln -s "$P" "$P"`},
}

// play is one checked episode.
type play struct {
	what     string
	transfer bool // counted in TaskCheck.Transfer, not judged
	split    string
	seed     int64
	script   [][]aci.Action
	plant    string // shell run as the agent before the script
	digest   bool   // report a digest of the home after reset
	want     func(reward, lo, hi float64) bool
	wantS    string
}

type playResult struct {
	reward float64
	reason string
	digest string
	err    error
}

// CheckTasks checks the families opts names on this server's pool.
func (s *Server) CheckTasks(ctx context.Context, opts CheckOptions) ([]*TaskCheck, error) {
	if opts.Seeds <= 0 {
		opts.Seeds = 3
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 2
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	ids := opts.Families
	if len(ids) == 0 {
		ids = s.cfg.Tasks.IDs()
	}
	for _, id := range ids {
		if s.cfg.Tasks[id] == nil {
			return nil, fmt.Errorf("no task %q", id)
		}
	}
	// Families play side by side, each on at most familyWorkers envs: a
	// golden keeps about as many desktops as it recently had in use
	// (docs/architecture.md, "Sandbox lifecycle and reset in place"), so
	// spreading one family over every worker left each checked family
	// holding that many idle desktops, and its golden's setup kept the
	// other workers waiting.
	per := min(opts.Parallel, familyWorkers)
	slots := make(chan struct{}, max(1, opts.Parallel/per))
	out := make([]*TaskCheck, len(ids))
	var wg sync.WaitGroup
	for fi, id := range ids {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			out[fi] = s.checkFamily(ctx, id, fi, opts, per)
		}()
	}
	wg.Wait()
	done := out[:0]
	for _, c := range out {
		if c != nil {
			done = append(done, c)
		}
	}
	return done, ctx.Err()
}

// familyWorkers is how many envs one family's episodes play on at once.
const familyWorkers = 2

// checkFamily runs one family's check on parallel envs.
func (s *Server) checkFamily(ctx context.Context, id string, fi int, opts CheckOptions, parallel int) *TaskCheck {
	t := s.cfg.Tasks[id]
	t0 := time.Now()
	c := &TaskCheck{Family: id, Version: t.FamilyVersion(), Def: t.DefHash(), Seeds: opts.Seeds}
	c.Failures = append(c.Failures, t.CheckStatic(max(opts.Seeds, configs.StaticSeeds))...)
	plays, err := checkPlays(t, opts, fi)
	if err != nil {
		c.Failures = append(c.Failures, err.Error())
	} else {
		c.Episodes = len(plays)
		fails, tr := s.runPlays(ctx, id, plays, parallel)
		c.Failures, c.Transfer = append(c.Failures, fails...), tr
	}
	c.Seconds = time.Since(t0).Seconds()
	opts.Logf("tasks check: %s v%d: %d seeds, %d episodes, %d failures, %.1f s", id, c.Version, c.Seeds, c.Episodes, len(c.Failures), c.Seconds)
	return c
}

// checkPlays lists the episodes that check t.
func checkPlays(t *configs.Task, opts CheckOptions, rotate int) ([]play, error) {
	lo := func(r, lo, hi float64) bool { return r == lo }
	top := func(r, lo, hi float64) bool { return r == hi }
	below := func(r, lo, hi float64) bool { return r < hi }
	var plays []play
	for k := int64(0); k < int64(opts.Seeds); k++ {
		in, err := t.Instantiate(configs.SplitTrain, k)
		if err != nil {
			return nil, err
		}
		sp := func(what string, script [][]aci.Action, want func(r, lo, hi float64) bool, wantS string) {
			plays = append(plays, play{what: fmt.Sprintf("seed %d: %s", k, what), split: configs.SplitTrain, seed: k,
				script: script, want: want, wantS: wantS})
		}
		done := [][]aci.Action{{{Verb: aci.Done}}}
		sp("doing nothing (done)", done, lo, "the minimum")
		if opts.Smoke {
			sp("the oracle", in.Solution, top, "the maximum")
			continue
		}
		if !infeasible(in) {
			sp("giving up (fail)", [][]aci.Action{{{Verb: aci.Fail}}}, below, "below the maximum")
		}
		sp("the oracle", in.Solution, top, "the maximum")
		for i, w := range in.Wrong {
			sp(fmt.Sprintf("wrong solution %d", i), w, below, "below the maximum")
		}
		if t.Parameterized() && !t.SeedFree {
			// The oracle of the next seed whose expectations differ.
			for j := k + 1; j < k+50; j++ {
				other, err := t.Instantiate(configs.SplitTrain, j)
				if err != nil {
					return nil, err
				}
				if !sameExpect(in, other) && infeasible(in) == infeasible(other) {
					sp(fmt.Sprintf("the oracle of seed %d", j), other.Solution, below, "below the maximum")
					break
				}
			}
		}
		if k > 0 {
			continue
		}
		if t.Parameterized() && !t.SeedFree {
			for _, seed := range transferSeeds(t, in, opts.Transfer) {
				plays = append(plays, play{what: fmt.Sprintf("seed %d: the oracle of seed 0", seed), split: configs.SplitTrain,
					seed: seed, script: in.Solution, transfer: true})
			}
		}
		for _, d := range []string{"a", "b"} {
			plays = append(plays, play{what: "seed 0: reset " + d, split: configs.SplitTrain, seed: 0, digest: true,
				script: done, want: lo, wantS: "the minimum"})
		}
		kinds := HostileKinds
		if n := opts.Hostile; n > 0 && n < len(kinds) {
			var sub []struct{ Name, Shell string }
			for i := 0; i < n; i++ {
				sub = append(sub, kinds[(rotate+i)%len(kinds)])
			}
			kinds = sub
		}
		for _, p := range in.Outputs {
			for _, h := range kinds {
				plays = append(plays, play{what: fmt.Sprintf("seed 0: %s at %s", h.Name, p), split: configs.SplitTrain, seed: 0,
					plant: hostileShell(p, h.Shell), script: done, want: lo, wantS: "the minimum"})
			}
		}
	}
	return plays, nil
}

// transferSeeds picks n train seeds other than 0 whose instance is not
// seed 0's, by hash: the same seeds every run.
func transferSeeds(t *configs.Task, zero *configs.Instance, n int) []int64 {
	var out []int64
	for i := uint64(0); len(out) < n && i < uint64(n)*20; i++ {
		seed := int64(xxh3.HashString(fmt.Sprintf("%s\x00transfer\x00%d", t.ID, i)) % (1 << 31))
		if in, err := t.Instantiate(configs.SplitTrain, seed); err == nil && seed != 0 && in.Hash != zero.Hash {
			out = append(out, seed)
		}
	}
	return out
}

// hostileShell replaces the output at path (a leading ~/ is the home) with
// what shell makes.
func hostileShell(path, shell string) string {
	return `P=` + configs.ShellQuote(path) + `; case "$P" in "~/"*) P="$HOME/${P#\~/}";; esac; ` +
		`mkdir -p "$(dirname "$P")" && chmod -R u+rwX "$P" 2>/dev/null; rm -rf "$P" && ` + shell
}

// infeasible reports whether the instance's oracle ends with fail.
func infeasible(in *configs.Instance) bool {
	if len(in.Solution) == 0 {
		return false
	}
	last := in.Solution[len(in.Solution)-1]
	return len(last) > 0 && last[len(last)-1].Verb == aci.Fail
}

func sameExpect(a, b *configs.Instance) bool {
	ja, _ := json.Marshal(a.Expect)
	jb, _ := json.Marshal(b.Expect)
	return string(ja) == string(jb)
}

// runPlays runs plays on parallel envs and returns what failed and what
// the transfer plays scored.
func (s *Server) runPlays(ctx context.Context, family string, plays []play, parallel int) ([]string, *Transfer) {
	results := make([]playResult, len(plays))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < min(parallel, len(plays)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := ""
			defer func() {
				if env != "" {
					s.closeEnv(context.WithoutCancel(ctx), env)
				}
			}()
			for i := range next {
				results[i] = s.runPlay(ctx, family, &plays[i], &env)
			}
		}()
	}
	for i := range plays {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	t := s.cfg.Tasks[family]
	lo, hi := t.Verifier.RewardRange()
	var fails []string
	var digests []string
	var tr *Transfer
	for i, p := range plays {
		r := results[i]
		if p.transfer {
			if tr == nil {
				tr = &Transfer{}
			}
			tr.Episodes++
			if r.err != nil {
				fails = append(fails, fmt.Sprintf("%s: %v", p.what, r.err))
			} else if hi > lo {
				tr.Scored += (r.reward - lo) / (hi - lo)
			}
			continue
		}
		switch {
		case r.err != nil:
			fails = append(fails, fmt.Sprintf("%s: %v", p.what, r.err))
		case r.reason != string(trajectory.TaskComplete):
			fails = append(fails, fmt.Sprintf("%s: ended %q; want task_complete", p.what, r.reason))
		case !p.want(r.reward, lo, hi):
			fails = append(fails, fmt.Sprintf("%s: reward %v; want %s [%v, %v]", p.what, r.reward, p.wantS, lo, hi))
		}
		if p.digest && r.err == nil {
			digests = append(digests, r.digest)
		}
	}
	if len(digests) == 2 && digests[0] != digests[1] {
		fails = append(fails, "seed 0 reset twice started different files: "+firstDiff(digests[0], digests[1]))
	}
	sort.Strings(fails)
	return fails, tr
}

// homeDigest lists every regular file of the home with its checksum and
// every link with its target, but for what apps stamp with the time they
// started: caches, the recent-files list, and the profiles of the browser
// and the office suite, which they rewrite while they run (history,
// sessions, their own databases).
const homeDigest = `cd "$HOME" && { find . -xdev -type f ! -path './.cache/*' ! -path './.config/chromium/*' ! -path './.config/libreoffice/*' ! -name recently-used.xbel -print0 | sort -z | xargs -0r sha256sum; find . -xdev -type l ! -path './.config/chromium/*' ! -path './.config/libreoffice/*' -printf '%p -> %l\n' | sort; }`

// runPlay runs one episode on the worker's env (created by its first reset).
func (s *Server) runPlay(ctx context.Context, family string, p *play, env *string) playResult {
	seed := p.seed
	settle := configs.ScriptSettle
	obs := &api.Observe{Settle: &settle}
	if s.cfg.Tasks[family].A11y {
		obs.A11y = aci.A11yFull // its solutions act on element refs
	}
	rr, err := s.reset(ctx, &api.ResetRequest{Envs: []api.ResetEnv{{EnvID: *env, Task: family, Seed: &seed, Split: p.split}}, Observe: obs})
	if err != nil {
		return playResult{err: err}
	}
	res := rr.Results[0]
	rr.release()
	if res.EnvID != "" {
		*env = res.EnvID
	}
	if res.Error != nil {
		return playResult{err: fmt.Errorf("reset: %v", res.Error)}
	}
	var out playResult
	if p.plant != "" || p.digest {
		g, ok := s.EnvGuest(*env)
		if !ok {
			return playResult{err: fmt.Errorf("the env lost its sandbox")}
		}
		shell := p.plant
		if p.digest {
			shell = homeDigest
		}
		xr, err := g.Exec(ctx, wire.ExecArgs{Shell: shell, TimeoutMS: 20000})
		if err != nil || xr.ExitCode == nil || *xr.ExitCode != 0 {
			return playResult{err: fmt.Errorf("exec %q: %v %s", shell, err, tailOf(xr))}
		}
		out.digest = string(xr.Stdout)
	}
	script := p.script
	for k := 0; ; k++ {
		acts := []aci.Action{{Verb: aci.Done}}
		if k < len(script) {
			acts = script[k]
		}
		sr, err := s.step(ctx, &api.StepRequest{Steps: []api.StepEnv{{EnvID: *env, Actions: acts}}, Observe: obs})
		if err != nil {
			return playResult{err: err}
		}
		r := sr.Results[0]
		sr.release()
		if r.Error != nil {
			return playResult{err: fmt.Errorf("step %d: %v", k, r.Error)}
		}
		if r.Terminated || r.Truncated {
			out.reward, _ = r.Scored()
			out.reason = r.Info.ExitReason
			if r.Info.Error != nil && out.reason != string(trajectory.TaskComplete) {
				out.err = fmt.Errorf("ended %s: %v", out.reason, r.Info.Error)
			}
			return out
		}
		if k > 1000 {
			return playResult{err: fmt.Errorf("the episode never ended")}
		}
	}
}

// firstDiff names the first line two digests differ in.
func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < max(len(la), len(lb)); i++ {
		x, y := "", ""
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("%q vs %q", x, y)
		}
	}
	return ""
}

func tailOf(r *wire.ExecResult) string {
	if r == nil {
		return ""
	}
	return tail(append(r.Stdout, r.Stderr...))
}
