package ui

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"net/http"

	"github.com/shinken-rl/shinken/envserver/render"
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
// the final screen (drawn by package render, as the API's episode video). One export runs at a time; long episodes are sampled
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

func (u *UI) replayGIF(t *trajectory.Trajectory) (*gif.GIF, error) {
	pos := render.Sample(render.Positions(t), u.opt.MaxGIFFrames)
	p := u.src.Pool()
	g := &gif.GIF{}
	for i, ps := range pos {
		if ps.Frame == "" {
			continue
		}
		data, format, err := u.src.Frame(ps.Frame)
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
		for _, a := range ps.Actions {
			render.MarkAction(pal.Rect, a, sx, sy, p.ScreenW, p.ScreenH, func(x, y int) { pal.Pix[pal.PixOffset(x, y)] = markRed })
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
	small := render.Downscale(img, edge)
	out := image.NewPaletted(small.Rect, cube)
	for i, j := 0, 0; i < len(out.Pix); i, j = i+1, j+4 {
		out.Pix[i] = cubeIndex(small.Pix[j], small.Pix[j+1], small.Pix[j+2])
	}
	return out
}
