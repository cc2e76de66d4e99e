package rgbjpeg

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shinken-rl/shinken/internal/rgbpng"
)

// flatImage is a w×h image of one colour.
func flatImage(w, h int, r, g, b byte) []byte {
	rgb := make([]byte, w*h*3)
	for i := 0; i < len(rgb); i += 3 {
		rgb[i], rgb[i+1], rgb[i+2] = r, g, b
	}
	return rgb
}

// fill paints the rectangle [x0,x1)×[y0,y1), clipped to the image.
func fill(rgb []byte, w, h, x0, y0, x1, y1 int, c [3]byte) {
	for y := max(y0, 0); y < min(y1, h); y++ {
		for x := max(x0, 0); x < min(x1, w); x++ {
			copy(rgb[(y*w+x)*3:], c[:])
		}
	}
}

// screenImage is a w×h desktop: a flat background, a taskbar, windows with
// gradient title bars, white bodies holding lines of text-like glyphs
// (high-contrast strokes with a grey anti-aliased edge), and a few
// coloured buttons. Mostly flat, as screens are.
func screenImage(w, h int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 2))
	rgb := flatImage(w, h, 0x3a, 0x6e, 0xa5)
	fill(rgb, w, h, 0, h-h/20-1, w, h, [3]byte{0x20, 0x20, 0x28})
	for win := 0; win < 3; win++ {
		x0, y0 := r.IntN(w/2+1), r.IntN(h/2+1)
		x1, y1 := min(x0+w/3+r.IntN(w/3+1), w), min(y0+h/3+r.IntN(h/3+1), h)
		fill(rgb, w, h, x0, y0, x1, y1, [3]byte{0xff, 0xff, 0xff})
		// Title bar: a horizontal gradient.
		for y := y0; y < min(y0+22, y1); y++ {
			for x := x0; x < x1; x++ {
				t := (x - x0) * 255 / max(x1-x0, 1)
				copy(rgb[(y*w+x)*3:], []byte{byte(40 + t/3), byte(80 + t/4), byte(160 + t/3)})
			}
		}
		// Text: glyph cells 7x14, strokes of 1-2 px, lines 18 px apart.
		ink := [3]byte{0x10, 0x10, 0x10}
		if win == 1 {
			ink = [3]byte{0x00, 0x40, 0xc0}
		}
		for ly := y0 + 30; ly+14 < y1-4; ly += 18 {
			lineLen := r.IntN(max((x1-x0-16)/7, 1))
			for c := 0; c < lineLen; c++ {
				gx := x0 + 8 + c*7
				if r.IntN(6) == 0 {
					continue // a space
				}
				for s := 0; s < 3; s++ {
					if r.IntN(2) == 0 { // vertical stroke
						sx := gx + r.IntN(5)
						fill(rgb, w, h, sx, ly+2+r.IntN(3), sx+1, ly+12, ink)
						fill(rgb, w, h, sx+1, ly+4, sx+2, ly+12, [3]byte{0x90, 0x90, 0x90})
					} else { // horizontal stroke
						sy := ly + 3 + r.IntN(9)
						fill(rgb, w, h, gx, sy, gx+5, sy+1, ink)
					}
				}
			}
		}
		// Buttons.
		for b := 0; b < 2; b++ {
			bx, by := x1-90*(b+1), y1-34
			fill(rgb, w, h, bx, by, bx+80, by+24, [3]byte{0xe0, 0xe0, 0xe0})
			fill(rgb, w, h, bx+20, by+8, bx+60, by+16, [3]byte{0x30, 0x30, 0x30})
		}
	}
	return rgb
}

// gradientImage is a smooth diagonal gradient in all three channels.
func gradientImage(w, h int) []byte {
	rgb := make([]byte, w*h*3)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			i := (y*w + x) * 3
			rgb[i] = byte(x * 255 / max(w-1, 1))
			rgb[i+1] = byte(y * 255 / max(h-1, 1))
			rgb[i+2] = byte((x + y) * 255 / max(w+h-2, 1))
		}
	}
	return rgb
}

// noiseImage is uniform random bytes: the worst case for every encoder.
func noiseImage(w, h int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	rgb := make([]byte, w*h*3)
	for i := range rgb {
		rgb[i] = byte(r.Uint32())
	}
	return rgb
}

func toRGBA(rgb []byte, w, h int) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i, j := 0, 0; i+3 <= len(rgb); i, j = i+3, j+4 {
		img.Pix[j], img.Pix[j+1], img.Pix[j+2], img.Pix[j+3] = rgb[i], rgb[i+1], rgb[i+2], 0xff
	}
	return img
}

// decode decodes a JPEG with image/jpeg and returns its pixels as RGB24.
func decode(data []byte, w, h int) ([]byte, error) {
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		return nil, fmt.Errorf("decoded %v, want %dx%d", b, w, h)
	}
	out := make([]byte, 0, w*h*3)
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			out = append(out, c.R, c.G, c.B)
		}
	}
	return out, nil
}

func psnr(a, b []byte) float64 {
	var se float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		se += d * d
	}
	if se == 0 {
		return math.Inf(1)
	}
	return 10 * math.Log10(255*255*float64(len(a))/se)
}

// TestDecodes encodes images of many sizes at several qualities and checks
// that image/jpeg decodes each to the right size and to pixels about as
// close to the source as image/jpeg's own encoding at that quality.
func TestDecodes(t *testing.T) {
	sizes := [][2]int{{1, 1}, {7, 3}, {16, 16}, {17, 9}, {33, 65}, {1280, 800}}
	for _, sz := range sizes {
		w, h := sz[0], sz[1]
		images := map[string][]byte{
			"screen":   screenImage(w, h, uint64(w*h)),
			"gradient": gradientImage(w, h),
			"noise":    noiseImage(w, h, uint64(w+h)),
		}
		for name, rgb := range images {
			for _, q := range []int{1, 50, 80, 100} {
				data, err := Encode(nil, rgb, w, h, q)
				if err != nil {
					t.Fatalf("%s %dx%d q%d: %v", name, w, h, q, err)
				}
				got, err := decode(data, w, h)
				if err != nil {
					t.Fatalf("%s %dx%d q%d: %v", name, w, h, q, err)
				}
				// A broken image (a wrong block, swapped channels) loses far
				// more than the margin against image/jpeg's own encoding.
				var ref bytes.Buffer
				if err := jpeg.Encode(&ref, toRGBA(rgb, w, h), &jpeg.Options{Quality: q}); err != nil {
					t.Fatal(err)
				}
				want, err := decode(ref.Bytes(), w, h)
				if err != nil {
					t.Fatal(err)
				}
				p, pr := psnr(rgb, got), psnr(rgb, want)
				if p < pr-1.5 {
					t.Errorf("%s %dx%d q%d: PSNR %.2f dB, image/jpeg %.2f dB", name, w, h, q, p, pr)
				}
				if testing.Verbose() {
					t.Logf("%s %dx%d q%d: PSNR %.2f dB, image/jpeg %.2f dB", name, w, h, q, p, pr)
				}
			}
		}
	}
}

// TestFidelity compares the decoded PSNR of Encode at quality 80 with that
// of image/jpeg's own encoder on the same image.
func TestFidelity(t *testing.T) {
	for _, sz := range [][2]int{{320, 240}, {333, 201}} {
		w, h := sz[0], sz[1]
		for _, tc := range []struct {
			name string
			rgb  []byte
		}{
			{"flat-grey", flatImage(w, h, 0x80, 0x80, 0x80)},
			{"flat-colour", flatImage(w, h, 0x12, 0xa4, 0xe9)},
			{"screen", screenImage(w, h, 5)},
			{"gradient", gradientImage(w, h)},
			{"noise", noiseImage(w, h, 6)},
		} {
			const q = 80
			ours, err := Encode(nil, tc.rgb, w, h, q)
			if err != nil {
				t.Fatal(err)
			}
			var theirs bytes.Buffer
			if err := jpeg.Encode(&theirs, toRGBA(tc.rgb, w, h), &jpeg.Options{Quality: q}); err != nil {
				t.Fatal(err)
			}
			a, err := decode(ours, w, h)
			if err != nil {
				t.Fatal(err)
			}
			b, err := decode(theirs.Bytes(), w, h)
			if err != nil {
				t.Fatal(err)
			}
			pa, pb := psnr(tc.rgb, a), psnr(tc.rgb, b)
			t.Logf("%s %dx%d: rgbjpeg %.2f dB %d bytes, image/jpeg %.2f dB %d bytes", tc.name, w, h, pa, len(ours), pb, theirs.Len())
			if pa < pb-1 {
				t.Errorf("%s %dx%d: PSNR %.2f dB, image/jpeg %.2f dB", tc.name, w, h, pa, pb)
			}
		}
	}
}

func TestDeterministic(t *testing.T) {
	const w, h = 200, 120
	rgb := screenImage(w, h, 9)
	a, err := Encode(nil, rgb, w, h, 80)
	if err != nil {
		t.Fatal(err)
	}
	// A pooled encoder last used at another quality and size must not
	// leave a trace.
	if _, err := Encode(nil, noiseImage(33, 17, 1), 33, 17, 7); err != nil {
		t.Fatal(err)
	}
	b, err := Encode(make([]byte, 0, 10), rgb, w, h, 80)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("two encodings of the same image differ")
	}
}

// TestEncoderReusesOnlyUnchangedRows encodes a sequence of frames with one
// Encoder, each changing a few rows (inside one row of MCUs, across two,
// the partial last one), then the quality, then the size: every JPEG
// decodes to its frame's size with image/jpeg and is byte for byte what a
// fresh Encoder writes, so no row of an earlier frame leaks into a later
// one.
func TestEncoderReusesOnlyUnchangedRows(t *testing.T) {
	const w, h = 203, 77
	r := rand.New(rand.NewPCG(5, 6))
	rgb := screenImage(w, h, 3)
	var e Encoder
	for i, c := range []struct{ y0, y1, q int }{{0, 0, 80}, {3, 4, 80}, {15, 17, 80}, {76, 77, 80}, {40, 41, 80}, {40, 41, 80}, {0, 0, 30}, {0, 77, 30}} {
		for y := c.y0; y < c.y1; y++ {
			for x := 0; x < w*3; x++ {
				rgb[y*w*3+x] = byte(r.IntN(256))
			}
		}
		got, err := e.Encode(nil, rgb, w, h, c.q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decode(got, w, h); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		want, err := encode(nil, rgb, w, h, c.q, true)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("frame %d (rows %d..%d changed, quality %d): the reusing encoder's JPEG differs from a fresh one's", i, c.y0, c.y1, c.q)
		}
	}
	small := screenImage(31, 9, 2)
	got, err := e.Encode(nil, small, 31, 9, 80)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decode(got, 31, 9); err != nil {
		t.Fatal(err)
	}
}

func TestAppends(t *testing.T) {
	prefix := []byte("prefix")
	out, err := Encode(bytes.Clone(prefix), flatImage(5, 5, 1, 2, 3), 5, 5, 80)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, prefix) {
		t.Fatal("dst's bytes were not kept")
	}
	if _, err := decode(out[len(prefix):], 5, 5); err != nil {
		t.Fatal(err)
	}
}

// TestShortcutsBitIdentical checks that the flat-MCU and flat-block
// shortcuts produce exactly the bytes of the full path, on images full of
// flat blocks and MCUs next to busy ones, at several qualities and sizes
// with partial edge MCUs.
func TestShortcutsBitIdentical(t *testing.T) {
	for _, sz := range [][2]int{{1, 1}, {17, 9}, {64, 48}, {333, 201}} {
		w, h := sz[0], sz[1]
		// Flat 8x8 cells of random colours, some split into flat halves,
		// which makes flat blocks inside MCUs that are not flat.
		cells := make([]byte, w*h*3)
		r := rand.New(rand.NewPCG(uint64(w), uint64(h)))
		for y := 0; y < h; y += 8 {
			for x := 0; x < w; x += 8 {
				c := [3]byte{byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}
				fill(cells, w, h, x, y, x+8, y+8, c)
				if r.IntN(3) == 0 {
					fill(cells, w, h, x+r.IntN(8), y, x+8, y+8, [3]byte{c[1], c[2], c[0]})
				}
			}
		}
		images := map[string][]byte{
			"cells":  cells,
			"screen": screenImage(w, h, 11),
			"black":  flatImage(w, h, 0, 0, 0),
			"white":  flatImage(w, h, 255, 255, 255),
			"blue":   flatImage(w, h, 0, 0, 255),
		}
		for name, rgb := range images {
			for _, q := range []int{1, 13, 50, 80, 97, 100} {
				fast, err := encode(nil, rgb, w, h, q, true)
				if err != nil {
					t.Fatal(err)
				}
				full, err := encode(nil, rgb, w, h, q, false)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(fast, full) {
					t.Errorf("%s %dx%d q%d: shortcuts change the output", name, w, h, q)
				}
			}
		}
	}
	// Every flat colour a pixel can take through one channel at a time.
	for v := 0; v < 256; v++ {
		for _, c := range [][3]byte{{byte(v), byte(v), byte(v)}, {byte(v), 0, 255}, {255, byte(v), 0}, {0, 255, byte(v)}} {
			rgb := flatImage(16, 16, c[0], c[1], c[2])
			fast, _ := encode(nil, rgb, 16, 16, 90, true)
			full, _ := encode(nil, rgb, 16, 16, 90, false)
			if !bytes.Equal(fast, full) {
				t.Fatalf("flat %v: shortcuts change the output", c)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		n, w, h, q int
	}{
		{0, 0, 0, 80},
		{3, 0, 1, 80},
		{3, 1, 0, 80},
		{-3, -1, 1, 80},
		{65536 * 3, 65536, 1, 80},
		{65536 * 3, 1, 65536, 80},
		{10, 2, 2, 80},
		{13, 2, 2, 80},
		{12, 2, 2, 0},
		{12, 2, 2, 101},
		{12, 2, 2, -5},
	} {
		dst := []byte("x")
		out, err := Encode(dst, make([]byte, max(tc.n, 0)), tc.w, tc.h, tc.q)
		if err == nil {
			t.Errorf("%d bytes, %dx%d, quality %d: want an error", tc.n, tc.w, tc.h, tc.q)
		}
		if !bytes.Equal(out, dst) {
			t.Errorf("%d bytes, %dx%d, quality %d: dst changed on error", tc.n, tc.w, tc.h, tc.q)
		}
	}
	if _, err := Encode(nil, make([]byte, 12), 2, 2, 1); err != nil {
		t.Errorf("2x2 quality 1: %v", err)
	}
	if _, err := Encode(nil, make([]byte, 12), 2, 2, 100); err != nil {
		t.Errorf("2x2 quality 100: %v", err)
	}
}

// segments returns the payloads of the marker segments before SOS, keyed
// by marker.
func segments(t *testing.T, data []byte) map[byte][][]byte {
	t.Helper()
	segs := map[byte][][]byte{}
	if len(data) < 2 || data[0] != 0xff || data[1] != 0xd8 {
		t.Fatal("no SOI")
	}
	for i := 2; ; {
		if i+4 > len(data) || data[i] != 0xff {
			t.Fatalf("no marker at %d", i)
		}
		m := data[i+1]
		n := int(binary.BigEndian.Uint16(data[i+2:]))
		if i+2+n > len(data) {
			t.Fatalf("marker %x at %d runs past the end", m, i)
		}
		segs[m] = append(segs[m], data[i+4:i+2+n])
		if m == 0xda {
			return segs
		}
		i += 2 + n
	}
}

// tables splits DQT or DHT payloads into their tables, keyed by the
// byte that names them (Pq/Tq or Tc/Th).
func tables(t *testing.T, payloads [][]byte, huffman bool) map[byte][]byte {
	t.Helper()
	out := map[byte][]byte{}
	for _, p := range payloads {
		for len(p) > 0 {
			n := 1 + 64
			if huffman {
				if len(p) < 17 {
					t.Fatal("short DHT")
				}
				n = 17
				for _, c := range p[1:17] {
					n += int(c)
				}
			}
			if len(p) < n {
				t.Fatal("short table")
			}
			out[p[0]] = p[1:n]
			p = p[n:]
		}
	}
	return out
}

// TestTablesMatchImageJPEG checks the quantisation tables at every quality
// and the Huffman tables against what image/jpeg writes, which uses the
// same Annex K tables and IJG scaling.
func TestTablesMatchImageJPEG(t *testing.T) {
	rgb := gradientImage(16, 16)
	for q := 1; q <= 100; q++ {
		ours, err := Encode(nil, rgb, 16, 16, q)
		if err != nil {
			t.Fatal(err)
		}
		var theirs bytes.Buffer
		if err := jpeg.Encode(&theirs, toRGBA(rgb, 16, 16), &jpeg.Options{Quality: q}); err != nil {
			t.Fatal(err)
		}
		so, st := segments(t, ours), segments(t, theirs.Bytes())
		qo, qt := tables(t, so[0xdb], false), tables(t, st[0xdb], false)
		if len(qo) != 2 || !bytes.Equal(qo[0], qt[0]) || !bytes.Equal(qo[1], qt[1]) {
			t.Fatalf("quality %d: DQT %x, image/jpeg %x", q, qo, qt)
		}
		if q == 1 {
			ho, ht := tables(t, so[0xc4], true), tables(t, st[0xc4], true)
			if len(ho) != 4 {
				t.Fatalf("%d Huffman tables", len(ho))
			}
			for k, v := range ht {
				if !bytes.Equal(ho[k], v) {
					t.Errorf("DHT %02x: %x, image/jpeg %x", k, ho[k], v)
				}
			}
		}
	}
}

// TestHuffmanCodes checks a few codes against Annex K's Tables K.3 to K.6.
func TestHuffmanCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    *huffTable
		sym  byte
		code string
	}{
		{"luma DC 0", lumaDC, 0, "00"},
		{"luma DC 5", lumaDC, 5, "110"},
		{"luma DC 11", lumaDC, 11, "111111110"},
		{"chroma DC 0", chromaDC, 0, "00"},
		{"chroma DC 11", chromaDC, 11, "11111111110"},
		{"luma AC EOB", lumaAC, 0x00, "1010"},
		{"luma AC 0/1", lumaAC, 0x01, "00"},
		{"luma AC ZRL", lumaAC, 0xf0, "11111111001"},
		{"luma AC F/A", lumaAC, 0xfa, "1111111111111110"},
		{"chroma AC EOB", chromaAC, 0x00, "00"},
		{"chroma AC 0/1", chromaAC, 0x01, "01"},
		{"chroma AC ZRL", chromaAC, 0xf0, "1111111010"},
	} {
		c := tc.t[tc.sym]
		if got := fmt.Sprintf("%0*b", c&0xff, c>>8); got != tc.code {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.code)
		}
	}
}

// refDCT is T.81 A.3.3's forward DCT in floating point.
func refDCT(s *[64]float64) (out [64]float64) {
	for u := 0; u < 8; u++ {
		for v := 0; v < 8; v++ {
			var sum float64
			for y := 0; y < 8; y++ {
				for x := 0; x < 8; x++ {
					sum += s[y*8+x] * math.Cos(float64(2*y+1)*float64(u)*math.Pi/16) * math.Cos(float64(2*x+1)*float64(v)*math.Pi/16)
				}
			}
			cu, cv := 1.0, 1.0
			if u == 0 {
				cu = math.Sqrt2 / 2
			}
			if v == 0 {
				cv = math.Sqrt2 / 2
			}
			out[u*8+v] = sum * cu * cv / 4
		}
	}
	return out
}

// extremeBlocks are blocks of ±128-ish samples with the sign pattern of
// each basis function, which drive that coefficient (and the sums inside
// the transform) to their largest.
func extremeBlocks() [][64]int32 {
	var blocks [][64]int32
	for u := 0; u < 8; u++ {
		for v := 0; v < 8; v++ {
			var b, n [64]int32
			for y := 0; y < 8; y++ {
				for x := 0; x < 8; x++ {
					c := math.Cos(float64(2*y+1)*float64(u)*math.Pi/16) * math.Cos(float64(2*x+1)*float64(v)*math.Pi/16)
					if c >= 0 {
						b[y*8+x], n[y*8+x] = 127, -128
					} else {
						b[y*8+x], n[y*8+x] = -128, 127
					}
				}
			}
			blocks = append(blocks, b, n)
		}
	}
	return blocks
}

// TestFDCTAccuracy compares fdct, with its output scale taken out, with the
// floating-point DCT on random and extreme blocks: the error must stay well
// under half the finest quantiser step (1 at quality 100), so that it
// rarely moves a coefficient across a rounding boundary.
func TestFDCTAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	blocks := extremeBlocks()
	for range 2000 {
		var b [64]int32
		for i := range b {
			b[i] = int32(r.IntN(256)) - 128
		}
		blocks = append(blocks, b)
	}
	var worst float64
	for _, b := range blocks {
		var f [64]float64
		s := b
		for i := range s {
			f[i] = float64(s[i])
			s[i] <<= fracBits
		}
		fdct(&s)
		want := refDCT(&f)
		for i := range s {
			scale := 8 * aanScale(i/8) * aanScale(i%8) * (1 << fracBits)
			if d := math.Abs(float64(s[i])/scale - want[i]); d > worst {
				worst = d
			}
		}
	}
	t.Logf("largest error %.4f", worst)
	if worst > 0.25 {
		t.Errorf("largest error %.4f, want <= 0.25", worst)
	}
}

// TestCoefficientRange checks that at quality 100 (quantiser 1) no AC
// coefficient needs more than baseline's 10 bits and no DC more than 11,
// on the blocks that make them largest.
func TestCoefficientRange(t *testing.T) {
	var qt quantTable
	scaleQuant(&qt, 0, 100)
	for _, b := range extremeBlocks() {
		for i := range b {
			b[i] <<= fracBits
		}
		fdct(&b)
		var zz [64]int32
		quantize(&zz, &b, &qt)
		if zz[0] < -1024 || zz[0] > 1023 {
			t.Errorf("DC %d", zz[0])
		}
		for _, c := range zz[1:] {
			if c < -1023 || c > 1023 {
				t.Errorf("AC %d", c)
			}
		}
	}
}

// TestZigzag checks the scan table against the walk of T.81 Figure A.6:
// along anti-diagonals, alternating direction.
func TestZigzag(t *testing.T) {
	k := 0
	for d := 0; d < 15; d++ {
		for i := 0; i <= d; i++ {
			row := i
			if d%2 == 0 {
				row = d - i
			}
			col := d - row
			if row > 7 || col > 7 {
				continue
			}
			if int(zigzag[k]) != row*8+col {
				t.Fatalf("zigzag[%d] = %d, want %d", k, zigzag[k], row*8+col)
			}
			k++
		}
	}
}

// TestPut32 checks the word writer's stuffing against a byte at a time.
func TestPut32(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	for i := range 100000 {
		v := r.Uint32()
		// 0xff in every combination of bytes first, then sprinkled.
		for s := 0; s < 32; s += 8 {
			if i < 16 && i>>(s/8)&1 == 1 || i >= 16 && r.IntN(4) == 0 {
				v |= 0xff << s
			}
		}
		var want []byte
		for s := 24; s >= 0; s -= 8 {
			want = append(want, byte(v>>s))
			if byte(v>>s) == 0xff {
				want = append(want, 0)
			}
		}
		b := make([]byte, 8)
		if got := b[:put32(b, 0, v)]; !bytes.Equal(got, want) {
			t.Fatalf("%08x: %x, want %x", v, got, want)
		}
	}
}

func TestAllocs(t *testing.T) {
	const w, h = 320, 240
	rgb := screenImage(w, h, 4)
	buf, _ := Encode(nil, rgb, w, h, 80)
	n := testing.AllocsPerRun(20, func() {
		buf, _ = Encode(buf[:0], rgb, w, h, 80)
	})
	if n > 0 {
		t.Errorf("%v allocations per call into a big enough buffer", n)
	}
}

// FuzzEncode encodes arbitrary pixels at arbitrary small sizes and
// qualities: Encode must not panic, what it returns must decode with
// image/jpeg to the right size, and the shortcuts must not change it.
func FuzzEncode(f *testing.F) {
	f.Add(uint8(1), uint8(1), uint8(80), []byte{1, 2, 3})
	f.Add(uint8(7), uint8(3), uint8(1), noiseImage(7, 3, 1))
	f.Add(uint8(17), uint8(9), uint8(100), screenImage(17, 9, 1))
	f.Add(uint8(16), uint8(16), uint8(50), flatImage(16, 16, 255, 255, 255))
	f.Add(uint8(33), uint8(20), uint8(95), gradientImage(33, 20))
	f.Fuzz(func(t *testing.T, wb, hb, qb uint8, pix []byte) {
		// The raw values first: errors, never panics.
		if _, err := Encode(nil, pix, int(wb), int(hb), int(qb)); err == nil {
			if int(wb)*int(hb)*3 != len(pix) || wb == 0 || hb == 0 || qb == 0 || qb > 100 {
				t.Fatalf("%dx%d quality %d, %d bytes: no error", wb, hb, qb, len(pix))
			}
		}
		w, h, q := 1+int(wb)%48, 1+int(hb)%48, 1+int(qb)%100
		rgb := make([]byte, w*h*3)
		if len(pix) > 0 {
			for i := range rgb {
				rgb[i] = pix[i%len(pix)]
			}
		}
		data, err := Encode(nil, rgb, w, h, q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decode(data, w, h); err != nil {
			t.Fatalf("%dx%d quality %d: %v", w, h, q, err)
		}
		full, err := encode(nil, rgb, w, h, q, false)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, full) {
			t.Fatalf("%dx%d quality %d: shortcuts change the output", w, h, q)
		}
	})
}

// BenchmarkEncode compares Encode with image/jpeg (the caller's RGB24 to
// RGBA copy included, as it must make one) at the same quality, and with
// rgbpng, on the same 1280x800 frames.
func BenchmarkEncode(b *testing.B) {
	const w, h, q = 1280, 800, 80
	for _, frame := range []struct {
		name string
		rgb  []byte
	}{
		{"screen", screenImage(w, h, 7)},
		{"noise", noiseImage(w, h, 7)},
	} {
		rgb := frame.rgb
		// Every row of MCUs (and every PNG band) changes between frames,
		// as in a scroll: nothing is reused.
		touchAll := func(i int) {
			for y := 0; y < h; y += 16 {
				rgb[y*w*3+i%(w*3)] ^= 1
			}
		}
		b.Run(frame.name+"/rgbjpeg", func(b *testing.B) {
			b.SetBytes(int64(len(rgb)))
			var buf []byte
			for i := 0; b.Loop(); i++ {
				touchAll(i)
				var err error
				if buf, err = Encode(buf[:0], rgb, w, h, q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(buf)), "bytes")
		})
		b.Run(frame.name+"/image_jpeg", func(b *testing.B) {
			b.SetBytes(int64(len(rgb)))
			var out bytes.Buffer
			for b.Loop() {
				out.Reset()
				if err := jpeg.Encode(&out, toRGBA(rgb, w, h), &jpeg.Options{Quality: q}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.Len()), "bytes")
		})
		// A terminal step: one text line (16 rows) changes between frames.
		b.Run(frame.name+"/rgbjpeg_one_line_changed", func(b *testing.B) {
			var e Encoder
			var buf []byte
			for i := 0; b.Loop(); i++ {
				rgb[(i%(h/16))*16*w*3+i%(w*3)] ^= 1
				var err error
				if buf, err = e.Encode(buf[:0], rgb, w, h, q); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(buf)), "bytes")
		})
		b.Run(frame.name+"/rgbpng", func(b *testing.B) {
			b.SetBytes(int64(len(rgb)))
			var buf []byte
			for i := 0; b.Loop(); i++ {
				touchAll(i)
				var err error
				if buf, err = rgbpng.Encode(buf[:0], rgb, w, h); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(buf)), "bytes")
		})
	}
}
