package aci

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCoordsMapTarget(t *testing.T) {
	// A 1280x800 screen delivered at 640x400, and an active-window crop at
	// (100,50) 400x300 delivered at 200x150.
	full := &Display{W: 1280, H: 800, SourceRect: Rect{W: 1280, H: 800}, Delivered: Rect{W: 640, H: 400}}
	crop := &Display{W: 1280, H: 800, SourceRect: Rect{X: 100, Y: 50, W: 400, H: 300}, Delivered: Rect{W: 200, H: 150}}
	img, _ := ImageCoords(1000, 625)
	cases := []struct {
		c      Coords
		t      Target
		d      *Display
		wx, wy float64
	}{
		{Coords{Space: CoordsFrame}, Target{Kind: PointPx, X: 10, Y: 20}, full, 20, 40},
		{Coords{Space: CoordsFrame}, Target{Kind: PointPx, X: 639, Y: 399}, full, 1278, 798},
		{Coords{Space: CoordsFrame}, Target{Kind: PointPx, X: 10.7, Y: 0}, full, 21, 0},
		{Coords{Space: CoordsFrame}, Target{Kind: PointPx, X: 0, Y: 0}, crop, 100, 50},
		{Coords{Space: CoordsFrame}, Target{Kind: PointPx, X: 199, Y: 149}, crop, 498, 348},
		{Coords{Space: CoordsFrame}, Target{Kind: PointNorm, X: 1, Y: 1}, full, 1278, 798},
		{Coords{Space: CoordsNorm}, Target{Kind: PointPx, X: 0.5, Y: 0.5}, full, 640, 400},
		{Coords{Space: CoordsNorm1000}, Target{Kind: PointPx, X: 1000, Y: 0}, crop, 498, 50},
		{img, Target{Kind: PointPx, X: 500, Y: 312.5}, full, 640, 400},
	}
	for _, c := range cases {
		got, err := c.c.MapTarget(c.t, c.d)
		if err != nil {
			t.Fatalf("%s %+v: %v", c.c, c.t, err)
		}
		if got.Kind != PointPx || got.X != c.wx || got.Y != c.wy {
			t.Errorf("%s %+v: got %+v; want point_px (%v, %v)", c.c, c.t, got, c.wx, c.wy)
		}
	}
	bad := []struct {
		c Coords
		t Target
		d *Display
	}{
		{Coords{Space: CoordsFrame}, Target{X: 640, Y: 0}, full},     // one past the frame
		{Coords{Space: CoordsFrame}, Target{X: -1, Y: 0}, full},      // negative
		{Coords{Space: CoordsFrame}, Target{X: 1, Y: 1}, nil},        // no frame delivered
		{Coords{Space: CoordsFrame}, Target{X: 1, Y: 1}, &Display{}}, // no descriptor
		{Coords{Space: CoordsNorm}, Target{X: 1.01, Y: 0}, full},
		{Coords{Space: CoordsNorm1000}, Target{X: 0, Y: 1001}, full},
		{img, Target{X: 1000, Y: 0}, full},
		{Coords{Space: CoordsFrame}, Target{Kind: "bounding_box"}, full},
	}
	for _, c := range bad {
		if _, err := c.c.MapTarget(c.t, c.d); CodeOf(err) != CodeInvalidAction {
			t.Errorf("%s %+v on %+v: got %v; want invalid_action", c.c, c.t, c.d, err)
		}
	}
	// An element ref has no coordinates: every space passes it through.
	if got, err := (Coords{Space: CoordsNorm}).MapTarget(*Ref("e3"), nil); err != nil || got != *Ref("e3") {
		t.Errorf("element_ref in norm space: got %+v, %v; want it untouched", got, err)
	}
	// Screen space passes targets through untouched, even with no frame.
	in := Target{Kind: PointPx, X: 5000, Y: 1}
	if got, err := (Coords{}).MapTarget(in, nil); err != nil || got != in {
		t.Errorf("screen: got %+v, %v; want %+v", got, err, in)
	}
}

func TestCoordsMapAction(t *testing.T) {
	full := &Display{W: 1280, H: 800, SourceRect: Rect{W: 1280, H: 800}, Delivered: Rect{W: 640, H: 400}}
	x, y := 10.0, 20.0
	a := Action{Verb: Drag, X: &x, Y: &y, To: &Target{Kind: PointPx, X: 30, Y: 40}}
	if err := (Coords{Space: CoordsFrame}).MapAction(&a, full); err != nil {
		t.Fatal(err)
	}
	if a.X != nil || a.Target == nil || *a.Target != (Target{Kind: PointPx, X: 20, Y: 40}) || *a.To != (Target{Kind: PointPx, X: 60, Y: 80}) {
		t.Errorf("drag mapped to %+v to %+v", a.Target, a.To)
	}
	half := Action{Verb: Click, X: &x}
	if err := (Coords{Space: CoordsFrame}).MapAction(&half, full); CodeOf(err) != CodeInvalidAction {
		t.Errorf("x without y: got %v; want invalid_action", err)
	}
}

func TestParseCoords(t *testing.T) {
	var obj any
	_ = json.Unmarshal([]byte(`{"w": 1000, "h": 625}`), &obj)
	ok := map[string]any{"": nil, "frame": "frame", "norm1000": "NORM1000", "image 1000x625": obj}
	for want, in := range ok {
		c, err := ParseCoords(in)
		if err != nil {
			t.Fatalf("%v: %v", in, err)
		}
		if want == "" {
			want = CoordsScreen
		}
		if c.String() != want {
			t.Errorf("%v: got %s; want %s", in, c, want)
		}
		if back, err := ParseCoords(c.Wire()); err != nil || back != c {
			t.Errorf("%s round trip: %+v, %v", c, back, err)
		}
	}
	for _, in := range []any{"pixels", 3, map[string]any{"w": 0, "h": 5}, map[string]any{"w": 1.5, "h": 5}, map[string]any{"w": 5}, map[string]any{"w": int64(1) << 40, "h": 5}} {
		if _, err := ParseCoords(in); CodeOf(err) != CodeInvalidAction {
			t.Errorf("%v: got %v; want invalid_action", in, err)
		}
	}
}

func TestMapMarkRefused(t *testing.T) {
	d := &Display{W: 1920, H: 1080, SourceRect: Rect{W: 1920, H: 1080}, Delivered: Rect{W: 1280, H: 720}}
	for _, c := range []Coords{{Space: CoordsScreen}, {Space: CoordsNorm1000}} {
		a := Action{Verb: Click, Target: MarkRef("3")}
		err := c.MapAction(&a, d)
		if CodeOf(err) != CodeUnsupported || !strings.Contains(err.Error(), "observe.som") {
			t.Errorf("%v: MapAction(mark) = %v; want unsupported naming observe.som", c, err)
		}
		if _, err := c.MapTarget(*MarkRef("3"), d); CodeOf(err) != CodeUnsupported {
			t.Errorf("%v: MapTarget(mark) = %v; want unsupported", c, err)
		}
	}
}

func TestOutsideSaysHowRead(t *testing.T) {
	d := &Display{W: 1920, H: 1080, SourceRect: Rect{W: 1920, H: 1080}, Delivered: Rect{W: 1280, H: 720}}
	for c, want := range map[Coords]string{
		{Space: CoordsNorm1000}:               "0..1000 relative to the observed 1280x720 frame",
		{Space: CoordsFrame}:                  "absolute pixels of the observed 1280x720 frame",
		{Space: CoordsImage, W: 1288, H: 728}: "pixels of a 1288x728 image",
	} {
		a := Action{Verb: Click, Target: Px(1500, 300)}
		err := c.MapAction(&a, d)
		if CodeOf(err) != CodeInvalidAction || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v; want invalid_action saying %q", c, err, want)
		}
	}
}
