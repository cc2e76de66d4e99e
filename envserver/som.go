package envserver

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"slices"
	"strconv"

	"github.com/zeebo/xxh3"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/render"
)

// Set-of-Mark observations (docs/api.md, "Set-of-Mark"): observe.som
// numbers the interactive elements of the accessibility tree, draws each
// element's box and number on the frame, and lists the labels in
// obs.marks. A step's target {kind: "mark", ref: "N"} then names the
// element under label N of the env's last marked observation; the guest
// resolves it as it resolves an element_ref (its current box), so a mark
// whose element is gone is stale_element_ref.

// maxMarks bounds the labels drawn on one frame.
const maxMarks = 200

// markRoles are the roles labelled even without an action of their own.
var markRoles = map[string]bool{
	"push button": true, "toggle button": true, "check box": true, "radio button": true,
	"link": true, "entry": true, "password text": true, "text": true, "combo box": true,
	"menu item": true, "check menu item": true, "radio menu item": true, "menu": true,
	"page tab": true, "spin button": true, "slider": true, "list item": true,
	"table cell": true, "tree item": true, "icon": true, "button": true,
}

// marksOf picks the interactive elements of a tree with a box on the
// delivered part of the screen, numbered from 1 in the tree's order.
func marksOf(els []aci.Element, d aci.Display) []aci.MarkLabel {
	var out []aci.MarkLabel
	src := image.Rect(d.SourceRect.X, d.SourceRect.Y, d.SourceRect.X+d.SourceRect.W, d.SourceRect.Y+d.SourceRect.H)
	for _, e := range els {
		if len(out) == maxMarks {
			break
		}
		b := e.Box
		if b.W <= 0 || b.H <= 0 || !(len(e.Actions) > 0 || markRoles[e.Role] || slices.Contains(e.States, "editable")) {
			continue
		}
		if !image.Rect(b.X, b.Y, b.X+b.W, b.Y+b.H).Overlaps(src) {
			continue
		}
		out = append(out, aci.MarkLabel{N: len(out) + 1, Ref: e.ID, Role: e.Role, Name: e.Name, Box: b})
	}
	return out
}

// markColor is the labels' colour: a saturated red no desktop theme uses
// for text, as OSWorld's own Set-of-Mark drawings.
var markColor = color.RGBA{230, 25, 75, 255}

// drawMarks draws marks on an encoded frame and encodes it again in its
// format.
func drawMarks(data []byte, format string, quality int, d aci.Display, marks []aci.MarkLabel) ([]byte, error) {
	img, err := render.Decode(data, format, d.W, d.H)
	if err != nil {
		return nil, err
	}
	rgba := render.ToRGBA(img)
	fb := rgba.Bounds()
	sx := float64(d.Delivered.W) / float64(max(d.SourceRect.W, 1))
	sy := float64(d.Delivered.H) / float64(max(d.SourceRect.H, 1))
	toFrame := func(x, y int) (int, int) {
		return int(float64(x-d.SourceRect.X) * sx), int(float64(y-d.SourceRect.Y) * sy)
	}
	face := basicfont.Face7x13
	for _, m := range marks {
		x0, y0 := toFrame(m.Box.X, m.Box.Y)
		x1, y1 := toFrame(m.Box.X+m.Box.W, m.Box.Y+m.Box.H)
		r := image.Rect(x0, y0, x1, y1).Intersect(fb)
		if r.Empty() {
			continue
		}
		outline(rgba, r, markColor)
		label := strconv.Itoa(m.N)
		lw, lh := 7*len(label)+4, 13+2
		lx, ly := min(max(r.Min.X, fb.Min.X), fb.Max.X-lw), min(max(r.Min.Y, fb.Min.Y), fb.Max.Y-lh)
		bg := image.Rect(lx, ly, lx+lw, ly+lh).Intersect(fb)
		draw.Draw(rgba, bg, image.NewUniform(markColor), image.Point{}, draw.Src)
		dr := &font.Drawer{Dst: rgba, Src: image.White, Face: face, Dot: fixed.P(lx+2, ly+11)}
		dr.DrawString(label)
	}
	var buf bytes.Buffer
	switch format {
	case aci.FormatPNG:
		err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, rgba)
	case aci.FormatJPEG:
		err = jpeg.Encode(&buf, rgba, &jpeg.Options{Quality: quality})
	default:
		return nil, fmt.Errorf("observe.som draws on png or jpeg frames, not %s", format)
	}
	return buf.Bytes(), err
}

// outline draws r's border, two pixels wide, inside r.
func outline(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	u := image.NewUniform(c)
	for _, b := range []image.Rectangle{
		image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+2), image.Rect(r.Min.X, r.Max.Y-2, r.Max.X, r.Max.Y),
		image.Rect(r.Min.X, r.Min.Y, r.Min.X+2, r.Max.Y), image.Rect(r.Max.X-2, r.Min.Y, r.Max.X, r.Max.Y),
	} {
		draw.Draw(img, b.Intersect(r), u, image.Point{}, draw.Src)
	}
}

// markHash is the marked frame's content address: the frame's and the
// marks' (what was drawn where).
func markHash(frame string, marks []aci.MarkLabel) string {
	h := xxh3.New()
	h.WriteString("som\x00" + frame)
	for _, m := range marks {
		fmt.Fprintf(h, "\x00%d %d %d %d %d", m.N, m.Box.X, m.Box.Y, m.Box.W, m.Box.H)
	}
	sum := h.Sum128().Bytes()
	return hex.EncodeToString(sum[:])
}

// markFrame turns obs into its Set-of-Mark form (e.mu held): the marks of
// its tree drawn on its frame, the labels in obs.Marks and kept on e for
// the next step's mark targets. data is the frame's bytes as the reply
// would carry them (nil when the client has them); the marked frame's
// bytes are returned the same way.
func (s *Server) markFrame(ctx context.Context, e *env, b *batch, obs *aci.Observation, data []byte) ([]byte, error) {
	marks := marksOf(obs.Elements, obs.Display)
	obs.Marks = marks
	if obs.Marks == nil {
		obs.Marks = []aci.MarkLabel{}
	}
	e.marks = make(map[string]string, len(marks))
	for _, m := range marks {
		e.marks[strconv.Itoa(m.N)] = m.Ref
	}
	mk := frameKey{hash: markHash(obs.Frame, marks), format: b.obs.Format, quality: b.obs.Quality}
	if b.have[mk.hash] {
		obs.Frame = mk.hash
		return nil, nil
	}
	if marked, ok := s.cache.getStored(mk); ok {
		obs.Frame = mk.hash
		return marked, nil
	}
	src := data
	if src == nil {
		var ok bool
		if src, ok = s.cache.getStored(frameKey{hash: obs.Frame, format: b.obs.Format, quality: b.obs.Quality}); !ok {
			return nil, aci.Errorf(aci.CodeInternal, "observe.som: frame %s left the cache before it was marked", obs.Frame)
		}
	}
	marked, err := drawMarks(src, b.obs.Format, b.obs.Quality, obs.Display, marks)
	if err != nil {
		return nil, aci.Errorf(aci.CodeInternal, "observe.som: %v", err)
	}
	s.recordFrame(ctx, mk, s.cache.put(mk, marked))
	obs.Frame = mk.hash
	return marked, nil
}

// resolveMarks turns the mark targets of acts into the element refs the
// env's last marked observation labelled (e.mu held); a label it did not
// draw is stale_element_ref, for the first action that names one (its
// index returned).
func (e *env) resolveMarks(acts []aci.Action) (int, error) {
	for i := range acts {
		for _, t := range []*aci.Target{acts[i].Target, acts[i].To} {
			if t == nil || t.Kind != aci.Mark {
				continue
			}
			ref, ok := e.marks[t.Ref]
			if !ok {
				if e.marks == nil {
					return i, aci.Errorf(aci.CodeStaleElementRef, "%s on mark %s: no observation of this episode drew marks (observe.som)", acts[i].Verb, t.Ref)
				}
				return i, aci.Errorf(aci.CodeStaleElementRef, "%s on mark %s: the last marked observation drew marks 1..%d", acts[i].Verb, t.Ref, len(e.marks))
			}
			*t = aci.Target{Kind: aci.ElementRef, Ref: ref}
		}
	}
	return 0, nil
}
