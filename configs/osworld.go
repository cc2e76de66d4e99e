package configs

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/shinken-rl/shinken/internal/atomicfile"
)

// The OSWorld importer (docs/osworld.md): `envserver tasks import-osworld`
// reads OSWorld's task files (evaluation_examples/examples/<domain>/<id>.json)
// and turns each into a fixed-instance Shinken task, osworld-<id>, or
// refuses it with a typed reason naming what is missing. The verifier of
// an imported task is the metric library (osworld_lib.py) followed by the
// task's evaluator, embedded in the task's own shell verifier.

//go:embed osworld_lib.py
var osworldLib string

// Refusal kinds: what an OSWorld task needs that the import cannot give.
const (
	RefuseNetwork      = "needs_network"        // a URL that is not in the cache, a login, Google Drive
	RefuseCacheFile    = "missing_cache_file"   // a downloaded or cloud file not in --cache
	RefuseCacheTooBig  = "cache_file_too_large" // over OSWorldMaxFile
	RefuseMetric       = "unsupported_metric"   // a metric the library does not implement
	RefuseGetter       = "unsupported_getter"   // a getter the library does not implement
	RefuseApp          = "unsupported_app"      // an app the sandbox image does not ship
	RefuseConfig       = "unsupported_config"   // a setup or postconfig step with no Shinken equivalent
	RefusePythonModule = "needs_python_module"  // a Python module Debian's python3 lacks in the image
	RefuseProgram      = "missing_program"      // a program a command runs that the image lacks
	RefusePath         = "outside_home"         // a path outside the user's home, or one that climbs out
	RefuseInvalid      = "invalid_task"         // not an OSWorld task file, or one Shinken's loader rejects
	RefuseUnsound      = "unsound_verifier"     // a verifier that this sandbox's apps make pass on a clean state, or fail on every state
)

// OSWorldMaxFile bounds a file the importer embeds from the cache (a
// download's put_file, a cloud_file in the verifier).
const OSWorldMaxFile = 4 << 20

// OSWorldHome is the home of OSWorld's VM user; its paths map to the
// sandbox home.
const OSWorldHome = "/home/user"

// OSWorldOptions are the importer's inputs.
type OSWorldOptions struct {
	// Examples is OSWorld's examples directory: <domain>/<id>.json below it.
	Examples string
	// Cache holds the files OSWorld downloads (docs/osworld.md, "The
	// cache"); it may be empty.
	Cache string
	// Out is the task directory imported tasks are written to; empty
	// writes nothing (a dry run).
	Out string
	// Only, when set, lists the tasks to read, as OSWorld's test_all.json
	// does ({domain: [id, ...]}); others are skipped.
	Only map[string][]string
}

// OSWorldReason is one thing a task needs that the import cannot give.
type OSWorldReason struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail,omitempty"`
}

func (r OSWorldReason) String() string {
	if r.Detail == "" {
		return r.Kind
	}
	return r.Kind + " " + r.Detail
}

// OSWorldEntry is one task's outcome.
type OSWorldEntry struct {
	Domain string `json:"domain"`
	ID     string `json:"id"`
	// Task is the Shinken task written, when imported.
	Task    string          `json:"task,omitempty"`
	Refused []OSWorldReason `json:"refused,omitempty"`
	// Notes say what the conversion dropped or changed.
	Notes []string `json:"notes,omitempty"`
	// Metrics are the task's metric names (infeasible included).
	Metrics []string `json:"metrics,omitempty"`
}

// OSWorldDomain counts one domain's outcomes; a refused task counts once,
// under its first reason's kind.
type OSWorldDomain struct {
	Tasks    int            `json:"tasks"`
	Imported int            `json:"imported"`
	Refused  map[string]int `json:"refused"`
	// CacheOnly counts the refused tasks whose every reason is a missing
	// cache file: what a full cache would import.
	CacheOnly int `json:"cache_only"`
}

// OSWorldReport is the importer's report.
type OSWorldReport struct {
	Domains  map[string]*OSWorldDomain `json:"domains"`
	Tasks    []OSWorldEntry            `json:"tasks"`
	Imported int                       `json:"imported"`
	Refused  int                       `json:"refused"`
	// Reasons counts every reason of every refused task, by kind and
	// detail ("unsupported_metric compare_table").
	Reasons map[string]int `json:"reasons"`
}

// LoadOSWorldList reads an OSWorld task list (test_all.json).
func LoadOSWorldList(file string) (map[string][]string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var m map[string][]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return m, nil
}

// ImportOSWorld converts every task under opt.Examples and writes the
// imported ones to opt.Out.
func ImportOSWorld(opt OSWorldOptions) (*OSWorldReport, error) {
	var files []string
	if opt.Only != nil {
		for dom, ids := range opt.Only {
			for _, id := range ids {
				files = append(files, filepath.Join(dom, id+".json"))
			}
		}
	} else {
		err := filepath.WalkDir(opt.Examples, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.Type().IsRegular() && strings.HasSuffix(p, ".json") {
				rel, err := filepath.Rel(opt.Examples, p)
				if err != nil {
					return err
				}
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	if opt.Out != "" {
		if err := os.MkdirAll(opt.Out, 0o755); err != nil {
			return nil, err
		}
	}
	rep := &OSWorldReport{Domains: map[string]*OSWorldDomain{}, Reasons: map[string]int{}}
	written := map[string]string{}
	for _, rel := range files {
		dom := "."
		if i := strings.IndexByte(filepath.ToSlash(rel), '/'); i >= 0 {
			dom = filepath.ToSlash(rel)[:i]
		}
		e, task := importOne(opt, dom, rel)
		if task != nil {
			if prev, dup := written[task.ID]; dup {
				e.refuse(RefuseInvalid, "task id "+task.ID+" also from "+prev)
				task = nil
			}
		}
		if task != nil {
			if err := writeOSWorldTask(opt.Out, task); err != nil {
				return nil, err
			}
			written[task.ID] = rel
			e.Task = task.ID
		}
		d := rep.Domains[dom]
		if d == nil {
			d = &OSWorldDomain{Refused: map[string]int{}}
			rep.Domains[dom] = d
		}
		d.Tasks++
		if len(e.Refused) == 0 {
			d.Imported++
			rep.Imported++
		} else {
			d.Refused[e.Refused[0].Kind]++
			only := true
			for _, r := range e.Refused {
				only = only && r.Kind == RefuseCacheFile
			}
			if only {
				d.CacheOnly++
			}
			rep.Refused++
			for _, r := range e.Refused {
				rep.Reasons[r.String()]++
			}
		}
		rep.Tasks = append(rep.Tasks, *e)
	}
	return rep, nil
}

// writeOSWorldTask writes t as out/<id>.json; the id is already sanitized,
// and the name is checked once more to stay inside out.
func writeOSWorldTask(out string, t *Task) error {
	if out == "" {
		return nil
	}
	name := t.ID + ".json"
	if name != filepath.Base(name) || !validOSWorldID.MatchString(t.ID) {
		return fmt.Errorf("import-osworld: refusing to write %q", name)
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(out, name), append(b, '\n'), 0o644)
}

// osworldHomeDirs are the folders of OSWorld's home, made in the sandbox
// home by every imported task's setup.
var osworldHomeDirs = []string{"~/Desktop", "~/Documents", "~/Downloads", "~/Music", "~/Pictures", "~/Public", "~/Templates", "~/Videos"}

// OSWorldMaxSteps is an imported task's step budget.
const OSWorldMaxSteps = 100

var validOSWorldID = regexp.MustCompile(`^osworld-[A-Za-z0-9_-]{1,100}$`)

// OSWorldTaskID is the Shinken id of OSWorld task id: osworld-<id>, with
// anything but letters, digits, - and _ dropped; "" if nothing is left.
func OSWorldTaskID(id string) string {
	var b strings.Builder
	for _, r := range id {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			b.WriteRune(r)
		}
	}
	s := b.String()
	if s == "" || len(s) > 100 {
		return ""
	}
	return "osworld-" + s
}

// oswTask is OSWorld's task file.
type oswTask struct {
	ID          string    `json:"id"`
	Instruction string    `json:"instruction"`
	Config      []oswStep `json:"config"`
	RelatedApps []string  `json:"related_apps"`
	Evaluator   struct {
		Func       json.RawMessage `json:"func"`
		Conj       string          `json:"conj"`
		Result     json.RawMessage `json:"result"`
		Expected   json.RawMessage `json:"expected"`
		Options    json.RawMessage `json:"options"`
		Postconfig []oswStep       `json:"postconfig"`
	} `json:"evaluator"`
}

type oswStep struct {
	Type       string                     `json:"type"`
	Parameters map[string]json.RawMessage `json:"parameters"`
}

// conv is one task's conversion.
type conv struct {
	opt          OSWorldOptions
	t            *oswTask
	e            *OSWorldEntry
	apps         map[string]bool
	shell        bool
	setup        []SetupStep
	instance     []SetupStep
	files        map[string]any // cloud files embedded in the verifier, by URL
	libre        bool           // the LibreOffice profile is initialized in setup
	chromium     bool           // Chromium is launched
	vlc          bool           // VLC's config is seeded in setup
	closeBrowser bool           // before scoring, Chromium is closed so its profile is on disk
}

func (e *OSWorldEntry) refuse(kind, detail string) {
	r := OSWorldReason{kind, detail}
	for _, x := range e.Refused {
		if x == r {
			return
		}
	}
	e.Refused = append(e.Refused, r)
}

func (e *OSWorldEntry) note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	for _, x := range e.Notes {
		if x == n {
			return
		}
	}
	e.Notes = append(e.Notes, n)
}

func importOne(opt OSWorldOptions, dom, rel string) (*OSWorldEntry, *Task) {
	e := &OSWorldEntry{Domain: dom, ID: strings.TrimSuffix(filepath.Base(rel), ".json")}
	if !filepath.IsLocal(rel) {
		e.refuse(RefuseInvalid, "a path outside the examples directory")
		return e, nil
	}
	b, err := os.ReadFile(filepath.Join(opt.Examples, rel))
	if err != nil {
		e.refuse(RefuseInvalid, "unreadable: "+err.Error())
		return e, nil
	}
	var t oswTask
	if err := json.Unmarshal(b, &t); err != nil || t.ID == "" || t.Instruction == "" || len(t.Evaluator.Func) == 0 {
		e.refuse(RefuseInvalid, "not an OSWorld task file")
		return e, nil
	}
	e.ID = t.ID
	id := OSWorldTaskID(t.ID)
	if id == "" {
		e.refuse(RefuseInvalid, "id")
		return e, nil
	}
	c := &conv{opt: opt, t: &t, e: e, apps: map[string]bool{}, files: map[string]any{}}
	// OSWorld's VM is an Ubuntu desktop whose home has the XDG folders
	// (tasks write to ~/Desktop without creating it).
	c.setup = append(c.setup, SetupStep{Exec: &Exec{Shell: "mkdir -p " + strings.Join(osworldHomeDirs, " "), TimeoutMS: 10000}})
	c.relatedApps()
	for _, s := range t.Config {
		c.step(s)
	}
	spec := c.evaluator()
	if len(e.Refused) > 0 {
		return e, nil
	}
	specJSON, err := json.Marshal(spec)
	if err != nil {
		e.refuse(RefuseInvalid, err.Error())
		return e, nil
	}
	task := &Task{
		ID:            id,
		Instruction:   strings.ReplaceAll(t.Instruction, OSWorldHome+"/", "~/"),
		AllowShell:    c.shell,
		Setup:         c.setup,
		InstanceSetup: c.instance,
		BeforeScore:   c.beforeScore(),
		Verifier: Verifier{
			Shell:     osworldVerifier(specJSON),
			TimeoutMS: MaxVerifierMS,
		},
		// OSWorld's harness bounds its turns (15 by default), and a turn
		// may hold several actions, each a step here: the env's own bound
		// is well above, so the harness's is the one that binds.
		MaxSteps: OSWorldMaxSteps,
	}
	for a := range c.apps {
		task.Apps = append(task.Apps, a)
	}
	sort.Strings(task.Apps)
	if err := task.Validate(); err != nil {
		e.refuse(RefuseInvalid, err.Error())
		return e, nil
	}
	return e, task
}

// osworldVerifier is the task's shell verifier: the metric library and
// the evaluator spec (base64, so nothing in it is ever shell or Python
// syntax), run by python3.
func osworldVerifier(spec []byte) string {
	return "python3 - <<'SK_OSWORLD_PY'\n" + osworldLib +
		"\nSPEC = json.loads(base64.b64decode(\"" + base64.StdEncoding.EncodeToString(spec) + "\").decode(\"utf-8\"))\nmain()\nSK_OSWORLD_PY\n"
}

// WriteText prints the report: a row per domain with its imported count
// and its refusals by kind, the totals, then every reason's count.
func (r *OSWorldReport) WriteText(w io.Writer) {
	doms := make([]string, 0, len(r.Domains))
	kinds := map[string]bool{}
	for d, c := range r.Domains {
		doms = append(doms, d)
		for k := range c.Refused {
			kinds[k] = true
		}
	}
	sort.Strings(doms)
	ks := make([]string, 0, len(kinds))
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "domain\ttasks\timported\tonly_cache")
	for _, k := range ks {
		fmt.Fprintf(tw, "\t%s", k)
	}
	fmt.Fprintln(tw)
	tot := &OSWorldDomain{Refused: map[string]int{}}
	for _, d := range doms {
		c := r.Domains[d]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d", d, c.Tasks, c.Imported, c.CacheOnly)
		tot.Tasks += c.Tasks
		tot.Imported += c.Imported
		tot.CacheOnly += c.CacheOnly
		for _, k := range ks {
			fmt.Fprintf(tw, "\t%d", c.Refused[k])
			tot.Refused[k] += c.Refused[k]
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d", tot.Tasks, tot.Imported, tot.CacheOnly)
	for _, k := range ks {
		fmt.Fprintf(tw, "\t%d", tot.Refused[k])
	}
	fmt.Fprintln(tw)
	tw.Flush()
	fmt.Fprintf(w, "\n%d imported, %d refused (a refused task counts once, under its first reason; only_cache: refused for nothing but missing cache files)\n", r.Imported, r.Refused)
	if len(r.Reasons) > 0 {
		fmt.Fprintln(w, "\nevery reason, by tasks that have it:")
		// The missing cache files are one line here; --json names each.
		reasons := map[string]int{}
		files, tasks := 0, map[string]bool{}
		for k, n := range r.Reasons {
			if strings.HasPrefix(k, RefuseCacheFile+" ") {
				files++
				continue
			}
			reasons[k] = n
		}
		for _, e := range r.Tasks {
			for _, x := range e.Refused {
				if x.Kind == RefuseCacheFile {
					tasks[e.Domain+"/"+e.ID] = true
				}
			}
		}
		if files > 0 {
			reasons[fmt.Sprintf("%s (%d distinct files; --json names them)", RefuseCacheFile, files)] = len(tasks)
		}
		rs := make([]string, 0, len(reasons))
		for k := range reasons {
			rs = append(rs, k)
		}
		sort.Slice(rs, func(i, j int) bool {
			if reasons[rs[i]] != reasons[rs[j]] {
				return reasons[rs[i]] > reasons[rs[j]]
			}
			return rs[i] < rs[j]
		})
		for _, k := range rs {
			fmt.Fprintf(w, "%5d  %s\n", reasons[k], k)
		}
	}
	if r.Imported > 0 {
		fmt.Fprintln(w, "\nimported:")
		for _, e := range r.Tasks {
			if e.Task != "" {
				fmt.Fprintf(w, "  %s (%s; %s)\n", e.Task, e.Domain, strings.Join(e.Metrics, ", "))
			}
		}
	}
}
