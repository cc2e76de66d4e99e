package bench

import (
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"
)

// wellFormed parses s as XML and returns the element names it holds.
func wellFormed(t *testing.T, s string) map[string]int {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(s))
	names := map[string]int{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, s)
		}
		if se, ok := tok.(xml.StartElement); ok {
			names[se.Name.Local]++
		}
	}
}

func TestLineChart(t *testing.T) {
	c := &Chart{Title: "steps <&> pools", XLabel: "pool", YLabel: "steps/s", Categories: []string{"1", "2", "4"},
		Series: []Series{{Name: "random", Y: []float64{10, 18, 30}}, {Name: "scripted", Y: []float64{5, math.NaN(), 12}}},
		Note:   "how it was measured"}
	svg := c.LineSVG()
	names := wellFormed(t, svg)
	if names["svg"] != 1 {
		t.Errorf("got %d <svg> elements; want 1", names["svg"])
	}
	// One marker per non-NaN point: 3 + 2.
	if names["circle"] != 5 {
		t.Errorf("got %d point markers; want 5 (NaN is a gap)", names["circle"])
	}
	if names["polyline"] != 2 {
		t.Errorf("got %d lines; want 2", names["polyline"])
	}
	for _, want := range []string{"random", "scripted", "steps &lt;&amp;&gt; pools", "how it was measured"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestBarChart(t *testing.T) {
	c := &Chart{Title: "latency", Categories: []string{"baseline", "png"},
		Series: []Series{{Name: "p50", Y: []float64{100, 10}}, {Name: "p95", Y: []float64{200, 20}}}}
	svg := c.BarSVG()
	names := wellFormed(t, svg)
	// 4 bars + 2 legend swatches + the background.
	if got := names["rect"]; got != 7 {
		t.Errorf("got %d rects; want 7", got)
	}
	if !strings.Contains(svg, ">200<") {
		t.Errorf("bar values not labelled: %s", svg)
	}
}

func TestNiceMax(t *testing.T) {
	for _, c := range []struct{ in, top float64 }{{0, 1}, {7, 8}, {101, 125}, {567, 600}, {2400, 2500}, {0.3, 0.3}} {
		top, step := niceMax(c.in)
		if math.Abs(top-c.top) > 1e-9 || step <= 0 || top < c.in || top/step > 5.0001 {
			t.Errorf("niceMax(%v): got %v step %v; want %v with at most 5 steps", c.in, top, step, c.top)
		}
	}
}
