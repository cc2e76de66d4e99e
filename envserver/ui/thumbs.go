package ui

import (
	"bytes"
	"image"
	"image/draw"
	"image/jpeg"

	"github.com/shinken-rl/shinken/internal/lru"
)

// Thumbnails: the pool view shows every env's latest frame small, so it asks
// for /ui/frames/{hash}?w=N and gets a JPEG of that width instead of the
// full frame. Each is made once per hash and width and kept in a small
// byte-bounded LRU; at most thumbWorkers are made at once.

const (
	maxThumbWidth = 640
	thumbQuality  = 75
	thumbWorkers  = 2
)

type thumbKey struct {
	hash string
	w    int
}

// thumbCache holds made thumbnails; work bounds renders in flight.
type thumbCache struct {
	*lru.Bytes[thumbKey]
	work chan struct{}
}

func newThumbCache(maxBytes int64) *thumbCache {
	return &thumbCache{lru.New[thumbKey](maxBytes), make(chan struct{}, thumbWorkers)}
}

// thumb returns the JPEG thumbnail of a frame, w pixels wide at most.
func (u *UI) thumb(hash string, w int, data []byte, format string) ([]byte, error) {
	k := thumbKey{hash, w}
	if b, ok := u.thumbs.Get(k); ok {
		return b, nil
	}
	u.thumbs.work <- struct{}{}
	defer func() { <-u.thumbs.work }()
	if b, ok := u.thumbs.Get(k); ok { // made while this one waited
		return b, nil
	}
	img, err := u.decodeImage(data, format)
	if err != nil {
		return nil, err
	}
	b := img.Bounds()
	edge := w
	if b.Dy() > b.Dx() {
		edge = w * b.Dy() / max(b.Dx(), 1)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, downscale(img, edge), &jpeg.Options{Quality: thumbQuality}); err != nil {
		return nil, err
	}
	u.thumbs.Put(k, buf.Bytes())
	return buf.Bytes(), nil
}

// toRGBA returns img as an *image.RGBA at origin (0,0), converting once
// through draw's fast paths rather than per-pixel At calls.
func toRGBA(img image.Image) *image.RGBA {
	if r, ok := img.(*image.RGBA); ok && r.Rect.Min == (image.Point{}) {
		return r
	}
	b := img.Bounds()
	out := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	draw.Draw(out, out.Rect, img, b.Min, draw.Src)
	return out
}

// downscale shrinks img (box filter) so its long edge is at most edge; a
// smaller image comes back as is.
func downscale(img image.Image, edge int) *image.RGBA {
	src := toRGBA(img)
	sw, sh := src.Rect.Dx(), src.Rect.Dy()
	long := max(sw, sh)
	if long <= edge || edge <= 0 {
		return src
	}
	dw, dh := max(sw*edge/long, 1), max(sh*edge/long, 1)
	out := image.NewRGBA(image.Rect(0, 0, dw, dh))
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
