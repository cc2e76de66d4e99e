package ui

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// poolSource is a pool of 16 envs for the per-request benchmarks.
type poolSource struct{ fakeSource }

func (p *poolSource) Envs() []Env {
	out := make([]Env, 16)
	for i := range out {
		out[i] = Env{ID: fmt.Sprintf("env-%016x", i), State: "running", Task: "xterm-count-lines", EpisodeID: fmt.Sprintf("ep-%016x", i),
			Step: 3, MaxSteps: 10, Frame: fmt.Sprintf("%032x", i), Sandbox: fmt.Sprintf("sb-%d", i), LastUsed: time.Now()}
	}
	return out
}

// BenchmarkPoolJSON is one poll of the pool view with 16 envs: built,
// hashed for its ETag and sent.
func BenchmarkPoolJSON(b *testing.B) {
	u := New(&poolSource{}, Options{})
	r := httptest.NewRequest("GET", "/ui/api/pool", nil)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		u.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code)
		}
	}
}

// BenchmarkThumbnail is the cost of one thumbnail the cache does not hold:
// decode a 1280x800 PNG, scale it to 320 wide, encode a JPEG.
func BenchmarkThumbnail(b *testing.B) {
	img := image.NewRGBA(image.Rect(0, 0, 1280, 800))
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 7 % 251) // busy content: no long runs
	}
	var buf bytes.Buffer
	png.Encode(&buf, img)
	u := New(&fakeSource{}, Options{})
	b.SetBytes(int64(buf.Len()))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := u.thumb(fmt.Sprintf("%032x", i), 320, buf.Bytes(), "png"); err != nil {
			b.Fatal(err)
		}
	}
}
