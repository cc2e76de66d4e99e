// Package render draws an episode's replay: the positions it passes
// through (each the screen the model saw, with the step's points and drags
// marked, then the final screen) and the decoding and scaling of recorded
// frames. The web UI's replay GIF and the API's episode video both draw
// with it, so the two show the same marks.
package render

import (
	"bytes"
	"errors"
	"image"
	"image/draw"
	_ "image/jpeg" // frames may be stored as JPEG
	_ "image/png"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/trajectory"
)

// Position is one position of a replay: a frame, the actions the model
// chose on it, and when the frame was observed (milliseconds into the
// episode; the reset observation is at 0).
type Position struct {
	Frame   string
	Actions []aci.Action
	AtMS    int64
}

// Positions lists an episode's replay: before each step the frame the
// model saw with that step's actions, then the last frame with none.
func Positions(t *trajectory.Trajectory) []Position {
	out := make([]Position, 0, len(t.Steps)+1)
	prev, at := t.InitFrame, int64(0)
	for i := range t.Steps {
		out = append(out, Position{Frame: prev, Actions: t.Steps[i].Actions, AtMS: at})
		prev, at = t.Steps[i].ObsFrame, t.Steps[i].TMS
	}
	return append(out, Position{Frame: prev, AtMS: at})
}

// Sample keeps at most n positions, evenly spread, the first and the last
// among them.
func Sample(pos []Position, n int) []Position {
	if n <= 0 || len(pos) <= n {
		return pos
	}
	if n == 1 {
		return pos[len(pos)-1:]
	}
	kept := make([]Position, 0, n)
	for i := 0; i < n; i++ {
		kept = append(kept, pos[i*(len(pos)-1)/(n-1)])
	}
	return kept
}

// Decode decodes a stored frame of any format (png, jpeg, or raw RGB24 on
// a screen of sw×sh) into an image.
func Decode(data []byte, format string, sw, sh int) (image.Image, error) {
	if format == "raw" {
		return DecodeRaw(data, sw, sh)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	return img, err
}

// DecodeRaw turns RGB24 bytes into an image. A raw frame does not carry
// its size: it is the screen's, or a downscale that keeps the screen's
// aspect ratio, so the size is the factorization of the pixel count whose
// aspect is nearest the screen's.
func DecodeRaw(data []byte, sw, sh int) (*image.RGBA, error) {
	w, h, ok := RawDims(len(data), sw, sh)
	if !ok {
		return nil, errors.New("raw frame: size not recoverable from its length")
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i, j := 0, 0; i+2 < len(data); i, j = i+3, j+4 {
		img.Pix[j], img.Pix[j+1], img.Pix[j+2], img.Pix[j+3] = data[i], data[i+1], data[i+2], 255
	}
	return img, nil
}

// RawDims is the size of a raw RGB24 frame of n bytes on a sw×sh screen.
func RawDims(n, sw, sh int) (w, h int, ok bool) {
	if n == 0 || n%3 != 0 || sw <= 0 || sh <= 0 {
		return 0, 0, false
	}
	px := n / 3
	want := float64(sw) / float64(sh)
	best := -1.0
	for c := 1; c*c <= px; c++ {
		if px%c != 0 {
			continue
		}
		for _, cw := range []int{c, px / c} {
			ch := px / cw
			if cw > sw || ch > sh {
				continue
			}
			d := float64(cw)/float64(ch) - want
			if d < 0 {
				d = -d
			}
			if best < 0 || d < best {
				best, w, h = d, cw, ch
			}
		}
	}
	// Accept only a size within rounding of the screen's aspect ratio.
	if best < 0 || best > want/float64(h) {
		return 0, 0, false
	}
	return w, h, true
}

// ToRGBA returns img as an *image.RGBA at origin (0,0), converting once
// through draw's fast paths rather than per-pixel At calls.
func ToRGBA(img image.Image) *image.RGBA {
	if r, ok := img.(*image.RGBA); ok && r.Rect.Min == (image.Point{}) {
		return r
	}
	b := img.Bounds()
	out := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(out, out.Rect, img, b.Min, draw.Src)
	return out
}

// Downscale shrinks img (box filter) so its long edge is at most edge; a
// smaller image comes back as is.
func Downscale(img image.Image, edge int) *image.RGBA {
	src := ToRGBA(img)
	sw, sh := src.Rect.Dx(), src.Rect.Dy()
	long := max(sw, sh)
	if long <= edge || edge <= 0 {
		return src
	}
	return Resize(src, max(sw*edge/long, 1), max(sh*edge/long, 1))
}

// Resize scales img to dw×dh: a box filter where it shrinks, the nearest
// pixel where it grows.
func Resize(img image.Image, dw, dh int) *image.RGBA {
	src := ToRGBA(img)
	sw, sh := src.Rect.Dx(), src.Rect.Dy()
	if sw == dw && sh == dh {
		return src
	}
	out := image.NewRGBA(image.Rect(0, 0, dw, dh))
	if sw == 0 || sh == 0 {
		return out
	}
	for y := 0; y < dh; y++ {
		y0, y1 := y*sh/dh, max((y+1)*sh/dh, y*sh/dh+1)
		for x := 0; x < dw; x++ {
			x0, x1 := x*sw/dw, max((x+1)*sw/dw, x*sw/dw+1)
			var r, g, bl, n uint32
			for yy := y0; yy < y1; yy++ {
				o := yy*src.Stride + x0*4
				for xx := x0; xx < x1; xx, o = xx+1, o+4 {
					r += uint32(src.Pix[o])
					g += uint32(src.Pix[o+1])
					bl += uint32(src.Pix[o+2])
					n++
				}
			}
			o := y*out.Stride + x*4
			out.Pix[o], out.Pix[o+1], out.Pix[o+2], out.Pix[o+3] = uint8(r/n), uint8(g/n), uint8(bl/n), 255
		}
	}
	return out
}

// MarkAction draws an action's point (a ring) and drag path (a line) on an
// image of bounds r that shows a sw×sh screen scaled by sx, sy: set is
// called for each marked pixel inside r.
func MarkAction(r image.Rectangle, a aci.Action, sx, sy float64, sw, sh int, set func(x, y int)) {
	at := func(t aci.Target) (int, int, bool) {
		switch t.Kind {
		case aci.PointPx:
			return int(t.X * sx), int(t.Y * sy), true
		case aci.PointNorm:
			return int(t.X * float64(sw) * sx), int(t.Y * float64(sh) * sy), true
		}
		return 0, 0, false
	}
	pt, ok := a.Point()
	if !ok {
		return
	}
	x, y, ok := at(pt)
	if !ok {
		return
	}
	put := func(x, y int) {
		if (image.Point{x, y}).In(r) {
			set(x, y)
		}
	}
	ring(put, x, y, 7)
	ring(put, x, y, 6)
	if a.To != nil {
		if x2, y2, ok := at(*a.To); ok {
			line(put, x, y, x2, y2)
			ring(put, x2, y2, 4)
		}
	}
}

// MarkRGBA draws a's marks on img in red.
func MarkRGBA(img *image.RGBA, a aci.Action, sx, sy float64, sw, sh int) {
	MarkAction(img.Rect, a, sx, sy, sw, sh, func(x, y int) {
		o := img.PixOffset(x, y)
		img.Pix[o], img.Pix[o+1], img.Pix[o+2], img.Pix[o+3] = 255, 0, 0, 255
	})
}

func ring(set func(x, y int), cx, cy, r int) {
	for x := -r; x <= r; x++ {
		for y := -r; y <= r; y++ {
			if d := x*x + y*y; d <= r*r && d > (r-2)*(r-2) {
				set(cx+x, cy+y)
			}
		}
	}
}

func line(set func(x, y int), x0, y0, x1, y1 int) {
	n := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= n; i++ {
		x, y := x0+(x1-x0)*i/n, y0+(y1-y0)*i/n
		set(x, y)
		set(x+1, y)
		set(x, y+1)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
