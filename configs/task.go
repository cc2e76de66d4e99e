// Package configs holds Shinken's shipped configuration: the default server
// config and the task suite under tasks/, embedded so every binary carries
// them, and the loaders that read them (or an operator's own files).
package configs

import (
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

//go:embed tasks/*.json
var embedded embed.FS

// Task is one task family (docs/tasks.md): a task whose instruction,
// instance setup, expectations and solutions are templates over parameters
// drawn from a seed. A task without parameters is a family of one instance.
type Task struct {
	ID string `json:"id"`
	// Version is part of every instance's seed: a change to what a seed
	// draws (parameters, templates, a word list used) bumps it.
	Version     int    `json:"version,omitempty"`
	Instruction string `json:"instruction"`
	// Params are drawn from (id, version, seed), in order; see Param.
	Params []Param     `json:"params,omitempty"`
	Apps   []string    `json:"apps,omitempty"`
	Setup  []SetupStep `json:"setup,omitempty"`
	// InstanceSetup runs on every episode's sandbox after it is leased from
	// the golden (Setup, seed-independent): the instance's files and apps.
	InstanceSetup []SetupStep `json:"instance,omitempty"`
	// BeforeScore runs after the episode ends and before the agent is
	// frozen for the verifier: guestd settles what an app writes lazily
	// (browser close). It never saves the agent's work for it.
	BeforeScore []SetupStep `json:"before_score,omitempty"`
	Verifier    Verifier    `json:"verifier"`
	// Expect is what the verifier compares against, computed from the
	// parameters: it reaches the sandbox only with the verifier, after the
	// agent is frozen, as SK_EXPECT_<KEY> (ExpectEnv).
	Expect map[string]string `json:"expect,omitempty"`
	// Outputs are the paths the verifier reads of the agent's work; the
	// task checker plants hostile files there.
	Outputs []string `json:"outputs,omitempty"`
	// TestPercent is the share of instances in the test split
	// (DefaultTestPercent when unset).
	TestPercent *int `json:"test_percent,omitempty"`
	// SeedFree says the answer does not depend on the seed (the checker
	// then skips replaying one seed's oracle on another).
	SeedFree bool `json:"seed_free,omitempty"`
	MaxSteps int  `json:"max_steps"`
	// AllowShell lets launch_app start any program (the task gives the agent
	// a shell anyway, e.g. a terminal); otherwise only the programs in Apps.
	AllowShell bool `json:"allow_shell,omitempty"`
	// EndOnAgentError ends the episode (exit agent_error, reward 0, no
	// verifier run) at the first action the agent gets wrong; by default
	// the error is recorded in the step and the episode continues.
	EndOnAgentError bool `json:"end_on_agent_error,omitempty"`
	// A11y says the solutions act on elements of the accessibility tree
	// (element refs minted by observe.a11y): the task needs sandboxes with
	// the tree, and its solutions run with observe.a11y=tree.
	A11y bool `json:"a11y,omitempty"`
	// Solution is the scripted reference solution: one entry per step, each a
	// list of actions. Tests and bench drive it and expect reward 1.
	Solution [][]aci.Action `json:"solution"`
	// Wrong are plausible wrong solutions, each in Solution's shape; each
	// scores below the reward range's maximum.
	Wrong [][][]aci.Action `json:"wrong,omitempty"`
}

// SetupStep is one step of a task's setup; exactly one field is set.
type SetupStep struct {
	LaunchApp  *LaunchApp  `json:"launch_app,omitempty"`
	Exec       *Exec       `json:"exec,omitempty"`
	PutFile    *PutFile    `json:"put_file,omitempty"`
	WaitWindow *WaitWindow `json:"wait_window,omitempty"`
	Web        *Web        `json:"web,omitempty"`
	Browser    *Browser    `json:"browser,omitempty"`
}

// Web serves one of the sandbox's offline web apps (docs/tasks.md, "Web
// apps"), built from Data: JSON text, usually a template over the
// instance's parameters. The browser reaches it at http://<app>.test/.
type Web struct {
	App  string `json:"app"`
	Data string `json:"data,omitempty"`
}

// Browser drives the sandbox's Chromium over guestd's DevTools pipe: Open
// loads each URL (the first in the current tab, the rest in new tabs) and
// waits for each to load; Close closes the browser gracefully (a
// before_score step: what Chromium writes lazily reaches the disk).
type Browser struct {
	Open      []string `json:"open,omitempty"`
	Close     bool     `json:"close,omitempty"`
	TimeoutMS int      `json:"timeout_ms,omitempty"`
}

// LaunchApp starts an app (no shell).
type LaunchApp struct {
	App  string   `json:"app"`
	Args []string `json:"args,omitempty"`
}

// Exec runs a command inside the sandbox; a non-zero exit fails setup.
type Exec struct {
	Argv      []string `json:"argv,omitempty"`
	Shell     string   `json:"shell,omitempty"`
	TimeoutMS int      `json:"timeout_ms,omitempty"`
}

// PutFile writes a file inside the sandbox. A leading "~/" is the sandbox
// home. With Base64 set, Text is the file's bytes in base64 (generated
// documents and images: docs/tasks.md, "Generated files").
type PutFile struct {
	Path   string `json:"path"`
	Text   string `json:"text"`
	Mode   uint32 `json:"mode,omitempty"`
	Base64 bool   `json:"base64,omitempty"`
}

// Bytes is the file's content.
func (p *PutFile) Bytes() ([]byte, error) {
	if !p.Base64 {
		return []byte(p.Text), nil
	}
	return base64.StdEncoding.DecodeString(p.Text)
}

// WaitWindow waits until a window whose name or class contains Match exists.
type WaitWindow struct {
	Match     string `json:"match"`
	TimeoutMS int    `json:"timeout_ms,omitempty"`
}

// Verifier runs inside the sandbox once the agent's processes are stopped,
// as an identity of its own (HOME and working directory its own; the
// agent's home is $AGENT_HOME), and prints the reward: its whole stdout is
// exactly one number within Range. Anything else (no number, two numbers,
// out of range, NaN/Inf, a non-zero exit, a crash, a timeout) is
// scorer_error, never a reward. It reads the final state at once: waiting
// for the screen or a file to land is the env's settle, not a loop here.
//
// The agent controls every file in its home (a FIFO, a link to /dev/zero,
// a directory where a file belongs, an unlistable or huge directory), so a
// verifier reads it only through the verifier library (docs/architecture.md,
// "Verifiers read the agent's files safely"): a Shell verifier has the
// functions sk_read, sk_list, sk_type, sk_mode, sk_is_file, sk_is_dir,
// sk_absent, sk_text_is and sk_mode_has defined before it runs; an Argv
// verifier runs `$SK_GUESTD check OP PATH` itself. A check that fails
// exits non-zero (1 missing, 2 the wrong kind of file, 3 too large, 4
// unreadable, 5 unsafe for the shell), which the verifier scores as 0. Its
// environment holds no DISPLAY nor session bus: it never talks to the
// desktop.
type Verifier struct {
	Argv      []string `json:"argv,omitempty"`
	Shell     string   `json:"shell,omitempty"`
	TimeoutMS int      `json:"timeout_ms,omitempty"`
	// Range is the reward range [min, max]; default [0, 1].
	Range *[2]float64 `json:"range,omitempty"`
}

// RewardRange returns the verifier's reward range, [0, 1] by default.
func (v *Verifier) RewardRange() (lo, hi float64) {
	if v.Range == nil {
		return 0, 1
	}
	return v.Range[0], v.Range[1]
}

// MaxVerifierMS bounds a verifier's timeout_ms.
const MaxVerifierMS = 60_000

// Validate checks a task for the mistakes that would otherwise surface mid-episode.
func (t *Task) Validate() error {
	if t.ID == "" || strings.ContainsAny(t.ID, "/ \t\n") {
		return fmt.Errorf("task id %q: must be non-empty with no slashes or spaces", t.ID)
	}
	if t.MaxSteps <= 0 {
		return fmt.Errorf("task %s: max_steps must be positive", t.ID)
	}
	if len(t.Verifier.Argv) == 0 && t.Verifier.Shell == "" {
		return fmt.Errorf("task %s: verifier needs argv or shell", t.ID)
	}
	if len(t.Verifier.Argv) > 0 && t.Verifier.Shell != "" {
		return fmt.Errorf("task %s: verifier argv and shell are exclusive", t.ID)
	}
	if lo, hi := t.Verifier.RewardRange(); !(lo <= hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return fmt.Errorf("task %s: verifier range [%v, %v] must be finite with min <= max", t.ID, lo, hi)
	}
	if t.Verifier.TimeoutMS < 0 || t.Verifier.TimeoutMS > MaxVerifierMS {
		return fmt.Errorf("task %s: verifier timeout_ms %d outside 0..%d", t.ID, t.Verifier.TimeoutMS, MaxVerifierMS)
	}
	for i, s := range append(append([]SetupStep(nil), t.Setup...), t.InstanceSetup...) {
		n := 0
		if s.LaunchApp != nil {
			n++
		}
		if s.Exec != nil {
			n++
		}
		if s.PutFile != nil {
			n++
		}
		if s.WaitWindow != nil {
			n++
		}
		if s.Web != nil {
			n++
		}
		if s.Browser != nil {
			n++
		}
		if n != 1 {
			return fmt.Errorf("task %s: setup step %d must set exactly one of launch_app, exec, put_file, wait_window, web, browser", t.ID, i)
		}
		if s.Browser != nil && s.Browser.Close {
			return fmt.Errorf("task %s: setup step %d: browser close belongs in before_score", t.ID, i)
		}
	}
	for i, s := range t.BeforeScore {
		if s.Browser == nil || !s.Browser.Close || len(s.Browser.Open) > 0 {
			return fmt.Errorf("task %s: before_score step %d: only {\"browser\": {\"close\": true}} settles state before scoring", t.ID, i)
		}
	}
	return t.validateFamily()
}

// Tasks is a loaded task suite keyed by id.
type Tasks map[string]*Task

// IDs returns the task ids in sorted order.
func (ts Tasks) IDs() []string {
	ids := make([]string, 0, len(ts))
	for id := range ts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// LoadTasks reads every *.json task in dir (but the check record,
// CheckFile); an empty dir means the embedded suite.
func LoadTasks(dir string) (Tasks, error) {
	if dir == "" {
		sub, err := fs.Sub(embedded, "tasks")
		if err != nil {
			return nil, err
		}
		return loadFS(sub)
	}
	return loadFS(os.DirFS(dir))
}

// LoadChecks reads the check record of dir (the embedded suite's when dir
// is empty); a directory without one has an empty record.
func LoadChecks(dir string) (CheckRecord, error) {
	var fsys fs.FS = os.DirFS(dir)
	if dir == "" {
		sub, err := fs.Sub(embedded, "tasks")
		if err != nil {
			return nil, err
		}
		fsys = sub
	}
	b, err := fs.ReadFile(fsys, CheckFile)
	if errors.Is(err, fs.ErrNotExist) {
		return CheckRecord{}, nil
	}
	if err != nil {
		return nil, err
	}
	var rec CheckRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", CheckFile, err)
	}
	return rec, nil
}

func loadFS(fsys fs.FS) (Tasks, error) {
	names, err := fs.Glob(fsys, "*.json")
	if err != nil {
		return nil, err
	}
	ts := Tasks{}
	for _, name := range names {
		if name == CheckFile {
			continue
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		var t Task
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&t); err != nil {
			return nil, fmt.Errorf("task file %s: %w", name, err)
		}
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("task file %s: %w", name, err)
		}
		if want := strings.TrimSuffix(path.Base(name), ".json"); t.ID != want {
			return nil, fmt.Errorf("task file %s: id %q must match the file name", name, t.ID)
		}
		if _, dup := ts[t.ID]; dup {
			return nil, fmt.Errorf("task %s defined twice", t.ID)
		}
		ts[t.ID] = &t
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("no tasks found")
	}
	return ts, nil
}
