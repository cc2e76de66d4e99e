package bench

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// Series is one named line or bar set; Y holds one value per category.
type Series struct {
	Name string
	Y    []float64
}

// Chart is a plot over categorical x values, drawn as standalone SVG.
type Chart struct {
	Title, XLabel, YLabel string
	Categories            []string // x axis, left to right
	Series                []Series
	Note                  string // one line under the plot: how it was measured
}

const (
	svgW, svgH                     = 760, 460
	padL, padR, padT, padB float64 = 78, 24, 56, 92
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"}

// niceMax returns the axis top for data up to v: a multiple of a step of
// 1, 2, 2.5 or 5 times a power of ten, with at most 5 steps to reach v.
func niceMax(v float64) (top, step float64) {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1, 0.2
	}
	raw := v / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * p
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*p >= raw {
			step = m * p
			break
		}
	}
	return math.Ceil(v/step-1e-9) * step, step
}

func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// frame draws the title, axes, grid and labels shared by both chart kinds
// and returns the y-scale.
func (c *Chart) frame(sb *strings.Builder) (y func(float64) float64, top float64) {
	maxV := 0.0
	for _, s := range c.Series {
		for _, v := range s.Y {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				maxV = max(maxV, v)
			}
		}
	}
	top, step := niceMax(maxV)
	plotH := svgH - padT - padB
	y = func(v float64) float64 { return padT + plotH*(1-v/top) }
	fmt.Fprintf(sb, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	fmt.Fprintf(sb, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(sb, `<text x="%d" y="24" text-anchor="middle" font-size="16" font-weight="bold">%s</text>`+"\n", svgW/2, esc(c.Title))
	for v := 0.0; v <= top*1.0001; v += step {
		fmt.Fprintf(sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", padL, y(v), svgW-padR, y(v))
		fmt.Fprintf(sb, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", padL-6, y(v)+4, fmtNum(v))
	}
	fmt.Fprintf(sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", padL, padT, padL, svgH-padB)
	fmt.Fprintf(sb, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="black"/>`+"\n", padL, svgH-padB, svgW-padR, svgH-padB)
	fmt.Fprintf(sb, `<text x="18" y="%.1f" text-anchor="middle" transform="rotate(-90 18 %.1f)">%s</text>`+"\n", padT+plotH/2, padT+plotH/2, esc(c.YLabel))
	fmt.Fprintf(sb, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", padL+(svgW-padL-padR)/2, svgH-padB+40, esc(c.XLabel))
	if c.Note != "" {
		fmt.Fprintf(sb, `<text x="%.1f" y="%.1f" font-size="10" fill="#555">%s</text>`+"\n", padL, float64(svgH)-14, esc(truncate(c.Note, 140)))
	}
	// Legend, top right, one row per series.
	for i, s := range c.Series {
		lx, ly := float64(svgW)-padR-170, padT+4+float64(i)*16
		fmt.Fprintf(sb, `<rect x="%.1f" y="%.1f" width="12" height="10" fill="%s"/>`+"\n", lx, ly, color(i))
		fmt.Fprintf(sb, `<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+18, ly+9, esc(s.Name))
	}
	return y, top
}

// slot returns the x centre of category i and the width of one slot.
func (c *Chart) slot(i int) (x, w float64) {
	w = (svgW - padL - padR) / float64(max(1, len(c.Categories)))
	return padL + w*(float64(i)+0.5), w
}

func (c *Chart) xLabels(sb *strings.Builder) {
	for i, cat := range c.Categories {
		x, _ := c.slot(i)
		fmt.Fprintf(sb, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x, svgH-padB+18, esc(cat))
	}
}

// LineSVG draws the chart as lines with a marker and value at each point.
// NaN values are gaps.
func (c *Chart) LineSVG() string {
	var sb strings.Builder
	y, _ := c.frame(&sb)
	c.xLabels(&sb)
	for si, s := range c.Series {
		var pts []string
		for i, v := range s.Y {
			if i >= len(c.Categories) || math.IsNaN(v) {
				continue
			}
			x, _ := c.slot(i)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y(v)))
			fmt.Fprintf(&sb, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %s</title></circle>`+"\n", x, y(v), color(si), esc(s.Name), fmtNum(v))
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="10" fill="%s">%s</text>`+"\n", x, y(v)-7, color(si), fmtNum(v))
		}
		if len(pts) > 1 {
			fmt.Fprintf(&sb, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), color(si))
		}
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}

// BarSVG draws the chart as grouped bars: one group per category, one bar
// per series, each labelled with its value.
func (c *Chart) BarSVG() string {
	var sb strings.Builder
	y, _ := c.frame(&sb)
	c.xLabels(&sb)
	n := max(1, len(c.Series))
	for i := range c.Categories {
		x, w := c.slot(i)
		bw := w * 0.8 / float64(n)
		for si, s := range c.Series {
			if i >= len(s.Y) || math.IsNaN(s.Y[i]) {
				continue
			}
			v := s.Y[i]
			bx := x - w*0.4 + float64(si)*bw
			fmt.Fprintf(&sb, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				bx, y(v), bw*0.92, y(0)-y(v), color(si), esc(c.Categories[i]), esc(s.Name), fmtNum(v))
			fmt.Fprintf(&sb, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9">%s</text>`+"\n", bx+bw*0.46, y(v)-3, fmtNum(v))
		}
	}
	sb.WriteString("</svg>\n")
	return sb.String()
}

func color(i int) string { return palette[i%len(palette)] }

func esc(s string) string { return html.EscapeString(s) }

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
