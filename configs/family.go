package configs

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"github.com/zeebo/xxh3"
)

// Instance is one drawn instance of a task family (docs/tasks.md): the
// family's definition with every template rendered from the parameters
// drawn for (Split, Seed). Task is what an episode runs; the rest is what the
// trainer may read of it (never the agent: see Task.Expect).
type Instance struct {
	*Task          // rendered: Instruction, InstanceSetup, Expect, Outputs, Solution, Wrong
	Family  string `json:"family"`
	Version int    `json:"version"`
	Seed    int64  `json:"seed"`
	// Params are the drawn and derived values by name.
	Params map[string]any `json:"params,omitempty"`
	// Hash identifies the instance by what the agent and the verifier meet
	// (instruction, instance setup, expectations); equal hashes are the
	// same instance whatever their seeds.
	Hash  string `json:"hash"`
	Split string `json:"split"` // SplitTrain or SplitTest
}

// Splits: every instance is in exactly one, by its hash.
const (
	SplitTrain = "train"
	SplitTest  = "test"
)

// DefaultTestPercent is a parameterized family's test split when it
// declares none.
const DefaultTestPercent = 10

// Parameterized reports whether t draws anything from the seed.
func (t *Task) Parameterized() bool { return len(t.Params) > 0 }

// TestShare is the percentage of t's instances in the test split: 0 for a
// task without parameters (its one instance is a training one).
func (t *Task) TestShare() int {
	switch {
	case !t.Parameterized():
		return 0
	case t.TestPercent != nil:
		return *t.TestPercent
	}
	return DefaultTestPercent
}

// FamilyVersion is t's version, 1 when unset.
func (t *Task) FamilyVersion() int { return max(t.Version, 1) }

// maxSplitDraws bounds the draws Instantiate makes to land in a split; a
// family whose split is that rare (or empty) is refused.
const maxSplitDraws = 200

// Instantiate draws the instance numbered seed in split: the same (family,
// version, split, seed) gives the same instance, byte for byte, on any
// machine (docs/tasks.md, "Seeds and splits"). An instance's split is fixed
// by its content hash, so two seeds that draw the same instance always
// land in the same split; Instantiate draws until it lands in the one
// asked for. Every seed names an instance of each split.
func (t *Task) Instantiate(split string, seed int64) (*Instance, error) {
	if split != SplitTrain && split != SplitTest {
		return nil, fmt.Errorf("task %s: no split %q (train or test)", t.ID, split)
	}
	if t.TestShare() == 0 && split == SplitTest {
		return nil, fmt.Errorf("task %s has no test split", t.ID)
	}
	for attempt := 0; attempt < maxSplitDraws; attempt++ {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:8], uint64(seed))
		binary.LittleEndian.PutUint64(b[8:], uint64(attempt))
		in, err := t.draw(xxh3.HashString(split + "\x00" + string(b[:])))
		if err != nil {
			return nil, fmt.Errorf("task %s %s seed %d: %w", t.ID, split, seed, err)
		}
		if in.Split == split {
			in.Seed = seed
			return in, nil
		}
	}
	return nil, fmt.Errorf("task %s: no %s instance in %d draws for seed %d", t.ID, split, maxSplitDraws, seed)
}

// draw renders the instance of one draw.
func (t *Task) draw(draw uint64) (*Instance, error) {
	in := &Instance{Family: t.ID, Version: t.FamilyVersion()}
	data := make(map[string]any, len(t.Params))
	for i := range t.Params {
		p := &t.Params[i]
		if p.Value != "" {
			v, err := render(p.Value, data)
			if err != nil {
				return nil, fmt.Errorf("param %q: %w", p.Name, err)
			}
			data[p.Name] = v
			continue
		}
		data[p.Name] = p.draw(paramRNG(t.ID, in.Version, draw, p.Name))
	}
	r := *t
	// Rendered values are decoded into fresh ones: decoding into the
	// family's own slices would write through their shared pointers.
	r.InstanceSetup, r.Expect, r.Outputs, r.Solution, r.Wrong = nil, nil, nil, nil, nil
	var err error
	fail := func(what string, err error) (*Instance, error) {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if r.Instruction, err = render(t.Instruction, data); err != nil {
		return fail("instruction", err)
	}
	if err = renderInto(t.InstanceSetup, data, &r.InstanceSetup); err != nil {
		return fail("instance", err)
	}
	if err = renderInto(t.Expect, data, &r.Expect); err != nil {
		return fail("expect", err)
	}
	if err = renderInto(t.Outputs, data, &r.Outputs); err != nil {
		return fail("outputs", err)
	}
	if err = renderInto(t.Solution, data, &r.Solution); err != nil {
		return fail("solution", err)
	}
	if err = renderInto(t.Wrong, data, &r.Wrong); err != nil {
		return fail("wrong", err)
	}
	in.Task, in.Params = &r, data
	ident, _ := json.Marshal(struct {
		I string            `json:"i"`
		S []SetupStep       `json:"s"`
		E map[string]string `json:"e"`
	}{r.Instruction, r.InstanceSetup, r.Expect})
	h := xxh3.Hash128(ident).Bytes()
	in.Hash = fmt.Sprintf("%x", h[:12])
	in.Split = SplitTrain
	if share := t.TestShare(); share > 0 && xxh3.HashString(t.ID+"\x00"+in.Hash)%100 < uint64(share) {
		in.Split = SplitTest
	}
	return in, nil
}

// render executes one template over the parameters; a string without an
// action is returned as is.
func render(text string, data map[string]any) (string, error) {
	if !strings.Contains(text, "{{") {
		return text, nil
	}
	tp, err := parsed(text)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := tp.Execute(&b, data); err != nil {
		return "", err
	}
	return b.String(), nil
}

// templates caches parsed templates by text: a family's templates are
// parsed once, not per instance. Its size is bounded by the loaded task
// definitions.
var templates sync.Map // string → *template.Template

func parsed(text string) (*template.Template, error) {
	if tp, ok := templates.Load(text); ok {
		return tp.(*template.Template), nil
	}
	tp, err := template.New("").Option("missingkey=error").Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, err
	}
	templates.Store(text, tp)
	return tp, nil
}

// renderInto renders every string inside src (a JSON-shaped value: setup
// steps, actions, a map) and decodes the result into dst.
func renderInto(src any, data map[string]any, dst any) error {
	b, err := json.Marshal(src)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return err
	}
	if tree, err = renderTree(tree, data); err != nil {
		return err
	}
	if b, err = json.Marshal(tree); err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}

func renderTree(v any, data map[string]any) (any, error) {
	switch v := v.(type) {
	case string:
		return render(v, data)
	case []any:
		for i := range v {
			var err error
			if v[i], err = renderTree(v[i], data); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k := range v {
			var err error
			if v[k], err = renderTree(v[k], data); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// templateFuncs are the functions a family's templates may call besides
// text/template's own (docs/tasks.md, "Templates").
var templateFuncs = template.FuncMap{
	"add": func(a, b any) (int64, error) { return arith(a, b, func(x, y int64) int64 { return x + y }) },
	"sub": func(a, b any) (int64, error) { return arith(a, b, func(x, y int64) int64 { return x - y }) },
	"mul": func(a, b any) (int64, error) { return arith(a, b, func(x, y int64) int64 { return x * y }) },
	"div": func(a, b any) (int64, error) {
		if y, err := toInt(b); err != nil || y == 0 {
			return 0, fmt.Errorf("div by %v", b)
		}
		return arith(a, b, func(x, y int64) int64 { return x / y })
	},
	"mod": func(a, b any) (int64, error) {
		if y, err := toInt(b); err != nil || y == 0 {
			return 0, fmt.Errorf("mod by %v", b)
		}
		return arith(a, b, func(x, y int64) int64 { return x % y })
	},
	"atoi":  toInt,
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
	"title": func(s string) string {
		if s == "" {
			return s
		}
		return strings.ToUpper(s[:1]) + s[1:]
	},
	"replace":  func(s, old, new string) string { return strings.ReplaceAll(s, old, new) },
	"repeat":   func(n int, s string) string { return strings.Repeat(s, max(0, min(n, maxDrawn))) },
	"contains": strings.Contains,
	"seq": func(n any) ([]int64, error) {
		c, err := toInt(n)
		if err != nil || c < 0 || c > maxDrawn {
			return nil, fmt.Errorf("seq %v: want 0..%d", n, maxDrawn)
		}
		out := make([]int64, c)
		for i := range out {
			out[i] = int64(i)
		}
		return out, nil
	},
	"join": func(list any, sep string) string { return strings.Join(strs(list), sep) },
	// split is join's inverse: "a\nb\n" split on "\n" is [a b] (a
	// trailing separator makes no empty last item).
	"split": func(s, sep string) []string {
		if sep == "" {
			return []string{s}
		}
		return strings.Split(strings.TrimSuffix(s, sep), sep)
	},
	"lines":   func(list any) string { return joinLines(strs(list)) },
	"sorted":  func(list any) []string { s := strs(list); sort.Strings(s); return s },
	"sortnum": sortNum,
	"reverse": func(list any) []string {
		s := strs(list)
		for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
			s[i], s[j] = s[j], s[i]
		}
		return s
	},
	"first": func(list any) string { s := strs(list); return s[0] },
	"last":  func(list any) string { s := strs(list); return s[len(s)-1] },
	"count": func(list any, v string) int {
		n := 0
		for _, x := range strs(list) {
			if x == v {
				n++
			}
		}
		return n
	},
	"sum": func(list any) (int64, error) {
		var t int64
		for _, x := range strs(list) {
			v, err := strconv.ParseInt(x, 10, 64)
			if err != nil {
				return 0, err
			}
			t += v
		}
		return t, nil
	},
	// cents sums decimal texts exactly, as a decimal text with 2 places.
	"sumcents": func(list any) (string, error) {
		var t int64
		for _, x := range strs(list) {
			c, err := cents(x)
			if err != nil {
				return "", err
			}
			t += c
		}
		sign := ""
		if t < 0 {
			sign, t = "-", -t
		}
		return fmt.Sprintf("%s%d.%02d", sign, t/100, t%100), nil
	},
	"maxnum": func(list any) (string, error) { s, err := sortNum(list); return s[len(s)-1], err },
	"minnum": func(list any) (string, error) { s, err := sortNum(list); return s[0], err },
	"csv":    func(t *Table, sep string) string { return t.text(sep) },
	"col":    func(t *Table, name string) ([]string, error) { return t.column(name) },
	"where": func(t *Table, name, value string) (*Table, error) {
		j, err := t.index(name)
		if err != nil {
			return nil, err
		}
		out := &Table{Header: t.Header}
		for _, r := range t.Rows {
			if r[j] == value {
				out.Rows = append(out.Rows, r)
			}
		}
		return out, nil
	},
	"shq": ShellQuote,
	"pdf": pdfBase64,
	"png": pngBase64,
	"b64": func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) },
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"fods": fodsDoc,
	"fodt": fodtDoc,
}

func (t *Table) index(name string) (int, error) {
	for j, h := range t.Header {
		if h == name {
			return j, nil
		}
	}
	return 0, fmt.Errorf("table has no column %q", name)
}

func (t *Table) column(name string) ([]string, error) {
	j, err := t.index(name)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(t.Rows))
	for i, r := range t.Rows {
		out[i] = r[j]
	}
	return out, nil
}

// text writes the table with a header line, cells joined by sep, one row a line.
func (t *Table) text(sep string) string {
	lines := []string{strings.Join(t.Header, sep)}
	for _, r := range t.Rows {
		lines = append(lines, strings.Join(r, sep))
	}
	return joinLines(lines)
}

func joinLines(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return strings.Join(s, "\n") + "\n"
}

// strs turns a list parameter into strings.
func strs(list any) []string {
	switch l := list.(type) {
	case []string:
		return append([]string(nil), l...)
	case []int64:
		out := make([]string, len(l))
		for i, v := range l {
			out[i] = strconv.FormatInt(v, 10)
		}
		return out
	case []any:
		out := make([]string, len(l))
		for i, v := range l {
			out[i] = cellText(v)
		}
		return out
	case string:
		return strings.Fields(l)
	}
	return nil
}

func toInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case int:
		return int64(v), nil
	case string:
		return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	}
	return 0, fmt.Errorf("%v is not an integer", v)
}

func arith(a, b any, f func(x, y int64) int64) (int64, error) {
	x, err := toInt(a)
	if err != nil {
		return 0, err
	}
	y, err := toInt(b)
	if err != nil {
		return 0, err
	}
	return f(x, y), nil
}

// cents reads a decimal text with at most 2 places as hundredths.
func cents(s string) (int64, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 2 {
		return 0, fmt.Errorf("%q has more than 2 decimals", s)
	}
	frac += strings.Repeat("0", 2-len(frac))
	w, err1 := strconv.ParseInt(whole, 10, 64)
	f, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%q is not a decimal", s)
	}
	c := w*100 + f
	if neg {
		c = -c
	}
	return c, nil
}

// sortNum sorts decimal texts by value.
func sortNum(list any) ([]string, error) {
	s := strs(list)
	vals := make([]float64, len(s))
	for i, x := range s {
		v, err := strconv.ParseFloat(x, 64)
		if err != nil {
			return nil, err
		}
		vals[i] = v
	}
	if len(s) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	idx := make([]int, len(s))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return vals[idx[a]] < vals[idx[b]] })
	out := make([]string, len(s))
	for i, j := range idx {
		out[i] = s[j]
	}
	return out, nil
}

// ShellQuote quotes v's text for a POSIX shell.
func ShellQuote(v any) string {
	return "'" + strings.ReplaceAll(cellText(v), "'", `'\''`) + "'"
}

// validateFamily checks a family's parameters and renders a few instances,
// so a template mistake fails at load, not mid-episode.
func (t *Task) validateFamily() error {
	if t.Version < 0 {
		return fmt.Errorf("task %s: version must be positive", t.ID)
	}
	if t.TestPercent != nil && (*t.TestPercent < 0 || *t.TestPercent > 50) {
		return fmt.Errorf("task %s: test_percent must be within 0..50", t.ID)
	}
	seen := map[string]bool{}
	for i := range t.Params {
		p := &t.Params[i]
		if p.Name == "" || seen[p.Name] || strings.ContainsAny(p.Name, " .-{}") {
			return fmt.Errorf("task %s: param %d: name %q must be unique, non-empty, an identifier", t.ID, i, p.Name)
		}
		seen[p.Name] = true
		if err := p.validate(false); err != nil {
			return fmt.Errorf("task %s: %w", t.ID, err)
		}
	}
	for k := range t.Expect {
		if k == "" || strings.IndexFunc(k, func(r rune) bool {
			return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_')
		}) >= 0 {
			return fmt.Errorf("task %s: expect key %q must be letters, digits and _", t.ID, k)
		}
	}
	for seed := int64(0); seed < 3; seed++ {
		in, err := t.Instantiate(SplitTrain, seed)
		if err != nil {
			return err
		}
		for i, st := range in.InstanceSetup {
			if st.PutFile != nil {
				if _, err := st.PutFile.Bytes(); err != nil {
					return fmt.Errorf("task %s: instance step %d: %w", t.ID, i, err)
				}
			}
			if st.Web != nil && st.Web.Data != "" && !json.Valid([]byte(st.Web.Data)) {
				return fmt.Errorf("task %s: instance step %d: web data for %s is not JSON", t.ID, i, st.Web.App)
			}
		}
		for i, step := range in.Solution {
			for _, a := range step {
				if !a.Verb.Known() {
					return fmt.Errorf("task %s: solution step %d: unknown verb %q", t.ID, i, a.Verb)
				}
			}
		}
	}
	return nil
}

// ExpectEnv is the verifier's view of the instance's expectations: one
// SK_EXPECT_<KEY>=value per key, in key order. It reaches the sandbox only
// with the verifier, after the agent is frozen.
func (t *Task) ExpectEnv() []string {
	keys := make([]string, 0, len(t.Expect))
	for k := range t.Expect {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, len(keys))
	for i, k := range keys {
		env[i] = "SK_EXPECT_" + strings.ToUpper(k) + "=" + t.Expect[k]
	}
	return env
}
