package guest

import (
	"bytes"
	"math/rand/v2"
	"testing"
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

func TestToRGBMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ w, h, ow, oh int }{
		{7, 3, 7, 3}, {640, 480, 640, 480}, {333, 257, 333, 257}, {640, 480, 200, 150}, {101, 53, 37, 19},
	} {
		src := make([]byte, c.w*c.h*4)
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		got := make([]byte, c.ow*c.oh*3)
		toRGB(got, src, c.w*4, c.w, c.h, c.ow, c.oh)
		if want := naiveRGB(src, c.w*4, c.w, c.h, c.ow, c.oh); !bytes.Equal(got, want) {
			t.Errorf("%dx%d → %dx%d: converted pixels differ from the naive conversion", c.w, c.h, c.ow, c.oh)
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
