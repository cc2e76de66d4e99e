package configs

import (
	"crypto/sha1"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
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
	opt      OSWorldOptions
	t        *oswTask
	e        *OSWorldEntry
	apps     map[string]bool
	shell    bool
	setup    []SetupStep
	instance []SetupStep
	files    map[string]any // cloud files embedded in the verifier, by URL
	libre    bool           // the LibreOffice profile is initialized in setup
	chromium bool           // Chromium is launched
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
		Verifier: Verifier{
			Shell:     osworldVerifier(specJSON),
			TimeoutMS: MaxVerifierMS,
		},
		MaxSteps: 15,
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

// relatedApps maps the task's related_apps to the apps it may launch, and
// refuses the apps the sandbox image does not ship.
func (c *conv) relatedApps() {
	for _, a := range c.t.RelatedApps {
		switch strings.ReplaceAll(strings.ToLower(strings.TrimSpace(a)), " ", "_") {
		case "chrome", "browser":
			c.apps["chromium"] = true
		case "os", "terminal":
			c.apps["xterm"] = true
			c.shell = true
		case "libreoffice_calc", "calc", "libreoffice_writer", "writer", "libreoffice":
			c.apps["libreoffice"] = true
		case "pdf":
			c.apps["mupdf"] = true
		case "image":
			c.apps["feh"] = true
		default:
			c.e.refuse(RefuseApp, a)
		}
	}
	if c.apps["xterm"] {
		c.setup = append(c.setup,
			SetupStep{LaunchApp: &LaunchApp{App: "xterm", Args: []string{"-geometry", "100x30+0+0"}}},
			SetupStep{WaitWindow: &WaitWindow{Match: "xterm", TimeoutMS: 10000}})
		c.e.note("a terminal (xterm) is open from the start, as OSWorld's desktop offers one")
	}
}

func rawString(m map[string]json.RawMessage, k string) (string, bool) {
	var s string
	if v, ok := m[k]; ok && json.Unmarshal(v, &s) == nil {
		return s, true
	}
	return "", false
}

// command reads a step's or getter's command: a string (run by a shell) or
// an argv list.
func command(m map[string]json.RawMessage) (argv []string, shell string, ok bool) {
	v, has := m["command"]
	if !has {
		return nil, "", false
	}
	if json.Unmarshal(v, &shell) == nil {
		return nil, shell, true
	}
	if json.Unmarshal(v, &argv) == nil && len(argv) > 0 {
		return argv, "", true
	}
	return nil, "", false
}

func (c *conv) step(s oswStep) {
	p := s.Parameters
	switch s.Type {
	case "launch":
		argv, sh, ok := command(p)
		if !ok {
			c.e.refuse(RefuseConfig, "launch without a command")
			return
		}
		if argv == nil {
			argv = strings.Fields(sh)
		}
		c.launch(argv)
	case "open":
		f, ok := rawString(p, "path")
		if !ok {
			c.e.refuse(RefuseConfig, "open without a path")
			return
		}
		c.open(f)
	case "download":
		c.download(p)
	case "execute", "command":
		argv, sh, ok := command(p)
		if !ok {
			c.e.refuse(RefuseConfig, s.Type+" without a command")
			return
		}
		if isFocusClick(argv) {
			c.e.note("dropped: a pyautogui click that focuses the desktop")
			return
		}
		cmd, ok := c.shellCommand(argv, sh, "HOME")
		if !ok {
			return
		}
		c.instance = append(c.instance, SetupStep{Exec: &Exec{Shell: cmd, TimeoutMS: 30000}})
	case "sleep":
		var secs float64
		if v, ok := p["seconds"]; ok {
			_ = json.Unmarshal(v, &secs)
		}
		secs = min(max(secs, 0), 10)
		c.instance = append(c.instance, SetupStep{Exec: &Exec{Argv: []string{"sleep", fmt.Sprintf("%g", secs)}, TimeoutMS: 15000}})
	case "activate_window":
		c.e.note("dropped: activate_window (the settle after setup covers it)")
	case "chrome_open_tabs":
		var urls []string
		if v, ok := p["urls_to_open"]; ok {
			_ = json.Unmarshal(v, &urls)
		}
		var open []string
		for _, u := range urls {
			pu, err := url.Parse(u)
			if err != nil || pu.Scheme != "http" || !strings.HasSuffix(pu.Hostname(), ".test") {
				c.e.refuse(RefuseNetwork, hostOf(u))
				continue
			}
			open = append(open, u)
		}
		if len(open) > 0 {
			if !c.chromium {
				c.launch([]string{"chromium"})
			}
			c.instance = append(c.instance, SetupStep{Browser: &Browser{Open: open, TimeoutMS: 30000}})
		}
	case "googledrive", "login":
		c.e.refuse(RefuseNetwork, s.Type)
	default:
		c.e.refuse(RefuseConfig, s.Type)
	}
}

func hostOf(u string) string {
	if pu, err := url.Parse(u); err == nil && pu.Host != "" {
		return pu.Host
	}
	return u
}

// isFocusClick is OSWorld's usual first step, a pyautogui click in the
// middle of the screen (and a sleep) to focus the desktop.
func isFocusClick(argv []string) bool {
	if len(argv) != 3 || (argv[0] != "python" && argv[0] != "python3") || argv[1] != "-c" {
		return false
	}
	return focusClick.MatchString(strings.ReplaceAll(argv[2], " ", ""))
}

var focusClick = regexp.MustCompile(`^importpyautogui;(importtime;)?pyautogui\.click\(\d+,\d+\);(time\.sleep\([\d.]+\);?)?$`)

// launch maps a launched program to an app Shinken ships.
func (c *conv) launch(argv []string) {
	prog := path.Base(argv[0])
	switch prog {
	case "google-chrome", "chromium", "chromium-browser":
		for _, a := range argv[1:] {
			if !strings.HasPrefix(a, "--") {
				c.e.refuse(RefuseNetwork, hostOf(a))
			}
		}
		c.apps["chromium"] = true
		c.chromium = true
		c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: "chromium"}},
			SetupStep{WaitWindow: &WaitWindow{Match: "Chromium", TimeoutMS: 30000}})
		c.e.note("launch %s: Chromium, without OSWorld's flags (its DevTools port)", prog)
	case "socat":
		c.e.note("dropped: socat (OSWorld's forward to Chrome's DevTools port; Shinken drives Chromium over its own pipe)")
	case "libreoffice", "soffice":
		var file string
		var flags []string
		for _, a := range argv[1:] {
			switch {
			case a == "--calc" || a == "--writer":
				flags = append(flags, a)
			case strings.HasPrefix(a, "-"):
				c.e.refuse(RefuseConfig, "libreoffice "+a)
			case file == "":
				file = a
			default:
				c.e.refuse(RefuseConfig, "libreoffice with several files")
			}
		}
		c.libreoffice(file, flags)
	case "xterm", "gnome-terminal":
		c.apps["xterm"] = true
		c.shell = true
		c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: "xterm", Args: []string{"-geometry", "100x30+0+0"}}},
			SetupStep{WaitWindow: &WaitWindow{Match: "xterm", TimeoutMS: 10000}})
	case "mousepad", "pcmanfm", "galculator", "mupdf", "feh":
		// The other apps the image ships, started as OSWorld starts them;
		// a file argument in the home is mapped to the sandbox home.
		var args []string
		for _, a := range argv[1:] {
			if rel, ok := homeRel(a); ok && strings.HasPrefix(a, "/") {
				a = rel
				if a == "" {
					a = "."
				}
			} else if strings.HasPrefix(a, "/") {
				c.e.refuse(RefusePath, a)
				return
			}
			args = append(args, a)
		}
		c.apps[prog] = true
		c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: prog, Args: args}})
		c.e.note("launch %s: no window is waited for (the settle after setup covers it)", prog)
	default:
		c.e.refuse(RefuseApp, prog)
	}
}

// libreProfile is the LibreOffice profile the shipped office tasks use.
const libreProfile = "-env:UserInstallation=file:///home/agent/.config/libreoffice/4"

func (c *conv) libreoffice(file string, flags []string) {
	c.apps["libreoffice"] = true
	if !c.libre {
		c.libre = true
		// As the shipped office tasks: the golden initializes the profile.
		c.setup = append(c.setup,
			SetupStep{LaunchApp: &LaunchApp{App: "libreoffice", Args: []string{libreProfile, "--headless", "--terminate_after_init"}}},
			SetupStep{Exec: &Exec{Shell: "for i in $(seq 200); do pgrep -u $(id -u) soffice >/dev/null || exit 0; sleep 0.1; done; exit 1", TimeoutMS: 30000}})
	}
	args := append([]string{libreProfile}, flags...)
	match := "LibreOffice"
	if file != "" {
		rel, ok := homeRel(file)
		if !ok || rel == "" {
			c.e.refuse(RefusePath, file)
			return
		}
		args = append(args, rel)
		match = path.Base(rel)
	}
	c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: "libreoffice", Args: args}},
		SetupStep{WaitWindow: &WaitWindow{Match: match, TimeoutMS: 30000}})
}

// open opens a file in the app Shinken ships for its kind.
func (c *conv) open(file string) {
	rel, ok := homeRel(file)
	if !ok || rel == "" {
		c.e.refuse(RefusePath, file)
		return
	}
	switch ext := strings.ToLower(path.Ext(rel)); ext {
	case ".xlsx", ".xls", ".ods", ".fods", ".csv", ".docx", ".doc", ".odt", ".fodt", ".rtf":
		c.libreoffice(file, nil)
	case ".pptx", ".ppt", ".odp":
		c.e.refuse(RefuseApp, "libreoffice_impress")
	case ".pdf":
		c.app("mupdf", rel)
	case ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp":
		c.app("feh", rel)
	case ".txt", ".md", ".py", ".json", ".sh", ".html", ".css", ".js", ".yaml", ".yml", ".ini", ".conf", ".log", ".tex":
		c.app("mousepad", rel)
	default:
		c.e.refuse(RefuseConfig, "open "+ext)
	}
}

func (c *conv) app(app, rel string) {
	c.apps[app] = true
	c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: app, Args: []string{rel}}},
		SetupStep{WaitWindow: &WaitWindow{Match: path.Base(rel), TimeoutMS: 15000}})
}

// homeRel maps an OSWorld VM path in the user's home to one relative to
// the sandbox home ("" for the home itself); false for any other path or
// one that climbs out.
func homeRel(p string) (string, bool) {
	var rest string
	switch {
	case p == OSWorldHome || p == "~":
		return "", true
	case strings.HasPrefix(p, OSWorldHome+"/"):
		rest = p[len(OSWorldHome)+1:]
	case strings.HasPrefix(p, "~/"):
		rest = p[2:]
	default:
		return "", false
	}
	if strings.ContainsAny(rest, "\x00\n") {
		return "", false
	}
	for _, part := range strings.Split(rest, "/") {
		if part == ".." {
			return "", false
		}
	}
	rest = path.Clean(rest)
	if rest == "." {
		return "", true
	}
	return rest, true
}

// download puts each file from the cache at its path, and checks its
// sha256 in the sandbox.
func (c *conv) download(p map[string]json.RawMessage) {
	var files []struct {
		URL  string `json:"url"`
		Path string `json:"path"`
	}
	if v, ok := p["files"]; !ok || json.Unmarshal(v, &files) != nil {
		c.e.refuse(RefuseConfig, "download without files")
		return
	}
	for _, f := range files {
		rel, ok := homeRel(f.Path)
		if !ok || rel == "" {
			c.e.refuse(RefusePath, f.Path)
			continue
		}
		b, ok := c.cacheFile(f.URL, path.Base(rel))
		if !ok {
			continue
		}
		sum := sha256.Sum256(b)
		c.instance = append(c.instance,
			SetupStep{PutFile: &PutFile{Path: "~/" + rel, Text: base64.StdEncoding.EncodeToString(b), Base64: true}},
			SetupStep{Exec: &Exec{Shell: "printf '%s  %s\\n' " + hex.EncodeToString(sum[:]) + " " + ShellQuote(rel) + " | sha256sum -c --quiet", TimeoutMS: 10000}})
	}
}

// cacheFile finds a file OSWorld would download from rawURL and name
// name (docs/osworld.md, "The cache"): <cache>/<task id>/<name>, OSWorld's
// own cache name <cache>/<task id>/<uuid5(url)>_<name>, then
// <cache>/<name> and <cache>/<basename of the URL's path>.
func (c *conv) cacheFile(rawURL, name string) ([]byte, bool) {
	if c.opt.Cache != "" && c.t.ID == filepath.Base(c.t.ID) && !strings.HasPrefix(c.t.ID, ".") {
		cands := []string{
			filepath.Join(c.opt.Cache, c.t.ID, name),
			filepath.Join(c.opt.Cache, c.t.ID, uuid5URL(rawURL)+"_"+name),
			filepath.Join(c.opt.Cache, name),
		}
		if u, err := url.Parse(rawURL); err == nil {
			if b := path.Base(u.Path); b != "." && b != "/" && b != "download" && b != "uc" {
				cands = append(cands, filepath.Join(c.opt.Cache, b))
			}
		}
		for _, f := range cands {
			if filepath.Base(f) == "." || strings.Contains(filepath.Base(f), "..") {
				continue
			}
			st, err := os.Lstat(f)
			if err != nil || !st.Mode().IsRegular() {
				continue
			}
			if st.Size() > OSWorldMaxFile {
				c.e.refuse(RefuseCacheTooBig, name)
				return nil, false
			}
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			return b, true
		}
	}
	c.e.refuse(RefuseCacheFile, name)
	return nil, false
}

// uuid5URL is uuid.uuid5(uuid.NAMESPACE_URL, u), the name OSWorld's
// downloader gives a cached file.
func uuid5URL(u string) string {
	ns := []byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	h := sha1.Sum(append(ns, u...))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}

// evaluator converts the evaluator into the library's spec.
func (c *conv) evaluator() map[string]any {
	ev := &c.t.Evaluator
	for _, s := range ev.Postconfig {
		switch s.Type {
		case "sleep", "activate_window":
			c.e.note("dropped: postconfig %s (the agent is frozen and the state settled before scoring)", s.Type)
		default:
			// Shinken never acts for the agent after the episode (no
			// saving its work, no keys pressed).
			c.e.refuse(RefuseConfig, "postconfig:"+s.Type)
		}
	}
	var funcs []string
	var one string
	list := false
	if json.Unmarshal(ev.Func, &one) == nil {
		funcs = []string{one}
	} else if json.Unmarshal(ev.Func, &funcs) == nil && len(funcs) > 0 {
		list = true
	} else {
		c.e.refuse(RefuseInvalid, "evaluator func")
		return nil
	}
	c.e.Metrics = funcs
	if !list && one == "infeasible" {
		return map[string]any{"func": "infeasible"}
	}
	for _, f := range funcs {
		if !osworldMetrics[f] {
			c.e.refuse(RefuseMetric, f)
		}
	}
	getters := func(raw json.RawMessage, expected bool) any {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		if list {
			var gs []map[string]any
			if json.Unmarshal(raw, &gs) != nil || len(gs) != len(funcs) {
				c.e.refuse(RefuseInvalid, "evaluator getters do not match func")
				return nil
			}
			out := make([]any, len(gs))
			for i, g := range gs {
				if g != nil {
					out[i] = c.getter(g)
				}
			}
			return out
		}
		var g map[string]any
		if json.Unmarshal(raw, &g) != nil {
			c.e.refuse(RefuseInvalid, "evaluator getter")
			return nil
		}
		if g == nil {
			return nil
		}
		return c.getter(g)
	}
	spec := map[string]any{"func": json.RawMessage(ev.Func), "files": c.files}
	if ev.Conj != "" {
		if ev.Conj != "and" && ev.Conj != "or" {
			c.e.refuse(RefuseInvalid, "conj "+ev.Conj)
		}
		spec["conj"] = ev.Conj
	}
	spec["result"] = getters(ev.Result, false)
	if g := getters(ev.Expected, true); g != nil {
		spec["expected"] = g
	}
	if len(ev.Options) > 0 && string(ev.Options) != "null" {
		spec["options"] = json.RawMessage(ev.Options)
	}
	return spec
}

// osworldMetrics are the metrics osworld_lib.py implements.
var osworldMetrics = map[string]bool{
	"exact_match": true, "check_include_exclude": true, "is_in_list": true, "literal_match": true,
	"fuzzy_match": true, "check_direct_json_object": true, "compare_text_file": true,
	"diff_text_file": true, "compare_csv": true, "file_contains": true, "check_list": true,
}

// getter converts one getter spec, mapping its paths and commands.
func (c *conv) getter(g map[string]any) map[string]any {
	typ, _ := g["type"].(string)
	out := map[string]any{}
	for k, v := range g {
		out[k] = v
	}
	switch typ {
	case "rule":
	case "vm_file":
		if truthy(g["time_suffix"]) {
			c.e.refuse(RefuseGetter, "vm_file:time_suffix")
		}
		mapPath := func(v any) any {
			s, _ := v.(string)
			rel, ok := homeRel(s)
			if !ok || rel == "" {
				c.e.refuse(RefusePath, s)
				return s
			}
			return "~/" + rel
		}
		if ps, ok := g["path"].([]any); ok {
			m := make([]any, len(ps))
			for i, p := range ps {
				m[i] = mapPath(p)
			}
			out["path"] = m
		} else {
			out["path"] = mapPath(g["path"])
		}
	case "cloud_file":
		urls, dests := []any{g["path"]}, []any{g["dest"]}
		if truthy(g["multi"]) {
			urls, _ = g["path"].([]any)
			dests, _ = g["dest"].([]any)
		}
		for i, u := range urls {
			us, _ := u.(string)
			var ds string
			if i < len(dests) {
				ds, _ = dests[i].(string)
			}
			if ds == "" {
				ds = path.Base(us)
			}
			b, ok := c.cacheFile(us, path.Base(ds))
			if !ok {
				continue
			}
			if len(b) > 1<<20 {
				c.e.refuse(RefuseCacheTooBig, ds)
				continue
			}
			sum := sha256.Sum256(b)
			c.files[us] = map[string]string{"sha256": hex.EncodeToString(sum[:]), "b64": base64.StdEncoding.EncodeToString(b)}
		}
	case "vm_command_line":
		raw, _ := json.Marshal(g)
		var m map[string]json.RawMessage
		_ = json.Unmarshal(raw, &m)
		argv, sh, ok := command(m)
		if !ok {
			c.e.refuse(RefuseInvalid, "vm_command_line without a command")
			return out
		}
		cmd, ok := c.shellCommand(argv, sh, "AGENT_HOME")
		if ok {
			out["command"] = cmd
			delete(out, "shell")
		}
	default:
		c.e.refuse(RefuseGetter, typ)
	}
	return out
}

// truthy is Python's truth of a JSON value, as OSWorld's getters test
// their flags (some tasks write "multi": "true").
func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return false
}

// shellCommand is an OSWorld command (argv, or a shell string) as one
// command for sh, with the VM home's paths mapped to $homeVar; it refuses
// the programs the sandbox lacks. OSWorld runs "python"; Debian's is
// python3.
func (c *conv) shellCommand(argv []string, sh, homeVar string) (string, bool) {
	if argv != nil {
		if argv[0] == "python" {
			argv = append([]string{"python3"}, argv[1:]...)
		}
		if !c.programsOK([]string{path.Base(argv[0])}) {
			return "", false
		}
		if argv[0] == "python3" && len(argv) >= 3 && argv[1] == "-c" && !c.modulesOK(argv[2]) {
			return "", false
		}
		q := make([]string, len(argv))
		for i, a := range argv {
			if rel, ok := homeRel(a); ok && (a == OSWorldHome || strings.HasPrefix(a, OSWorldHome+"/")) {
				q[i] = `"$` + homeVar + `"`
				if rel != "" {
					q[i] += ShellQuote("/" + rel)
				}
			} else {
				q[i] = ShellQuote(a)
			}
		}
		return strings.Join(q, " "), true
	}
	progs, ok := shellPrograms(sh)
	if !ok {
		c.e.refuse(RefuseConfig, "a shell command the importer cannot read")
		return "", false
	}
	if !c.programsOK(progs) {
		return "", false
	}
	return mapHomeInShell(sh, homeVar), true
}

func (c *conv) programsOK(progs []string) bool {
	ok := true
	for _, p := range progs {
		if !sandboxPrograms[p] {
			c.e.refuse(RefuseProgram, p)
			ok = false
		}
	}
	return ok
}

var pyImport = regexp.MustCompile(`(?:^|[;\n]\s*)(?:import\s+([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)|from\s+([A-Za-z_][\w.]*)\s+import)`)

// modulesOK refuses a python3 -c program that imports a module Debian's
// python3 in the image lacks.
func (c *conv) modulesOK(code string) bool {
	ok := true
	for _, m := range pyImport.FindAllStringSubmatch(code, -1) {
		names := m[2]
		if m[1] != "" {
			names = m[1]
		}
		for _, n := range strings.Split(names, ",") {
			n = strings.TrimSpace(n)
			if i := strings.IndexByte(n, '.'); i >= 0 {
				n = n[:i]
			}
			if n != "" && !pythonStdlib[n] {
				c.e.refuse(RefusePythonModule, n)
				ok = false
			}
		}
	}
	return ok
}

var pythonStdlib = map[string]bool{
	"os": true, "sys": true, "time": true, "json": true, "re": true, "subprocess": true, "shutil": true,
	"pathlib": true, "glob": true, "csv": true, "datetime": true, "math": true, "random": true,
	"hashlib": true, "base64": true, "io": true, "tempfile": true, "string": true, "collections": true,
}

// sandboxPrograms are the commands a sandbox's sh can run: its builtins,
// and the programs of Debian's essential set and the image
// (images/packages.txt) that OSWorld's commands use.
var sandboxPrograms = map[string]bool{}

func init() {
	for _, p := range strings.Fields(`: . [ cd echo printf test true false exit export read set unset eval exec
		shift return local pwd command type wait kill trap umask
		cat ls mkdir rmdir rm cp mv touch chmod ln head tail wc sort uniq cut tr tee date sleep
		basename dirname find grep egrep fgrep sed awk mawk xargs stat du df env readlink realpath seq expr id
		whoami diff cmp gzip gunzip tar md5sum sha256sum mktemp nl fold paste join comm split od base64 yes
		timeout nproc uname hostname which sh bash dash python3 pgrep pkill ps
		xterm mousepad pcmanfm galculator mupdf feh chromium libreoffice soffice pdftotext`) {
		sandboxPrograms[p] = true
	}
}

var shellName = regexp.MustCompile(`^[A-Za-z_]\w*$`)

var shellKeywords = map[string]bool{"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true,
	"done": true, "while": true, "until": true, "!": true, "{": true, "}": true, "time": true}

// shellPrograms lists the programs a shell command runs: the first word of
// each simple command (after assignments and keywords). It is a reader
// for OSWorld's short commands, not a shell parser: a for or case loop,
// a function definition, a here-document or an unbalanced quote is
// reported as not readable.
func shellPrograms(sh string) ([]string, bool) {
	var progs []string
	word := strings.Builder{}
	var words []string
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	cmdEnd := func() bool {
		flush()
		for len(words) > 0 {
			w := words[0]
			if shellKeywords[w] {
				words = words[1:]
				continue
			}
			if i := strings.IndexByte(w, '='); i > 0 && shellName.MatchString(w[:i]) {
				words = words[1:]
				continue
			}
			break
		}
		if len(words) > 0 {
			w := words[0]
			if w == "for" || w == "case" || w == "function" || strings.HasSuffix(w, "()") || strings.ContainsAny(w, "$`*?") {
				return false
			}
			progs = append(progs, path.Base(w))
		}
		words = nil
		return true
	}
	for i := 0; i < len(sh); i++ {
		ch := sh[i]
		switch {
		case ch == '\\' && i+1 < len(sh):
			word.WriteByte(sh[i+1])
			inWord = true
			i++
		case ch == '\'':
			j := strings.IndexByte(sh[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			word.WriteString(sh[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case ch == '"':
			j := i + 1
			for ; j < len(sh) && sh[j] != '"'; j++ {
				if sh[j] == '\\' {
					j++
				} else if sh[j] == '`' || (sh[j] == '$' && j+1 < len(sh) && sh[j+1] == '(') {
					return nil, false // a command inside double quotes
				}
			}
			if j >= len(sh) {
				return nil, false
			}
			word.WriteString(sh[i+1 : j])
			inWord = true
			i = j
		case ch == '<' && i+1 < len(sh) && sh[i+1] == '<':
			return nil, false
		case ch == '$' && i+1 < len(sh) && sh[i+1] == '(':
			if i+2 < len(sh) && sh[i+2] == '(' {
				return nil, false
			}
			word.WriteString("$")
			inWord = true
			if !cmdEnd() {
				return nil, false
			}
			i++
		case ch == '`':
			return nil, false
		case ch == ';' || ch == '&' || ch == '|' || ch == '\n' || ch == '(' || ch == ')':
			if !cmdEnd() {
				return nil, false
			}
		case ch == ' ' || ch == '\t':
			flush()
		case ch == '#' && !inWord:
			j := strings.IndexByte(sh[i:], '\n')
			if j < 0 {
				i = len(sh)
			} else {
				i += j - 1
			}
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	if !cmdEnd() {
		return nil, false
	}
	return progs, true
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// mapHomeInShell rewrites the VM home in a shell command to $homeVar,
// quoted for where it stands: outside quotes "$V", inside double quotes
// ${V}, inside single quotes '"$V"' (the quote closed and reopened). With
// homeVar AGENT_HOME (a verifier's command) a leading ~ and $HOME are
// mapped too, as the verifier's own home is not the agent's.
func mapHomeInShell(sh, homeVar string) string {
	var b strings.Builder
	const (
		none = iota
		single
		double
	)
	state := none
	atHome := func(i int) bool {
		if !strings.HasPrefix(sh[i:], OSWorldHome) {
			return false
		}
		j := i + len(OSWorldHome)
		return j == len(sh) || !(isWordByte(sh[j]) || sh[j] == '-' || sh[j] == '.')
	}
	for i := 0; i < len(sh); i++ {
		ch := sh[i]
		if homeVar == "AGENT_HOME" && state != single {
			// $HOME in a verifier's command is the verifier's own.
			if strings.HasPrefix(sh[i:], "${HOME}") {
				b.WriteString("${AGENT_HOME}")
				i += len("${HOME}") - 1
				continue
			}
			if strings.HasPrefix(sh[i:], "$HOME") && (i+5 == len(sh) || !isWordByte(sh[i+5])) {
				b.WriteString("$AGENT_HOME")
				i += len("$HOME") - 1
				continue
			}
		}
		if atHome(i) {
			switch state {
			case none:
				b.WriteString(`"$` + homeVar + `"`)
			case double:
				b.WriteString("${" + homeVar + "}")
			case single:
				b.WriteString(`'"$` + homeVar + `"'`)
			}
			i += len(OSWorldHome) - 1
			continue
		}
		switch state {
		case none:
			switch ch {
			case '\\':
				b.WriteByte(ch)
				if i+1 < len(sh) {
					i++
					b.WriteByte(sh[i])
				}
				continue
			case '\'':
				state = single
			case '"':
				state = double
			case '~':
				if homeVar == "AGENT_HOME" && (i == 0 || strings.IndexByte(" \t\n;&|(=", sh[i-1]) >= 0) &&
					(i+1 == len(sh) || strings.IndexByte("/ \t\n;&|)", sh[i+1]) >= 0) {
					b.WriteString(`"$AGENT_HOME"`)
					continue
				}
			}
		case single:
			if ch == '\'' {
				state = none
			}
		case double:
			switch ch {
			case '\\':
				b.WriteByte(ch)
				if i+1 < len(sh) {
					i++
					b.WriteByte(sh[i])
				}
				continue
			case '"':
				state = none
			}
		}
		b.WriteByte(ch)
	}
	return b.String()
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
