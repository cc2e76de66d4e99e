package ui

import (
	"bytes"
	"image/jpeg"

	"github.com/shinken-rl/shinken/envserver/render"
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
	if err := jpeg.Encode(&buf, render.Downscale(img, edge), &jpeg.Options{Quality: thumbQuality}); err != nil {
		return nil, err
	}
	u.thumbs.Put(k, buf.Bytes())
	return buf.Bytes(), nil
}
