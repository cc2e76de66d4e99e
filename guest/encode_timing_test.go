package guest

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"testing"

	"github.com/klauspost/compress/flate"
)

// desktopRGB decodes testdata/desktop.png (a real 1280x800 screen: an
// xterm full of text and galculator under openbox) into RGB24.
func desktopRGB(t testing.TB) (rgb []byte, w, h int) {
	t.Helper()
	b, err := os.ReadFile("testdata/desktop.png")
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return rgbOfImage(img)
}

func rgbOfImage(img image.Image) (rgb []byte, w, h int) {
	r := img.Bounds()
	w, h = r.Dx(), r.Dy()
	rgb = make([]byte, 0, w*h*3)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			rgb = append(rgb, byte(cr>>8), byte(cg>>8), byte(cb>>8))
		}
	}
	return rgb, w, h
}

// TestEncodePNGLossless: what encodePNG writes decodes (with the standard
// library) to exactly the pixels it was given, on a real screen and on
// frames with odd sizes and every byte value.
func TestEncodePNGLossless(t *testing.T) {
	rgb, w, h := desktopRGB(t)
	noise := make([]byte, 7*5*3)
	for i := range noise {
		noise[i] = byte(i * 37)
	}
	for _, c := range []struct {
		name string
		rgb  []byte
		w, h int
	}{{"desktop", rgb, w, h}, {"noise7x5", noise, 7, 5}, {"1x1", []byte{1, 2, 3}, 1, 1}} {
		b := encodePNG(nil, c.rgb, c.w, c.h)
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: decode: %v", c.name, err)
		}
		got, gw, gh := rgbOfImage(img)
		if gw != c.w || gh != c.h || !bytes.Equal(got, c.rgb) {
			t.Errorf("%s: decoded %dx%d differs from the %dx%d encoded pixels", c.name, gw, gh, c.w, c.h)
		}
	}
}

// BenchmarkEncodePNG compares the standard library's encoder at BestSpeed
// (through an RGBA copy, the former path) with encodePNG and other filter
// choices on a real screen; bytes/frame is reported beside the time.
func BenchmarkEncodePNG(b *testing.B) {
	rgb, w, h := desktopRGB(b)
	b.Run("stdlib_bestspeed", func(b *testing.B) {
		b.ReportAllocs()
		var n int
		for i := 0; i < b.N; i++ {
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			for i, j := 0, 0; i+3 <= len(rgb); i, j = i+3, j+4 {
				img.Pix[j], img.Pix[j+1], img.Pix[j+2], img.Pix[j+3] = rgb[i], rgb[i+1], rgb[i+2], 0xff
			}
			var buf bytes.Buffer
			enc := png.Encoder{CompressionLevel: png.BestSpeed}
			if err := enc.Encode(&buf, img); err != nil {
				b.Fatal(err)
			}
			n = buf.Len()
		}
		b.ReportMetric(float64(n), "bytes/frame")
	})
	b.Run("encodePNG_up", func(b *testing.B) {
		b.ReportAllocs()
		var out []byte
		for i := 0; i < b.N; i++ {
			out = encodePNG(out[:0], rgb, w, h)
		}
		b.ReportMetric(float64(len(out)), "bytes/frame")
	})
	b.Run("encodePNG_none", func(b *testing.B) {
		var out []byte
		for i := 0; i < b.N; i++ {
			out = encodePNGFilter(out[:0], rgb, w, h, 0)
		}
		b.ReportMetric(float64(len(out)), "bytes/frame")
	})
	b.Run("deflate_unfiltered", func(b *testing.B) {
		var buf bytes.Buffer
		zw, _ := flate.NewWriter(&buf, flate.BestSpeed)
		for i := 0; i < b.N; i++ {
			buf.Reset()
			zw.Reset(&buf)
			for y := 0; y < h; y++ {
				zw.Write([]byte{0})
				zw.Write(rgb[y*w*3 : (y+1)*w*3])
			}
			zw.Close()
		}
		b.ReportMetric(float64(buf.Len()), "bytes/frame")
	})
}

// TestRGBToRGBA: the word-wise expansion matches the byte loop.
func TestRGBToRGBA(t *testing.T) {
	rgb := make([]byte, 3*17)
	for i := range rgb {
		rgb[i] = byte(i*29 + 7)
	}
	got := make([]byte, 4*17)
	rgbToRGBA(got, rgb)
	for p := 0; p < 17; p++ {
		want := []byte{rgb[3*p], rgb[3*p+1], rgb[3*p+2], 0xff}
		if !bytes.Equal(got[4*p:4*p+4], want) {
			t.Fatalf("pixel %d: got %v; want %v", p, got[4*p:4*p+4], want)
		}
	}
}
