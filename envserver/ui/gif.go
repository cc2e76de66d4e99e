package ui

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/gif"
	_ "image/jpeg" // frames may be stored as JPEG
	"net/http"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/trajectory"
)

// gifLongEdge bounds an exported frame's long edge, and with MaxGIFFrames
// the memory one export holds.
const gifLongEdge = 480

// cube is a 6×7×6 RGB color cube (252 colors): a frame is quantized to it
// by arithmetic, with no palette search per pixel.
var cube = func() color.Palette {
	p := make(color.Palette, 0, 252)
	for r := 0; r < 6; r++ {
		for g := 0; g < 7; g++ {
			for b := 0; b < 6; b++ {
				p = append(p, color.RGBA{uint8(r * 255 / 5), uint8(g * 255 / 6), uint8(b * 255 / 5), 255})
			}
		}
	}
	return p
}()

func cubeIndex(r, g, b uint8) uint8 {
	ri := (int(r)*5 + 127) / 255
	gi := (int(g)*6 + 127) / 255
	bi := (int(b)*5 + 127) / 255
	return uint8(ri*42 + gi*6 + bi)
}

var markRed = cubeIndex(255, 0, 0)

// apiGIF exports an episode's replay as an animated GIF: each position shows
// the screen the model saw with that step's points and drags marked, then
// the final screen. One export runs at a time; long episodes are sampled
// down to MaxGIFFrames.
func (u *UI) apiGIF(w http.ResponseWriter, r *http.Request) {
	t, err := u.src.Episode(r.PathValue("id"))
	if err != nil {
		writeSourceError(w, err)
		return
	}
	select {
	case u.gifSlot <- struct{}{}:
		defer func() { <-u.gifSlot }()
	default:
		writeJSONError(w, http.StatusServiceUnavailable, "unavailable", "another replay export is running; retry shortly")
		return
	}
	g, err := u.replayGIF(t)
	if err != nil {
		var he *httpError
		if errors.As(err, &he) {
			writeJSONError(w, he.status, he.code, he.msg)
			return
		}
		writeJSONError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	var buf bytes.Buffer
	if err := gif.EncodeAll(&buf, g); err != nil {
		writeJSONError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	h := w.Header()
	h.Set("Content-Type", "image/gif")
	h.Set("Content-Disposition", `attachment; filename="`+t.EpisodeID+`.gif"`)
	h.Set("Cache-Control", "private, no-cache")
	w.Write(buf.Bytes())
}

// replayPos is one position of a replay: a frame and the actions drawn on it.
type replayPos struct {
	frame   string
	actions []aci.Action
}

func positions(t *trajectory.Trajectory) []replayPos {
	var out []replayPos
	prev := t.InitFrame
	for i := range t.Steps {
		out = append(out, replayPos{frame: prev, actions: t.Steps[i].Actions})
		prev = t.Steps[i].ObsFrame
	}
	out = append(out, replayPos{frame: prev})
	return out
}

func (u *UI) replayGIF(t *trajectory.Trajectory) (*gif.GIF, error) {
	pos := positions(t)
	if n := u.opt.MaxGIFFrames; len(pos) > n {
		kept := make([]replayPos, 0, n)
		for i := 0; i < n; i++ {
			kept = append(kept, pos[i*(len(pos)-1)/(n-1)])
		}
		pos = kept
	}
	p := u.src.Pool()
	g := &gif.GIF{}
	for i, ps := range pos {
		if ps.frame == "" {
			continue
		}
		data, format, err := u.src.Frame(ps.frame)
		if err != nil {
			continue // a frame not recorded: the replay skips it
		}
		img, err := u.decodeImage(data, format)
		if err != nil {
			continue
		}
		pal := quantize(img, gifLongEdge)
		sx := float64(pal.Rect.Dx()) / float64(max(p.ScreenW, 1))
		sy := float64(pal.Rect.Dy()) / float64(max(p.ScreenH, 1))
		for _, a := range ps.actions {
			markAction(pal, a, sx, sy, p.ScreenW, p.ScreenH)
		}
		delay := 80
		if i == len(pos)-1 {
			delay = 250
		}
		g.Image = append(g.Image, pal)
		g.Delay = append(g.Delay, delay)
	}
	if len(g.Image) == 0 {
		return nil, &httpError{http.StatusNotFound, "not_found", "episode " + t.EpisodeID + " has no recorded frames (record_frames off?)"}
	}
	return g, nil
}

// quantize scales img so its long edge is at most edge and maps it onto
// the color cube.
func quantize(img image.Image, edge int) *image.Paletted {
	small := downscale(img, edge)
	out := image.NewPaletted(small.Rect, cube)
	for i, j := 0, 0; i < len(out.Pix); i, j = i+1, j+4 {
		out.Pix[i] = cubeIndex(small.Pix[j], small.Pix[j+1], small.Pix[j+2])
	}
	return out
}

// markAction draws an action's point (a ring) and drag path (a line) in red.
func markAction(img *image.Paletted, a aci.Action, sx, sy float64, sw, sh int) {
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
	ring(img, x, y, 7)
	ring(img, x, y, 6)
	if a.To != nil {
		if x2, y2, ok := at(*a.To); ok {
			line(img, x, y, x2, y2)
			ring(img, x2, y2, 4)
		}
	}
}

func ring(img *image.Paletted, cx, cy, r int) {
	for x := -r; x <= r; x++ {
		for y := -r; y <= r; y++ {
			if d := x*x + y*y; d <= r*r && d > (r-2)*(r-2) {
				setPx(img, cx+x, cy+y)
			}
		}
	}
}

func line(img *image.Paletted, x0, y0, x1, y1 int) {
	n := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= n; i++ {
		x, y := x0+(x1-x0)*i/n, y0+(y1-y0)*i/n
		setPx(img, x, y)
		setPx(img, x+1, y)
		setPx(img, x, y+1)
	}
}

func setPx(img *image.Paletted, x, y int) {
	if (image.Point{x, y}).In(img.Rect) {
		img.Pix[y*img.Stride+x] = markRed
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
