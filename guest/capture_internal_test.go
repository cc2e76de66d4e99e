package guest

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// naiveRGB is the obvious per-pixel conversion and box filter.
func naiveRGB(src []byte, stride, w, h, ow, oh int) []byte {
	out := make([]byte, ow*oh*3)
	for oy := 0; oy < oh; oy++ {
		y0, y1 := oy*h/oh, max((oy+1)*h/oh, oy*h/oh+1)
		for ox := 0; ox < ow; ox++ {
			x0, x1 := ox*w/ow, max((ox+1)*w/ow, ox*w/ow+1)
			var s [3]int
			for y := y0; y < y1; y++ {
				for x := x0; x < x1; x++ {
					p := src[y*stride+x*4:]
					s[0] += int(p[2])
					s[1] += int(p[1])
					s[2] += int(p[0])
				}
			}
			n := (y1 - y0) * (x1 - x0)
			for c := 0; c < 3; c++ {
				out[(oy*ow+ox)*3+c] = byte((s[c] + n/2) / n)
			}
		}
	}
	return out
}

// TestRGBCacheMatchesNaive converts captures with one rgbCache: a first
// capture, then captures changing a few rows (and pixels inside an unchanged
// row's neighbour), then one of another geometry; every result must be the
// naive conversion of its own source, whole.
func TestRGBCacheMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var c rgbCache
	for _, g := range []struct{ w, h, ow, oh int }{
		{7, 3, 7, 3}, {640, 480, 640, 480}, {333, 257, 333, 257}, {640, 480, 200, 150}, {101, 53, 37, 19}, {640, 480, 640, 480},
	} {
		src := make([]byte, g.w*g.h*4)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		rect := aci.Rect{W: g.w, H: g.h}
		for round := range 4 {
			if round > 0 { // change a row, the last row, then nothing
				for _, y := range [][]int{{g.h / 2}, {g.h - 1, 0}, nil}[round-1] {
					src[y*g.w*4+rng.IntN(g.w*4)] ^= 0x5a
				}
			}
			converted := c.update(src, g.w*4, rect, g.ow, g.oh, nil)
			if round == 3 && converted {
				t.Errorf("%dx%d → %dx%d: an unchanged capture converted rows", g.w, g.h, g.ow, g.oh)
			}
			if want := naiveRGB(src, g.w*4, g.w, g.h, g.ow, g.oh); !bytes.Equal(c.rgb, want) {
				t.Fatalf("%dx%d → %dx%d round %d: converted pixels differ from the naive conversion", g.w, g.h, g.ow, g.oh, round)
			}
			if c.frameHash() != FrameHash(c.rgb, g.ow, g.oh) {
				t.Fatalf("round %d: the cached hash is not the frame's", round)
			}
		}
	}
}

func TestScaledSize(t *testing.T) {
	for _, c := range []struct{ w, h, max, ow, oh int }{
		{1280, 800, 0, 1280, 800}, {1280, 800, 2000, 1280, 800}, {1280, 800, 640, 640, 400}, {800, 1280, 640, 400, 640}, {1000, 3, 10, 10, 1},
	} {
		if ow, oh := scaledSize(c.w, c.h, c.max); ow != c.ow || oh != c.oh {
			t.Errorf("scaledSize(%d, %d, %d) got %dx%d; want %dx%d", c.w, c.h, c.max, ow, oh, c.ow, c.oh)
		}
	}
}

func TestParseKeys(t *testing.T) {
	for _, c := range []struct {
		spec string
		n    []int
		ok   bool
	}{
		{"ctrl+shift+t", []int{3}, true}, {"Return", []int{1}, true}, {"ctrl+c ctrl+v", []int{2, 2}, true},
		{"ctrl++", []int{2}, true}, {"super", []int{1}, true}, {"F12", []int{1}, true},
		{"ctrl+", nil, false}, {"", nil, false}, {"hyper+x", nil, false},
	} {
		got, err := parseKeys(c.spec)
		if (err == nil) != c.ok {
			t.Errorf("parseKeys(%q) err %v; want ok=%v", c.spec, err, c.ok)
			continue
		}
		for i, n := range c.n {
			if len(got[i]) != n {
				t.Errorf("parseKeys(%q) chord %d has %d keys; want %d", c.spec, i, len(got[i]), n)
			}
		}
	}
}

// TestEncodeMessageIsTheEnvelope: a reply encoded in place is byte for byte
// the wire.Message a separately encoded body would make, and decodes back.
func TestEncodeMessageIsTheEnvelope(t *testing.T) {
	shot := &wire.Shot{Hash: strings.Repeat("ab", 16), W: 2, H: 1, Format: aci.FormatRaw, Data: []byte{1, 2, 3, 4, 5, 6}}
	for _, c := range []struct {
		body any
		e    *aci.Error
	}{{shot, nil}, {&wire.ActResult{Obs: shot}, nil}, {nil, aci.Errorf(aci.CodeTimeout, "late")}, {nil, nil}} {
		var buf bytes.Buffer
		if err := encodeMessage(&buf, 7, wire.TypeReply, c.body, c.e); err != nil {
			t.Fatal(err)
		}
		m := wire.Message{ID: 7, Type: wire.TypeReply, Error: c.e}
		if c.body != nil {
			b, err := msgpack.Marshal(c.body)
			if err != nil {
				t.Fatal(err)
			}
			m.Body = b
		}
		want, err := wire.Encode(&m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("body %T error %v: in-place encoding differs from the envelope's", c.body, c.e)
		}
		got, err := wire.Decode(buf.Bytes())
		if err != nil || got.ID != 7 || !bytes.Equal(got.Body, m.Body) || (c.e == nil) != (got.Error == nil) {
			t.Errorf("body %T error %v: decoded %+v, %v", c.body, c.e, got, err)
		}
	}
}
