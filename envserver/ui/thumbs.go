package ui

import (
	"bytes"
	"container/list"
	"image"
	"image/draw"
	"image/jpeg"
	"sync"
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

type thumbCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // front = most recent; values are *thumbEntry
	byKey map[thumbKey]*list.Element
	work  chan struct{} // bounds renders in flight
}

type thumbEntry struct {
	key  thumbKey
	data []byte
}

func newThumbCache(maxBytes int64) *thumbCache {
	return &thumbCache{max: maxBytes, order: list.New(), byKey: map[thumbKey]*list.Element{}, work: make(chan struct{}, thumbWorkers)}
}

func (c *thumbCache) get(k thumbKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*thumbEntry).data, true
}

func (c *thumbCache) put(k thumbKey, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; ok || int64(len(data)) > c.max {
		return
	}
	c.byKey[k] = c.order.PushFront(&thumbEntry{key: k, data: data})
	c.size += int64(len(data))
	for c.size > c.max {
		el := c.order.Back()
		e := el.Value.(*thumbEntry)
		c.order.Remove(el)
		delete(c.byKey, e.key)
		c.size -= int64(len(e.data))
	}
}

// thumb returns the JPEG thumbnail of a frame, w pixels wide at most.
func (u *UI) thumb(hash string, w int, data []byte, format string) ([]byte, error) {
	k := thumbKey{hash, w}
	if b, ok := u.thumbs.get(k); ok {
		return b, nil
	}
	u.thumbs.work <- struct{}{}
	defer func() { <-u.thumbs.work }()
	if b, ok := u.thumbs.get(k); ok { // made while this one waited
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
	u.thumbs.put(k, buf.Bytes())
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
