package rgbpng

import (
	"bytes"
	adler32std "hash/adler32"
	"image"
	"image/png"
	"math/rand/v2"
	"testing"
)

// screenLike is a w×h RGB24 image with flat areas, text-like noise and
// gradients, the mix a desktop frame has.
func screenLike(w, h int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	rgb := make([]byte, w*h*3)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := (y*w + x) * 3
			switch {
			case y < h/4:
				rgb[i], rgb[i+1], rgb[i+2] = byte(x), byte(y), byte(x+y)
			case y < h/2 && x < w/2:
				v := byte(0xf0)
				if r.IntN(5) == 0 {
					v = byte(r.IntN(256))
				}
				rgb[i], rgb[i+1], rgb[i+2] = v, v, v
			default:
				rgb[i], rgb[i+1], rgb[i+2] = 0x20, 0x30, 0x40
			}
		}
	}
	return rgb
}

// TestRoundTrip decodes what Encode wrote with image/png and compares every
// pixel, at sizes that exercise the 8-byte and the tail paths of the filter.
func TestRoundTrip(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {3, 2}, {7, 5}, {1280, 800}, {641, 401}} {
		w, h := sz[0], sz[1]
		rgb := screenLike(w, h, uint64(w*h))
		data, err := Encode(nil, rgb, w, h)
		if err != nil {
			t.Fatal(err)
		}
		samePixels(t, data, rgb, w, h)
	}
}

// samePixels decodes data with image/png (which checks the zlib stream's
// Adler-32 and every chunk's CRC) and compares every pixel with rgb.
func samePixels(t *testing.T, data, rgb []byte, w, h int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%dx%d: decode: %v", w, h, err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("%dx%d: decoded %v", w, h, b)
	}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			cr, cg, cb, ca := img.At(x, y).RGBA()
			i := (y*w + x) * 3
			if byte(cr>>8) != rgb[i] || byte(cg>>8) != rgb[i+1] || byte(cb>>8) != rgb[i+2] || ca != 0xffff {
				t.Fatalf("%dx%d: pixel (%d,%d) differs", w, h, x, y)
			}
		}
	}
}

// TestEncoderReusesOnlyUnchangedBands encodes a sequence of frames with one
// Encoder, each frame changing a few rows (inside one band, across a band
// boundary, the last partial band) or the size: every PNG decodes to its own
// frame's pixels and is byte for byte what a fresh Encoder writes for them,
// so no band of an earlier frame leaks into a later one.
func TestEncoderReusesOnlyUnchangedBands(t *testing.T) {
	const w, h = 203, 77 // a partial last band
	r := rand.New(rand.NewPCG(5, 6))
	rgb := screenLike(w, h, 9)
	var e Encoder
	for i, rows := range [][2]int{{0, 0}, {3, 4}, {15, 17}, {76, 77}, {40, 41}, {40, 41}, {0, 77}} {
		for y := rows[0]; y < rows[1]; y++ {
			for x := 0; x < w*3; x++ {
				rgb[y*w*3+x] = byte(r.IntN(256))
			}
		}
		got, err := e.Encode(nil, rgb, w, h)
		if err != nil {
			t.Fatal(err)
		}
		samePixels(t, got, rgb, w, h)
		want, err := new(Encoder).Encode(nil, rgb, w, h)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d (rows %v changed): the reusing encoder's PNG differs from a fresh one's", i, rows)
		}
	}
	// Another size on the same Encoder starts over.
	small := screenLike(31, 9, 2)
	got, err := e.Encode(nil, small, 31, 9)
	if err != nil {
		t.Fatal(err)
	}
	samePixels(t, got, small, 31, 9)
}

func TestAdler32Combine(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 100, 65520, 65521, 65522, 200000} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(r.IntN(256))
		}
		for _, k := range []int{0, n / 2, n} {
			a, b := adler32std.Checksum(p[:k]), adler32std.Checksum(p[k:])
			if got, want := adler32Combine(a, b, n-k), adler32std.Checksum(p); got != want {
				t.Errorf("n=%d split %d: got %08x; want %08x", n, k, got, want)
			}
		}
	}
}

func TestRejectsBadSize(t *testing.T) {
	if _, err := Encode(nil, make([]byte, 10), 2, 2); err == nil {
		t.Fatal("10 bytes for 2x2: want an error")
	}
}

// BenchmarkEncode compares Encode with image/png at BestSpeed on the same
// 1280x800 frame (the way guestd encoded before: RGB24 copied into an RGBA
// image first).
func BenchmarkEncode(b *testing.B) {
	const w, h = 1280, 800
	rgb := screenLike(w, h, 7)
	b.Run("rgbpng", func(b *testing.B) { // every band changes
		var buf []byte
		for i := 0; i < b.N; i++ {
			for y := 0; y < h; y += bandRows {
				rgb[y*w*3+i%(w*3)]++
			}
			var err error
			buf, err = Encode(buf[:0], rgb, w, h)
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(buf)), "bytes")
	})
	// A terminal step: one text line (16 rows) changes between frames.
	b.Run("rgbpng_one_line_changed", func(b *testing.B) {
		var e Encoder
		var buf []byte
		for i := 0; i < b.N; i++ {
			line := rgb[(i%40)*16*w*3:][:16*w*3]
			line[i%len(line)]++
			var err error
			buf, err = e.Encode(buf[:0], rgb, w, h)
			if err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(buf)), "bytes")
	})
	b.Run("image_png", func(b *testing.B) {
		var n int
		for i := 0; i < b.N; i++ {
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			for i, j := 0, 0; i+3 <= len(rgb); i, j = i+3, j+4 {
				img.Pix[j], img.Pix[j+1], img.Pix[j+2], img.Pix[j+3] = rgb[i], rgb[i+1], rgb[i+2], 0xff
			}
			var buf bytes.Buffer
			if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, img); err != nil {
				b.Fatal(err)
			}
			n = buf.Len()
		}
		b.ReportMetric(float64(n), "bytes")
	})
}

// TestAdler32 compares the eight-bytes-a-round checksum with hash/adler32
// on lengths around the round and reduction sizes, with bytes at 0xff
// (the largest lane sums) and random ones.
func TestAdler32(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 7, 8, 9, 5551, 5552, 5553, 11104, 100003} {
		for _, fill := range []string{"ff", "random"} {
			p := make([]byte, n)
			for i := range p {
				p[i] = 0xff
				if fill == "random" {
					p[i] = byte(r.IntN(256))
				}
			}
			if got, want := adler32(1, p), adler32std.Checksum(p); got != want {
				t.Errorf("n=%d %s: got %08x; want %08x", n, fill, got, want)
			}
			// Split at an odd point: the running form agrees too.
			k := n / 3
			if got, want := adler32(adler32(1, p[:k]), p[k:]), adler32std.Checksum(p); got != want {
				t.Errorf("n=%d %s split: got %08x; want %08x", n, fill, got, want)
			}
		}
	}
}
