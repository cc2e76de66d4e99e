package dialect

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

// corpusFile is one family's corpus (testdata/corpus/<family>.json): model
// outputs written in the family's forms, each with the actions it means,
// the coordinate space it is read in, and where its points land on the
// sample display.
type corpusFile struct {
	Family        string            `json:"family"`
	DefaultCoords any               `json:"default_coords"`
	Sources       map[string]string `json:"sources"` // where each form is defined
	Samples       []corpusSample    `json:"samples"`
	Errors        []corpusError     `json:"errors"`
}

type corpusSample struct {
	Name    string            `json:"name"`
	Source  string            `json:"source"`
	Dialect string            `json:"dialect"`
	Auto    bool              `json:"auto"` // auto must pick Dialect too
	Text    string            `json:"text"`
	Coords  any               `json:"coords"` // the space the caller declares; absent: the dialect's default
	Want    []json.RawMessage `json:"want"`
	Answer  string            `json:"answer"`
	// Screen is every point of Want (target, then to) after mapping from
	// Coords through sampleDisplay: "x,y" screen pixels, or "norm:x,y" for
	// a 0..1 target left for the guest (screen space).
	Screen []string `json:"screen"`
	// MapError is the code mapping refuses the actions with (a mark
	// target: unsupported until marks are drawn); empty: they all map.
	MapError aci.Code `json:"map_error"`
}

type corpusError struct {
	Name    string   `json:"name"`
	Source  string   `json:"source"`
	Dialect string   `json:"dialect"`
	Text    string   `json:"text"`
	Snippet string   `json:"snippet"`
	Code    aci.Code `json:"code"` // the typed refusal; empty: dialect_error
}

// sampleDisplay: a 1920x1080 screen delivered as a 1280x720 frame.
var sampleDisplay = &aci.Display{W: 1920, H: 1080, SourceRect: aci.Rect{W: 1920, H: 1080}, Delivered: aci.Rect{W: 1280, H: 720}}

func loadCorpus(t testing.TB) []corpusFile {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	var out []corpusFile
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f corpusFile
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, f)
	}
	return out
}

func TestCorpus(t *testing.T) {
	families := map[string]bool{}
	for _, f := range loadCorpus(t) {
		families[f.Family] = true
		def, err := aci.ParseCoords(f.DefaultCoords)
		if err != nil {
			t.Fatalf("%s: default_coords: %v", f.Family, err)
		}
		if got := DefaultCoords(f.Family); got != def {
			t.Errorf("%s: DefaultCoords = %v; the corpus says %v", f.Family, got, def)
		}
		for _, s := range f.Samples {
			t.Run(f.Family+"/"+s.Name, func(t *testing.T) {
				if _, ok := f.Sources[s.Source]; !ok {
					t.Errorf("sample names unknown source %q", s.Source)
				}
				checkSample(t, s)
			})
		}
		for _, e := range f.Errors {
			t.Run(f.Family+"/error/"+e.Name, func(t *testing.T) {
				if _, ok := f.Sources[e.Source]; e.Source != "" && !ok {
					t.Errorf("error names unknown source %q", e.Source)
				}
				runErrCode(t, []errCase{{e.Name, e.Dialect, e.Text, e.Snippet}}, e.Code)
			})
		}
	}
	for _, n := range Names() {
		if n != Auto && n != PyAutoGUI && n != XML && n != JSON && !families[n] {
			t.Errorf("dialect %s has no corpus", n)
		}
	}
}

func checkSample(t *testing.T, s corpusSample) {
	t.Helper()
	want := "[" + string(joinRaw(s.Want)) + "]"
	p, err := Parse(s.Dialect, s.Text)
	if err != nil {
		t.Fatalf("Parse(%s, %q): %v", s.Dialect, s.Text, err)
	}
	if g, w := canon(t, p.Actions), wantActions(t, want); g != w {
		t.Fatalf("Parse(%s, %q)\n got %s\nwant %s", s.Dialect, s.Text, g, w)
	}
	if p.Dialect != s.Dialect || p.Coords != DefaultCoords(s.Dialect) {
		t.Errorf("Parse: dialect %s coords %v; want %s, %v", p.Dialect, p.Coords, s.Dialect, DefaultCoords(s.Dialect))
	}
	if p.Answer != s.Answer {
		t.Errorf("answer %q; want %q", p.Answer, s.Answer)
	}
	if s.Auto {
		a, err := Parse(Auto, s.Text)
		if err != nil {
			t.Fatalf("Parse(auto): %v", err)
		}
		if a.Dialect != s.Dialect || canon(t, a.Actions) != canon(t, p.Actions) {
			t.Errorf("Parse(auto) read it as %s: %s", a.Dialect, canon(t, a.Actions))
		}
	}
	coords := p.Coords
	if s.Coords != nil {
		if coords, err = aci.ParseCoords(s.Coords); err != nil {
			t.Fatalf("coords: %v", err)
		}
	}
	var got []string
	for _, a := range p.Actions {
		if err := coords.MapAction(&a, sampleDisplay); err != nil {
			if c := aci.CodeOf(err); s.MapError != "" && c == s.MapError {
				return
			}
			t.Fatalf("MapAction(%s) in %v: %v", canon(t, []aci.Action{a}), coords, err)
		}
		for _, tg := range []*aci.Target{a.Target, a.To} {
			if tg == nil {
				continue
			}
			if tg.Kind == aci.PointNorm {
				got = append(got, fmt.Sprintf("norm:%g,%g", tg.X, tg.Y))
			} else {
				got = append(got, fmt.Sprintf("%g,%g", tg.X, tg.Y))
			}
		}
	}
	if s.MapError != "" {
		t.Fatalf("mapped through %v without the %s refusal the sample wants", coords, s.MapError)
	}
	if strings.Join(got, " ") != strings.Join(s.Screen, " ") {
		t.Errorf("mapped through %v: points %v; want %v", coords, got, s.Screen)
	}
}

func joinRaw(list []json.RawMessage) []byte {
	var b []byte
	for i, r := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r...)
	}
	return b
}

// TestCorpusErrorsTyped checks that every corpus error is refused with its
// code through auto as well (dialect_error unless the entry names another),
// never another code.
func TestCorpusErrorsTyped(t *testing.T) {
	for _, f := range loadCorpus(t) {
		for _, e := range f.Errors {
			want := e.Code
			if want == "" {
				want = aci.CodeDialectError
			}
			_, err := Parse(Auto, e.Text)
			var ae *aci.Error
			if err != nil && (!errors.As(err, &ae) || ae.Code != want && ae.Code != aci.CodeDialectError) {
				t.Errorf("%s/%s: Parse(auto) error %v; want %s", f.Family, e.Name, err, want)
			}
		}
	}
}
