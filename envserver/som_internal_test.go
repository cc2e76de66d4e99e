package envserver

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

// somFixture is a 1280x800 desktop-like PNG (flat panels, some text-like
// noise) with 33 elements laid out as galculator's buttons.
func somFixture(tb testing.TB) ([]byte, aci.Display, []aci.Element) {
	tb.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 1280, 800))
	for y := 0; y < 800; y++ {
		for x := 0; x < 1280; x++ {
			c := color.RGBA{240, 240, 240, 255}
			if (x/7+y/13)%5 == 0 && x > 470 && x < 810 && y > 220 && y < 580 {
				c = color.RGBA{40, 40, 40, 255}
			}
			img.SetRGBA(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		tb.Fatal(err)
	}
	var els []aci.Element
	for i := 0; i < 33; i++ {
		els = append(els, aci.Element{ID: "e" + string(rune('a'+i%26)), Role: "push button", Name: "b",
			Box: aci.Rect{X: 480 + (i%5)*65, Y: 330 + (i/5)*40, W: 59, H: 34}})
	}
	d := aci.Display{W: 1280, H: 800, SourceRect: aci.Rect{W: 1280, H: 800}, Delivered: aci.Rect{W: 1280, H: 800}}
	return buf.Bytes(), d, els
}

// TestDrawMarks: each mark's box is outlined in the mark colour on the
// re-encoded frame, and elements off the delivered frame get no mark.
func TestDrawMarks(t *testing.T) {
	data, d, els := somFixture(t)
	els = append(els, aci.Element{ID: "off", Role: "push button", Box: aci.Rect{X: 2000, Y: 10, W: 20, H: 20}},
		aci.Element{ID: "plain", Role: "label", Box: aci.Rect{X: 10, Y: 10, W: 20, H: 20}})
	marks := marksOf(els, d)
	if len(marks) != 33 || marks[0].N != 1 || marks[32].N != 33 {
		t.Fatalf("marks: %d (first %+v); want 33 numbered from 1, none for the off-screen button or the label", len(marks), marks[0])
	}
	out, err := drawMarks(data, aci.FormatPNG, 0, d, marks)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range marks {
		// the bottom edge of the outline, away from the label
		if c := color.RGBAModel.Convert(img.At(m.Box.X+m.Box.W/2, m.Box.Y+m.Box.H-1)).(color.RGBA); c != markColor {
			t.Fatalf("mark %d: outline pixel %v; want %v", m.N, c, markColor)
		}
	}
	if markHash("f", marks) == markHash("f", marks[:32]) || markHash("f", marks) == markHash("g", marks) {
		t.Error("a marked frame's hash ignores its marks or its frame")
	}
}

// BenchmarkSoMFrame: what marking costs a PNG observation, against the
// same frame decoded and encoded again without marks (the floor of any
// drawing on an encoded frame).
func BenchmarkSoMFrame(b *testing.B) {
	data, d, els := somFixture(b)
	marks := marksOf(els, d)
	b.Run("reencode", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := drawMarks(data, aci.FormatPNG, 0, d, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("marks33", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := drawMarks(data, aci.FormatPNG, 0, d, marks); err != nil {
				b.Fatal(err)
			}
		}
	})
}
