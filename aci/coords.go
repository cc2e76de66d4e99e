package aci

import (
	"fmt"
	"math"
	"strings"
)

// Coordinate spaces: how the numbers in a step's actions (and in its model
// text) are read. docs/api.md, "Coordinates".
const (
	// CoordsScreen: point_px is a screen pixel, point_norm a 0..1 fraction of
	// the screen (1.0 is the last pixel). The default.
	CoordsScreen = "screen"
	// CoordsFrame: pixels of the frame the env last delivered.
	CoordsFrame = "frame"
	// CoordsNorm: 0..1 fractions of the delivered frame (1.0 is its last pixel).
	CoordsNorm = "norm"
	// CoordsNorm1000: 0..1000 relative coordinates of the delivered frame
	// (UI-TARS 1.0, Seed, Qwen3-VL, OS-Atlas); 1000 is its last pixel.
	CoordsNorm1000 = "norm1000"
	// CoordsImage: pixels of a W x H image covering the delivered frame's
	// source area, such as the screenshot after a VLM processor resized it.
	CoordsImage = "image"
)

// Coords is a coordinate space. The zero value is CoordsScreen. On the wire it
// is a string (screen, frame, norm, norm1000) or an object {w, h} for an image
// space; ParseCoords reads either.
type Coords struct {
	Space string
	W, H  int // image space only
}

// MaxImageSide bounds the sides of an image coordinate space.
const MaxImageSide = 1 << 15

// ParseCoords reads a wire coordinate space: nil or "" is screen; a string
// names a space; a map {w, h} is an image space. Anything else is
// invalid_action.
func ParseCoords(v any) (Coords, error) {
	switch t := v.(type) {
	case nil:
		return Coords{Space: CoordsScreen}, nil
	case string:
		switch s := strings.ToLower(strings.TrimSpace(t)); s {
		case "", CoordsScreen:
			return Coords{Space: CoordsScreen}, nil
		case CoordsFrame, CoordsNorm, CoordsNorm1000:
			return Coords{Space: s}, nil
		}
		return Coords{}, Errorf(CodeInvalidAction, "unknown coords %q (want screen, frame, norm, norm1000 or {w, h})", t)
	case map[string]any:
		w, okw := intOf(t["w"])
		h, okh := intOf(t["h"])
		if !okw || !okh || len(t) != 2 {
			return Coords{}, Errorf(CodeInvalidAction, "coords object must be exactly {w, h} with integer sides")
		}
		return ImageCoords(w, h)
	}
	return Coords{}, Errorf(CodeInvalidAction, "coords must be a string or {w, h}, not %T", v)
}

// ImageCoords is the space of a w x h image; sides must be 1..MaxImageSide.
func ImageCoords(w, h int) (Coords, error) {
	if w < 1 || h < 1 || w > MaxImageSide || h > MaxImageSide {
		return Coords{}, Errorf(CodeInvalidAction, "coords image %dx%d: sides must be 1..%d", w, h, MaxImageSide)
	}
	return Coords{Space: CoordsImage, W: w, H: h}, nil
}

// Wire is the value ParseCoords reads back: a string, or {w, h}.
func (c Coords) Wire() any {
	if c.Space == CoordsImage {
		return map[string]any{"w": c.W, "h": c.H}
	}
	if c.Space == "" {
		return CoordsScreen
	}
	return c.Space
}

func (c Coords) String() string {
	if c.Space == CoordsImage {
		return fmt.Sprintf("image %dx%d", c.W, c.H)
	}
	if c.Space == "" {
		return CoordsScreen
	}
	return c.Space
}

// IsScreen reports whether c reads coordinates as the screen (no mapping).
func (c Coords) IsScreen() bool { return c.Space == "" || c.Space == CoordsScreen }

// intOf reads an integral number of any of the types msgpack and JSON decode
// numbers into.
func intOf(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int8:
		return int(n), true
	case int16:
		return int(n), true
	case int32:
		return int(n), true
	case int64:
		return clampInt(n)
	case uint8:
		return int(n), true
	case uint16:
		return int(n), true
	case uint32:
		return clampInt(int64(n))
	case uint64:
		if n > math.MaxInt32 {
			return 0, false
		}
		return int(n), true
	case float64:
		if n != math.Trunc(n) || math.Abs(n) > math.MaxInt32 {
			return 0, false
		}
		return int(n), true
	case float32:
		return intOf(float64(n))
	}
	return 0, false
}

func clampInt(n int64) (int, bool) {
	if n > math.MaxInt32 || n < math.MinInt32 {
		return 0, false
	}
	return int(n), true
}

// MapTarget maps t, given in space c, to a point_px target on the screen.
// d is the display descriptor of the frame the env last delivered; every
// space but screen needs it (nil, or one with no delivered size, is
// invalid_action). A point outside the space is invalid_action: nothing is
// clamped or guessed. In screen space t is returned as is (the guest checks
// it against the screen).
//
// A delivered pixel p maps to source origin + floor(p · source / delivered);
// within a mapped space a point_norm target is a 0..1 fraction of the
// delivered frame, 1.0 being its last pixel.
func (c Coords) MapTarget(t Target, d *Display) (Target, error) {
	if t.Kind == Mark {
		return Target{}, markErr(&Action{Verb: "point"}, &t)
	}
	if c.IsScreen() || t.Kind == ElementRef { // an element has no coordinates to map
		return t, nil
	}
	if math.IsNaN(t.X) || math.IsNaN(t.Y) || math.IsInf(t.X, 0) || math.IsInf(t.Y, 0) {
		return Target{}, Errorf(CodeInvalidAction, "point (%v, %v) is not a number", t.X, t.Y)
	}
	if d == nil || d.Delivered.W <= 0 || d.Delivered.H <= 0 || d.SourceRect.W <= 0 || d.SourceRect.H <= 0 {
		return Target{}, Errorf(CodeInvalidAction, "coords %s need a delivered frame: observe the env first", c)
	}
	dw, dh := float64(d.Delivered.W), float64(d.Delivered.H)
	var fx, fy float64 // a point on the delivered frame, in its pixels
	switch {
	case t.Kind == PointNorm:
		if t.X < 0 || t.Y < 0 || t.X > 1 || t.Y > 1 {
			return Target{}, Errorf(CodeInvalidAction, "point_norm (%v, %v) is outside 0..1", t.X, t.Y)
		}
		fx, fy = math.Round(t.X*(dw-1)), math.Round(t.Y*(dh-1))
	case t.Kind != PointPx && t.Kind != "":
		return Target{}, Errorf(CodeInvalidAction, "unknown target kind %q", t.Kind)
	default:
		var err error
		if fx, fy, err = c.toFrame(t.X, t.Y, dw, dh); err != nil {
			return Target{}, err
		}
	}
	sw, sh := float64(d.SourceRect.W), float64(d.SourceRect.H)
	x := float64(d.SourceRect.X) + math.Floor(fx*sw/dw)
	y := float64(d.SourceRect.Y) + math.Floor(fy*sh/dh)
	return Target{Kind: PointPx, X: x, Y: y}, nil
}

// toFrame reads (x, y) in c as a pixel of a dw x dh delivered frame.
func (c Coords) toFrame(x, y, dw, dh float64) (float64, float64, error) {
	out := func(lo, hiX, hiY string) error {
		return Errorf(CodeInvalidAction, "point (%v, %v) is outside the %s space (%s..%s, %s..%s); coordinates read as %s",
			x, y, c, lo, hiX, lo, hiY, c.reading(dw, dh))
	}
	switch c.Space {
	case CoordsFrame:
		if x < 0 || y < 0 || x >= dw || y >= dh {
			return 0, 0, out("0", fmt.Sprintf("<%v", dw), fmt.Sprintf("<%v", dh))
		}
		return x, y, nil
	case CoordsNorm:
		if x < 0 || y < 0 || x > 1 || y > 1 {
			return 0, 0, out("0", "1", "1")
		}
		return math.Round(x * (dw - 1)), math.Round(y * (dh - 1)), nil
	case CoordsNorm1000:
		if x < 0 || y < 0 || x > 1000 || y > 1000 {
			return 0, 0, out("0", "1000", "1000")
		}
		return math.Round(x / 1000 * (dw - 1)), math.Round(y / 1000 * (dh - 1)), nil
	case CoordsImage:
		iw, ih := float64(c.W), float64(c.H)
		if x < 0 || y < 0 || x >= iw || y >= ih {
			return 0, 0, out("0", fmt.Sprintf("<%d", c.W), fmt.Sprintf("<%d", c.H))
		}
		return math.Floor(x * dw / iw), math.Floor(y * dh / ih), nil
	}
	return 0, 0, Errorf(CodeInvalidAction, "unknown coords %q", c.Space)
}

// reading says in words how c reads a point of a dw x dh delivered frame,
// for the error of a point outside it: a model that saw a larger or
// differently scaled screenshot than the space assumes lands there.
func (c Coords) reading(dw, dh float64) string {
	switch c.Space {
	case CoordsFrame:
		return fmt.Sprintf("absolute pixels of the observed %vx%v frame (declare coords {w, h} for pixels of a resized screenshot)", dw, dh)
	case CoordsNorm:
		return fmt.Sprintf("0..1 fractions of the observed %vx%v frame (declare coords frame or {w, h} for pixels)", dw, dh)
	case CoordsNorm1000:
		return fmt.Sprintf("0..1000 relative to the observed %vx%v frame, as UI-TARS 1.0, Seed and Qwen3-VL write them (a model that writes pixels, such as Qwen2.5-VL or UI-TARS-1.5, needs coords {w, h}: its resized screenshot's size)", dw, dh)
	case CoordsImage:
		return fmt.Sprintf("pixels of a %dx%d image covering the observed %vx%v frame (the screenshot as the model's processor resized it)", c.W, c.H, dw, dh)
	}
	return c.String()
}

// MapAction rewrites every point of a (its target or x/y, and a drag's to)
// from space c onto screen pixels through d; see MapTarget. Actions without
// points are left alone.
func (c Coords) MapAction(a *Action, d *Display) error {
	for _, t := range []*Target{a.Target, a.To} {
		if t != nil && t.Kind == Mark {
			return markErr(a, t)
		}
	}
	if c.IsScreen() {
		return nil
	}
	if t, ok := a.Point(); ok {
		m, err := c.MapTarget(t, d)
		if err != nil {
			return err
		}
		a.Target, a.X, a.Y = &m, nil, nil
	} else if a.X != nil || a.Y != nil {
		return Errorf(CodeInvalidAction, "%s needs both x and y", a.Verb)
	}
	if a.To != nil {
		m, err := c.MapTarget(*a.To, d)
		if err != nil {
			return err
		}
		a.To = &m
	}
	return nil
}
