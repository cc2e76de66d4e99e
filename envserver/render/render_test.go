package render

import (
	"image"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/trajectory"
)

func TestPositionsAndSample(t *testing.T) {
	tr := &trajectory.Trajectory{InitFrame: "f0", Steps: []trajectory.Step{
		{ObsFrame: "f1", TMS: 900, Actions: []aci.Action{{Verb: aci.Click}}},
		{ObsFrame: "f2", TMS: 2100},
	}}
	pos := Positions(tr)
	want := []Position{{Frame: "f0", AtMS: 0}, {Frame: "f1", AtMS: 900}, {Frame: "f2", AtMS: 2100}}
	if len(pos) != len(want) {
		t.Fatalf("positions: %+v", pos)
	}
	for i := range want {
		if pos[i].Frame != want[i].Frame || pos[i].AtMS != want[i].AtMS {
			t.Errorf("position %d: %+v; want %+v", i, pos[i], want[i])
		}
	}
	if len(pos[0].Actions) != 1 || len(pos[2].Actions) != 0 {
		t.Errorf("actions: the first position carries step 0's, the last none: %+v", pos)
	}
	many := make([]Position, 101)
	for i := range many {
		many[i].AtMS = int64(i)
	}
	s := Sample(many, 5)
	if len(s) != 5 || s[0].AtMS != 0 || s[4].AtMS != 100 {
		t.Errorf("sample: %+v; want 5 spread from the first to the last", s)
	}
	if len(Sample(many, 1000)) != 101 {
		t.Errorf("sample under the cap changed the positions")
	}
}

func TestMarkRGBA(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 100, 50))
	to := aci.Target{Kind: aci.PointPx, X: 180, Y: 80}
	a := aci.Action{Verb: aci.Drag, X: ptr(20.0), Y: ptr(20.0), To: &to}
	MarkRGBA(img, a, 0.5, 0.5, 200, 100)
	red := func(x, y int) bool {
		o := img.PixOffset(x, y)
		return img.Pix[o] == 255 && img.Pix[o+1] == 0
	}
	if !red(10+7, 10) && !red(10+6, 10) {
		t.Errorf("no ring around the drag's start (10,10)")
	}
	if !red(50, 25) {
		t.Errorf("no line through the drag's midpoint (50,25)")
	}
	if red(0, 49) {
		t.Errorf("a pixel far from the marks is red")
	}
}

func TestResizeKeepsSize(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 64, 40))
	if r := Resize(img, 64, 40); r != img {
		t.Errorf("resize to the same size copied the image")
	}
	if r := Resize(img, 33, 21); r.Rect.Dx() != 33 || r.Rect.Dy() != 21 {
		t.Errorf("resize: %v", r.Rect)
	}
	if r := Downscale(img, 32); r.Rect.Dx() != 32 || r.Rect.Dy() != 20 {
		t.Errorf("downscale: %v", r.Rect)
	}
}

func ptr[T any](v T) *T { return &v }
