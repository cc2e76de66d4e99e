package guest

import (
	"context"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/rgbs2"
)

// frame is one capture in RGB24 after scope and downscale.
type frame struct {
	rgb     []byte
	w, h    int
	hash    string
	pointer [2]int
	display aci.Display
	same    bool          // no damage since the last capture, whose hash the caller holds: nothing captured
	s2      []byte        // raws2: the frame compressed at capture (rgb is then nil)
	bands   []int         // raws2: the byte length of each band's S2 elements
	encode  time.Duration // raws2: how long the compression took, within the capture
}

func validateObserve(o wire.ObserveArgs) error {
	if o.Format != "" && o.Format != wire.FormatRawS2 && !aci.KnownFormat(o.Format) {
		return aci.Errorf(aci.CodeBadRequest, "observe: unknown format %q (want one of %v or %s)", o.Format, aci.Formats, wire.FormatRawS2)
	}
	if o.MaxLongEdge < 0 || o.Quality < 0 || o.Quality > 100 {
		return aci.Errorf(aci.CodeBadRequest, "observe: negative or out-of-range max_long_edge/quality")
	}
	if err := o.Settle.Validate(); err != nil {
		return err
	}
	if _, err := a11yMode(o.A11y); err != nil {
		return err
	}
	if _, _, err := parseScope(o.Scope); err != nil {
		return err
	}
	return nil
}

// parseScope returns the scope kind and, for "window:<id>", the window id.
func parseScope(scope string) (string, xproto.Window, error) {
	switch scope {
	case "", aci.ScopeScreen:
		return aci.ScopeScreen, 0, nil
	case aci.ScopeActiveWindow:
		return scope, 0, nil
	}
	if id, ok := strings.CutPrefix(scope, "window:"); ok {
		n, err := strconv.ParseUint(id, 0, 32)
		if err == nil && n != 0 {
			return "window", xproto.Window(n), nil
		}
	}
	return "", 0, aci.Errorf(aci.CodeBadRequest, "observe: bad scope %q (want screen, active_window or window:<id>)", scope)
}

// observe settles (when asked), captures, answers not_modified on a hash
// match, and otherwise encodes. m, when set, is where an action began: the
// settle then waits for the action's damage.
func (s *Server) observe(ctx context.Context, o wire.ObserveArgs, m *damageMark) (*wire.Shot, error) {
	if err := validateObserve(o); err != nil {
		return nil, err
	}
	format := o.Format
	if format == "" {
		format = aci.FormatPNG
	}
	var info *aci.SettleInfo
	t0 := time.Now()
	if o.Settle != nil && o.Settle.MaxMS > 0 {
		afterInput := m != nil || o.AfterInput
		if m == nil {
			mk, err := s.x.mark(ctx)
			if err != nil {
				return nil, err
			}
			m = &mk
		}
		var frame <-chan browserNews
		if afterInput {
			m.taken = s.x.inputTaken(ctx, m.pointer, m.start.Add(time.Duration(o.Settle.MaxMS)*time.Millisecond))
			fctx, cancel := context.WithCancel(ctx)
			defer cancel()
			frame = s.frameSignal(fctx, m.start.Add(time.Duration(o.Settle.MaxMS)*time.Millisecond))
		}
		var err error
		if info, err = s.x.settle(ctx, *m, *o.Settle, afterInput, frame); err != nil {
			return nil, err
		}
	}
	t1 := time.Now()
	f := &frame{}
	err := s.x.run(ctx, 0, func(x *xconn) error { return s.x.pipe.grab(ctx, x, o, f) })
	if err != nil {
		return nil, err
	}
	t2 := time.Now()
	defer func() {
		if f.rgb != nil && format != aci.FormatRaw {
			s.x.pipe.rgbBuf.put(f.rgb)
		}
	}()
	shot := &wire.Shot{Hash: f.hash, W: f.w, H: f.h, Format: format, Pointer: f.pointer, Display: f.display, Settle: info,
		Timings: map[string]int64{"settle_us": t1.Sub(t0).Microseconds(), "capture_us": (t2.Sub(t1) - f.encode).Microseconds()}}
	if shot.A11y, err = s.observeTree(ctx, o); err != nil {
		return nil, err
	}
	if f.same || slices.Contains(o.IfNoneMatch, f.hash) {
		shot.NotModified = true
		return shot, nil
	}
	if f.s2 != nil {
		shot.Data, shot.BandRows, shot.Bands = f.s2, rgbs2.BandRows, f.bands
		shot.Timings["encode_us"] = f.encode.Microseconds()
		return shot, nil
	}
	t3 := time.Now()
	data, err := s.x.pipe.encode(f, format, o.Quality)
	if err != nil {
		return nil, aci.Errorf(aci.CodeInternal, "encode %s: %v", format, err)
	}
	shot.Timings["encode_us"] = time.Since(t3).Microseconds()
	shot.Data = data
	return shot, nil
}

func clip(r aci.Rect, w, h int) aci.Rect {
	x0, y0 := max(r.X, 0), max(r.Y, 0)
	x1, y1 := min(r.X+r.W, w), min(r.Y+r.H, h)
	return aci.Rect{X: x0, Y: y0, W: x1 - x0, H: y1 - y0}
}

// scaledSize shrinks w×h so that its long edge is at most maxLong.
func scaledSize(w, h, maxLong int) (int, int) {
	long := max(w, h)
	if maxLong <= 0 || long <= maxLong {
		return w, h
	}
	f := float64(maxLong) / float64(long)
	return max(1, int(math.Round(float64(w)*f))), max(1, int(math.Round(float64(h)*f)))
}
