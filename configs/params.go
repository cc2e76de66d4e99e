package configs

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/zeebo/xxh3"
)

// Param is one typed parameter of a task family (docs/tasks.md,
// "Parameters"): its value is drawn from the instance's seed, or computed
// from the parameters before it (Value). Exactly one kind is set.
type Param struct {
	Name string `json:"name"`

	Int    *IntParam    `json:"int,omitempty"`    // an integer in [min, max]
	Number *NumberParam `json:"number,omitempty"` // a decimal in [min, max], as text with fixed decimals
	Choice []string     `json:"choice,omitempty"` // one of these strings
	Word   string       `json:"word,omitempty"`   // one word of a built-in list (Lists)
	Sample *SampleParam `json:"sample,omitempty"` // distinct strings from a list
	Ints   *IntsParam   `json:"ints,omitempty"`   // a list of integers
	Person bool         `json:"person,omitempty"` // "First Last"
	Date   *DateParam   `json:"date,omitempty"`   // YYYY-MM-DD in [from, to]
	Text   *TextParam   `json:"text,omitempty"`   // lines of generated words
	Table  *TableParam  `json:"table,omitempty"`  // rows of typed columns (CSV, config files)
	// Value is a template over the parameters before this one: a derived
	// value (a file name built from a word, an answer computed from a table).
	Value string `json:"value,omitempty"`
}

// IntParam draws an integer in [Min, Max].
type IntParam struct {
	Min int64 `json:"min"`
	Max int64 `json:"max"`
}

// NumberParam draws a decimal in [Min, Max] with Decimals digits after the
// point, returned as its exact text ("12.50"), so templates and verifiers
// compare strings, never floats.
type NumberParam struct {
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	Decimals int     `json:"decimals"`
}

// SampleParam draws Count distinct strings (in draw order) from From, or
// from the built-in list named List.
type SampleParam struct {
	From  []string `json:"from,omitempty"`
	List  string   `json:"list,omitempty"`
	Count Span     `json:"count"`
}

// IntsParam draws Count integers in [Min, Max]; Distinct forbids repeats.
type IntsParam struct {
	Count    Span  `json:"count"`
	Min      int64 `json:"min"`
	Max      int64 `json:"max"`
	Distinct bool  `json:"distinct,omitempty"`
}

// DateParam draws a date in [From, To] (YYYY-MM-DD).
type DateParam struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// TextParam draws Lines lines of Words words each from the built-in list
// named List (default "words").
type TextParam struct {
	Lines Span   `json:"lines"`
	Words Span   `json:"words"`
	List  string `json:"list,omitempty"`
}

// TableParam draws Rows rows; each column is drawn by its own Param (any
// kind but Table, Text and Value). A column with Unique set never repeats a
// value down the table.
type TableParam struct {
	Rows    Span     `json:"rows"`
	Columns []Column `json:"columns"`
}

// Column is one column of a TableParam.
type Column struct {
	Param
	Unique bool `json:"unique,omitempty"`
}

// Span is an inclusive count range, written [min, max] (or one number).
type Span [2]int

// UnmarshalJSON reads [min, max] or a single number.
func (s *Span) UnmarshalJSON(b []byte) error {
	var n int
	if err := jsonUnmarshal(b, &n); err == nil {
		*s = Span{n, n}
		return nil
	}
	var pair [2]int
	if err := jsonUnmarshal(b, &pair); err != nil {
		return fmt.Errorf("a count is a number or [min, max]")
	}
	*s = pair
	return nil
}

// Table is a drawn table: a header and rows of text cells.
type Table struct {
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
}

// Schema is p's kind and that kind's bounds (for /v1/spec), as plain
// JSON values (maps, lists, numbers, text) that any codec writes alike.
func (p *Param) Schema() (kind string, spec any) {
	kind, spec = p.schema()
	b, err := json.Marshal(spec)
	if err != nil {
		return kind, nil
	}
	var plain any
	_ = json.Unmarshal(b, &plain)
	return kind, plain
}

func (p *Param) schema() (kind string, spec any) {
	k := p.kinds()
	if len(k) != 1 {
		return "", nil
	}
	switch k[0] {
	case "int":
		return k[0], p.Int
	case "number":
		return k[0], p.Number
	case "choice":
		return k[0], p.Choice
	case "word":
		return k[0], p.Word
	case "sample":
		return k[0], p.Sample
	case "ints":
		return k[0], p.Ints
	case "date":
		return k[0], p.Date
	case "text":
		return k[0], p.Text
	case "table":
		cols := make([]map[string]any, len(p.Table.Columns))
		for i := range p.Table.Columns {
			c := &p.Table.Columns[i]
			ck, cs := c.schema()
			cols[i] = map[string]any{"name": c.Name, "kind": ck, "spec": cs, "unique": c.Unique}
		}
		return k[0], map[string]any{"rows": p.Table.Rows, "columns": cols}
	case "value":
		return k[0], p.Value
	}
	return k[0], nil
}

// maxDrawn bounds every count a parameter draws (rows, lines, samples):
// an instance is a task's starting state, not a load test.
const maxDrawn = 10_000

// kinds lists the kinds set on p, for validation.
func (p *Param) kinds() []string {
	var k []string
	add := func(set bool, name string) {
		if set {
			k = append(k, name)
		}
	}
	add(p.Int != nil, "int")
	add(p.Number != nil, "number")
	add(p.Choice != nil, "choice")
	add(p.Word != "", "word")
	add(p.Sample != nil, "sample")
	add(p.Ints != nil, "ints")
	add(p.Person, "person")
	add(p.Date != nil, "date")
	add(p.Text != nil, "text")
	add(p.Table != nil, "table")
	add(p.Value != "", "value")
	return k
}

func (s Span) valid() bool { return s[0] >= 0 && s[0] <= s[1] && s[1] <= maxDrawn }

// validate checks p's own bounds; templates are checked by instantiating.
func (p *Param) validate(inTable bool) error {
	k := p.kinds()
	if len(k) != 1 {
		return fmt.Errorf("param %q: set exactly one kind (got %v)", p.Name, k)
	}
	if inTable && (p.Table != nil || p.Text != nil || p.Value != "") {
		return fmt.Errorf("column %q: a column is not a %s", p.Name, k[0])
	}
	switch {
	case p.Int != nil && p.Int.Min > p.Int.Max:
		return fmt.Errorf("param %q: int min > max", p.Name)
	case p.Number != nil && (!(p.Number.Min <= p.Number.Max) || p.Number.Decimals < 0 || p.Number.Decimals > 6 ||
		math.Abs(p.Number.Min) > 1e12 || math.Abs(p.Number.Max) > 1e12):
		return fmt.Errorf("param %q: number needs min <= max within ±1e12 and 0..6 decimals", p.Name)
	case p.Choice != nil && len(p.Choice) == 0:
		return fmt.Errorf("param %q: choice is empty", p.Name)
	case p.Word != "" && Lists[p.Word] == nil:
		return fmt.Errorf("param %q: no word list %q", p.Name, p.Word)
	case p.Sample != nil:
		from := p.Sample.From
		if p.Sample.List != "" {
			if from != nil || Lists[p.Sample.List] == nil {
				return fmt.Errorf("param %q: sample takes from or a known list", p.Name)
			}
			from = Lists[p.Sample.List]
		}
		if !p.Sample.Count.valid() || p.Sample.Count[1] > len(from) {
			return fmt.Errorf("param %q: sample count %v: at most %d distinct values", p.Name, p.Sample.Count, len(from))
		}
	case p.Ints != nil:
		if !p.Ints.Count.valid() || p.Ints.Min > p.Ints.Max ||
			(p.Ints.Distinct && uint64(p.Ints.Count[1]) > uint64(p.Ints.Max-p.Ints.Min)+1) {
			return fmt.Errorf("param %q: ints count %v in [%d, %d] cannot be drawn", p.Name, p.Ints.Count, p.Ints.Min, p.Ints.Max)
		}
	case p.Date != nil:
		from, err1 := time.Parse(time.DateOnly, p.Date.From)
		to, err2 := time.Parse(time.DateOnly, p.Date.To)
		if err1 != nil || err2 != nil || to.Before(from) {
			return fmt.Errorf("param %q: date needs from <= to as YYYY-MM-DD", p.Name)
		}
	case p.Text != nil:
		l := p.Text.List
		if l == "" {
			l = "words"
		}
		if !p.Text.Lines.valid() || !p.Text.Words.valid() || Lists[l] == nil {
			return fmt.Errorf("param %q: text needs lines, words and a known list", p.Name)
		}
	case p.Table != nil:
		if !p.Table.Rows.valid() || len(p.Table.Columns) == 0 {
			return fmt.Errorf("param %q: table needs rows and columns", p.Name)
		}
		for i := range p.Table.Columns {
			c := &p.Table.Columns[i]
			if c.Name == "" {
				return fmt.Errorf("param %q: column %d has no name", p.Name, i)
			}
			if err := c.validate(true); err != nil {
				return fmt.Errorf("param %q: %w", p.Name, err)
			}
		}
	}
	return nil
}

// rng is the instance generator's random source: splitmix64, written out
// so that an instance is the same on every machine and Go release
// (docs/tasks.md, "Determinism").
type rng struct{ s uint64 }

// paramRNG seeds the generator of one parameter from (family, version,
// draw, name): adding a parameter never changes the others' values.
func paramRNG(family string, version int, draw uint64, name string) *rng {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(int64(version)))
	binary.LittleEndian.PutUint64(b[8:], draw)
	return &rng{s: xxh3.HashString(family + "\x00" + string(b[:]) + "\x00" + name)}
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below returns a uniform integer in [0, n) by rejection (n > 0).
func (r *rng) below(n uint64) uint64 {
	if n&(n-1) == 0 {
		return r.next() & (n - 1)
	}
	limit := math.MaxUint64 - math.MaxUint64%n
	for {
		if v := r.next(); v < limit {
			return v % n
		}
	}
}

// between returns a uniform integer in [lo, hi].
func (r *rng) between(lo, hi int64) int64 {
	span := uint64(hi - lo)
	if span == math.MaxUint64 {
		return int64(r.next())
	}
	return lo + int64(r.below(span+1))
}

func (r *rng) count(s Span) int { return int(r.between(int64(s[0]), int64(s[1]))) }

func (r *rng) pick(list []string) string { return list[r.below(uint64(len(list)))] }

// sample draws n distinct entries of list in draw order (partial Fisher-Yates).
func (r *rng) sample(list []string, n int) []string {
	c := append([]string(nil), list...)
	for i := 0; i < n; i++ {
		j := i + int(r.below(uint64(len(c)-i)))
		c[i], c[j] = c[j], c[i]
	}
	return c[:n:n]
}

// draw draws p's value (every kind but Value, which the caller renders).
func (p *Param) draw(r *rng) any {
	switch {
	case p.Int != nil:
		return r.between(p.Int.Min, p.Int.Max)
	case p.Number != nil:
		scale := math.Pow10(p.Number.Decimals)
		lo, hi := int64(math.Ceil(p.Number.Min*scale)), int64(math.Floor(p.Number.Max*scale))
		return strconv.FormatFloat(float64(r.between(lo, hi))/scale, 'f', p.Number.Decimals, 64)
	case p.Choice != nil:
		return r.pick(p.Choice)
	case p.Word != "":
		return r.pick(Lists[p.Word])
	case p.Sample != nil:
		from := p.Sample.From
		if p.Sample.List != "" {
			from = Lists[p.Sample.List]
		}
		return r.sample(from, r.count(p.Sample.Count))
	case p.Ints != nil:
		n := r.count(p.Ints.Count)
		out := make([]int64, 0, n)
		seen := map[int64]bool{}
		for len(out) < n {
			v := r.between(p.Ints.Min, p.Ints.Max)
			if p.Ints.Distinct && seen[v] {
				continue
			}
			seen[v] = true
			out = append(out, v)
		}
		return out
	case p.Person:
		return r.pick(Lists["first_names"]) + " " + r.pick(Lists["last_names"])
	case p.Date != nil:
		from, _ := time.Parse(time.DateOnly, p.Date.From)
		to, _ := time.Parse(time.DateOnly, p.Date.To)
		days := int64(to.Sub(from).Hours() / 24)
		return from.AddDate(0, 0, int(r.between(0, days))).Format(time.DateOnly)
	case p.Text != nil:
		list := Lists["words"]
		if p.Text.List != "" {
			list = Lists[p.Text.List]
		}
		lines := make([]string, r.count(p.Text.Lines))
		for i := range lines {
			words := make([]string, max(1, r.count(p.Text.Words)))
			for j := range words {
				words[j] = r.pick(list)
			}
			lines[i] = strings.Join(words, " ")
		}
		return lines
	case p.Table != nil:
		return p.Table.draw(r)
	}
	return nil
}

// draw draws a table; a Unique column redraws a repeated value (giving up
// after a bounded number of tries, when the column's space is too small).
func (t *TableParam) draw(r *rng) *Table {
	n := r.count(t.Rows)
	tb := &Table{Header: make([]string, len(t.Columns)), Rows: make([][]string, n)}
	seen := make([]map[string]bool, len(t.Columns))
	for j, c := range t.Columns {
		tb.Header[j] = c.Name
		seen[j] = map[string]bool{}
	}
	for i := range tb.Rows {
		row := make([]string, len(t.Columns))
		for j := range t.Columns {
			c := &t.Columns[j]
			for try := 0; ; try++ {
				row[j] = cellText(c.draw(r))
				if !c.Unique || !seen[j][row[j]] || try == 1000 {
					break
				}
			}
			seen[j][row[j]] = true
		}
		tb.Rows[i] = row
	}
	return tb
}

func cellText(v any) string {
	switch v := v.(type) {
	case int64:
		return strconv.FormatInt(v, 10)
	case string:
		return v
	case []string:
		return strings.Join(v, " ")
	}
	return fmt.Sprint(v)
}
