package guest

import (
	"context"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/rgbs2"
	"github.com/zeebo/xxh3"
)

const defaultJPEGQuality = 80

// FrameHash is the frame identity, as 32 lowercase hex chars: XXH3-128,
// the dimensions folded into the seed, of the XXH3-128s of the frame's bands
// of rgbs2.BandRows rows of RGB24 bytes. Hashed by bands, a frame whose text
// line changed is hashed again only where it changed (rgbCache.frameHash).
func FrameHash(rgb []byte, w, h int) string {
	stride := w * 3
	sums := make([]byte, 0, 16*rgbs2.Bands(h))
	for i := range rgbs2.Bands(h) {
		sum := bandHash(rgb[i*rgbs2.BandRows*stride : min((i+1)*rgbs2.BandRows, h)*stride])
		sums = append(sums, sum[:]...)
	}
	return frameHashOf(sums, w, h)
}

// bandHash is one band's part of FrameHash.
func bandHash(px []byte) [16]byte { return xxh3.Hash128(px).Bytes() }

// frameHashOf is FrameHash from the bands' hashes.
func frameHashOf(sums []byte, w, h int) string {
	sum := xxh3.Hash128Seed(sums, uint64(w)<<32|uint64(h)).Bytes()
	return hex.EncodeToString(sum[:])
}

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

// lastCapture is what the last capture showed and the damage seen by then.
type lastCapture struct {
	conn   *xconn // nil: no capture to compare with
	seq    uint64
	src    aci.Rect
	ow, oh int
	hash   string
}

func validateObserve(o wire.ObserveArgs) error {
	switch o.Format {
	case "", aci.FormatPNG, aci.FormatJPEG, aci.FormatRaw, wire.FormatRawS2:
	default:
		return aci.Errorf(aci.CodeBadRequest, "observe: unknown format %q (want png, jpeg, raw or raws2)", o.Format)
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
	f, err := s.grab(ctx, o)
	if err != nil {
		return nil, err
	}
	t2 := time.Now()
	defer func() {
		if f.rgb != nil && format != aci.FormatRaw {
			s.x.rgbBuf.put(f.rgb)
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
	data, err := s.x.encode(f, format, o.Quality)
	if err != nil {
		return nil, aci.Errorf(aci.CodeInternal, "encode %s: %v", format, err)
	}
	shot.Timings["encode_us"] = time.Since(t3).Microseconds()
	shot.Data = data
	return shot, nil
}

// grab captures the scope's rectangle and converts it to RGB24. With DAMAGE,
// a screen that has not changed since the last capture, whose hash the caller
// holds, is answered from that capture without reading a pixel.
func (s *Server) grab(ctx context.Context, o wire.ObserveArgs) (*frame, error) {
	kind, win, _ := parseScope(o.Scope)
	f := &frame{}
	d := s.x
	err := s.x.run(ctx, 0, func(x *xconn) error {
		src := aci.Rect{W: x.w, H: x.h}
		switch kind {
		case aci.ScopeActiveWindow:
			w, ok := x.activeWindow()
			if !ok {
				return aci.Errorf(aci.CodeNotFound, "observe: no active window")
			}
			win = w
			fallthrough
		case "window":
			r, err := x.windowRect(win)
			if err != nil {
				return err
			}
			src = clip(r, x.w, x.h)
			if src.W <= 0 || src.H <= 0 {
				return aci.Errorf(aci.CodeNotFound, "observe: window %d is off screen", win)
			}
		}
		ow, oh := scaledSize(src.W, src.H, o.MaxLongEdge)
		f.w, f.h = ow, oh
		f.display = aci.Display{W: x.w, H: x.h, SourceRect: src, Delivered: aci.Rect{W: ow, H: oh}}
		p, err := x.pointer()
		f.pointer = p
		if err != nil {
			return err
		}
		x.initFB()
		grabbed := x.fb != nil
		ungrab := func() {
			if grabbed {
				xproto.UngrabServer(x.c)
				grabbed = false
			}
		}
		defer ungrab()
		if grabbed {
			// Nothing draws while the pixels are read (framebuffer.go): the
			// barrier below is the round trip that puts the grab in force.
			xproto.GrabServer(x.c)
		}
		var seq uint64
		var rows []bool // the rows to hash; nil: every row
		if x.dmg.ok {
			if err := x.barrier(ctx); err != nil {
				return err
			}
			seq = x.dmg.snap().seq
			l := d.last
			sameGeometry := l.conn == x && l.src == src && l.ow == ow && l.oh == oh
			if sameGeometry && l.seq == seq && slices.Contains(o.IfNoneMatch, l.hash) {
				f.hash, f.same = l.hash, true
				return nil
			}
			// The rows drawn since the last capture count only when it was
			// of this geometry on this connection. It is forgotten until
			// this one is done, so a capture that fails from here on leaves
			// the next to hash every row.
			d.last = lastCapture{}
			rects, ok, err := x.damaged()
			if err != nil {
				return err
			}
			if ok && sameGeometry {
				rows = d.damagedRows(rects, src)
			}
		}
		var bgrx []byte
		var stride int
		if x.fb != nil {
			bgrx, stride = x.fb.rect(src)
		} else if bgrx, stride, err = x.getImage(src); err != nil {
			return err
		}
		// Only the rows that changed since the last capture convert; a
		// frame the caller holds is not copied out.
		d.conv.update(bgrx, stride, src, ow, oh, rows)
		ungrab()
		f.hash = d.conv.frameHash()
		switch {
		case slices.Contains(o.IfNoneMatch, f.hash):
		case o.Format == wire.FormatRawS2:
			// Compressed here, under the display lock, straight from the
			// converted capture: only the bands whose rows changed since
			// the last raws2 frame are compressed again, and no copy of
			// the pixels is made.
			t := time.Now()
			f.s2, f.bands, err = d.s2.Encode(d.s2Buf.get(0), d.conv.rgb, ow, oh, d.conv.ver)
			f.encode = time.Since(t)
			if err != nil {
				return aci.Errorf(aci.CodeInternal, "encode raws2: %v", err)
			}
		default:
			f.rgb = d.rgbBuf.get(ow * oh * 3)
			copy(f.rgb, d.conv.rgb)
		}
		d.last = lastCapture{src: src, ow: ow, oh: oh, hash: f.hash}
		if x.dmg.ok {
			d.last.conn, d.last.seq = x, seq
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// damagedRows flags the rows of src (relative to it) that rects, in root
// coordinates, touch; its slice is reused between captures.
func (d *display) damagedRows(rects []xproto.Rectangle, src aci.Rect) []bool {
	d.rowsBuf = grow(d.rowsBuf, src.H)
	clear(d.rowsBuf)
	for _, r := range rects {
		y0, y1 := max(int(r.Y), src.Y), min(int(r.Y)+int(r.Height), src.Y+src.H)
		if int(r.X) >= src.X+src.W || int(r.X)+int(r.Width) <= src.X {
			continue
		}
		for y := y0; y < y1; y++ {
			d.rowsBuf[y-src.Y] = true
		}
	}
	return d.rowsBuf
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

// getImage reads r of the root window as 32-bit BGRX pixels. With MIT-SHM
// the result aliases the shared segment and is valid until the next capture.
func (x *xconn) getImage(r aci.Rect) ([]byte, int, error) {
	x.initSHM()
	if x.shmOK {
		_, err := shm.GetImage(x.c, xproto.Drawable(x.root), int16(r.X), int16(r.Y), uint16(r.W), uint16(r.H),
			0xffffffff, xproto.ImageFormatZPixmap, x.shmSeg, 0).Reply()
		if err == nil {
			return x.shmMem[:r.W*r.H*4], r.W * 4, nil
		}
		if x.isDead() {
			return nil, 0, err
		}
		x.shmOK = false // fall back for good on this connection
	}
	reply, err := xproto.GetImage(x.c, xproto.ImageFormatZPixmap, xproto.Drawable(x.root), int16(r.X), int16(r.Y),
		uint16(r.W), uint16(r.H), 0xffffffff).Reply()
	if err != nil {
		return nil, 0, err
	}
	if len(reply.Data) < r.W*r.H*4 {
		return nil, 0, fmt.Errorf("getimage: short reply (%d bytes for %dx%d)", len(reply.Data), r.W, r.H)
	}
	return reply.Data, r.W * 4, nil
}

// bufSlot keeps one multi-megabyte buffer between frames: a fresh one per
// step costs a page fault per 4 KiB page on first touch. A caller takes it
// out (get) and hands it back once nothing refers to it (put); a second
// caller meanwhile gets a new one.
type bufSlot struct {
	mu sync.Mutex
	b  []byte
}

// get returns a buffer of n bytes, the kept one when it is large enough.
func (s *bufSlot) get(n int) []byte {
	s.mu.Lock()
	b := s.b
	s.b = nil
	s.mu.Unlock()
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

// put hands b back for reuse; the larger of it and the kept one stays.
func (s *bufSlot) put(b []byte) {
	s.mu.Lock()
	if cap(b) > cap(s.b) {
		s.b = b
	}
	s.mu.Unlock()
}

// releaseFrame hands back the buffer a sent shot's data lives in: a raw
// frame's is the capture copy, a raws2 frame's the S2 output.
func (d *display) releaseFrame(sh *wire.Shot) {
	switch sh.Format {
	case aci.FormatRaw:
		d.rgbBuf.put(sh.Data)
	case wire.FormatRawS2:
		d.s2Buf.put(sh.Data)
	}
}

func (d *display) encode(f *frame, format string, quality int) ([]byte, error) {
	switch format {
	case aci.FormatRaw:
		return f.rgb, nil
	case aci.FormatPNG:
		// Straight from RGB24, no RGBA copy, deflating only the bands that
		// changed since the last frame (docs/architecture.md, "Frames").
		return d.png.Encode(nil, f.rgb, f.w, f.h)
	}
	if quality == 0 {
		quality = defaultJPEGQuality
	}
	// Straight from RGB24 too, at about an eighth of image/jpeg's cost,
	// coding only the rows of MCUs that changed.
	return d.jpeg.Encode(nil, f.rgb, f.w, f.h, quality)
}
