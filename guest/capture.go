package guest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/rgbjpeg"
	"github.com/shinken-rl/shinken/internal/rgbpng"
	"github.com/shinken-rl/shinken/internal/rgbs2"
)

// capturePipeline turns a display's pixels into the frames observe
// delivers, in four stages (docs/architecture.md, "Cost of a step"):
// capture reads the scope's rectangle from the X server (its framebuffer,
// framebuffer.go, or MIT-SHM/GetImage), convert brings the RGB24 copy up to
// date where rows were drawn (rgbCache, convert.go), hash takes FrameHash
// by bands, and encode writes PNG, JPEG or S2, each again only where rows
// changed. It runs under its display's lock; the buffers a sent frame
// lives in come back through release.
type capturePipeline struct {
	conv rgbCache        // the last capture in RGB24
	png  rgbpng.Encoder  // its bands deflated
	s2   rgbs2.Encoder   // its bands S2-compressed, for raws2
	jpeg rgbjpeg.Encoder // its rows of MCUs coded
	last lastCapture     // the last capture, for not_modified without capturing
	rows []bool          // scratch: the rows a capture hashes

	rgbBuf bufSlot // a capture's RGB24 copy, reused once encoded or sent
	s2Buf  bufSlot // a raws2 frame's S2 output, reused once sent
}

// lastCapture is what the last capture showed and the damage seen by then.
type lastCapture struct {
	conn   *xconn // nil: no capture to compare with
	seq    uint64
	src    aci.Rect
	ow, oh int
	hash   string
}

// grab captures the scope's rectangle on x into f, converted to RGB24.
// With DAMAGE, a screen that has not changed since the last capture, whose
// hash the caller holds, is answered from that capture without reading a
// pixel.
func (p *capturePipeline) grab(ctx context.Context, x *xconn, o wire.ObserveArgs, f *frame) error {
	kind, win, _ := parseScope(o.Scope)
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
	ptr, err := x.pointer()
	f.pointer = ptr
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
		l := p.last
		sameGeometry := l.conn == x && l.src == src && l.ow == ow && l.oh == oh
		if sameGeometry && l.seq == seq && slices.Contains(o.IfNoneMatch, l.hash) {
			f.hash, f.same = l.hash, true
			return nil
		}
		// The rows drawn since the last capture count only when it was
		// of this geometry on this connection. It is forgotten until
		// this one is done, so a capture that fails from here on leaves
		// the next to hash every row.
		p.last = lastCapture{}
		rects, ok, err := x.damaged()
		if err != nil {
			return err
		}
		if ok && sameGeometry {
			rows = p.damagedRows(rects, src)
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
	p.conv.update(bgrx, stride, src, ow, oh, rows)
	ungrab()
	f.hash = p.conv.frameHash()
	switch {
	case slices.Contains(o.IfNoneMatch, f.hash):
	case o.Format == wire.FormatRawS2:
		// Compressed here, under the display lock, straight from the
		// converted capture: only the bands whose rows changed since
		// the last raws2 frame are compressed again, and no copy of
		// the pixels is made.
		t := time.Now()
		f.s2, f.bands, err = p.s2.Encode(p.s2Buf.get(0), p.conv.rgb, ow, oh, p.conv.ver)
		f.encode = time.Since(t)
		if err != nil {
			return aci.Errorf(aci.CodeInternal, "encode raws2: %v", err)
		}
	default:
		f.rgb = p.rgbBuf.get(ow * oh * 3)
		copy(f.rgb, p.conv.rgb)
	}
	p.last = lastCapture{src: src, ow: ow, oh: oh, hash: f.hash}
	if x.dmg.ok {
		p.last.conn, p.last.seq = x, seq
	}
	return nil
}

// damagedRows flags the rows of src (relative to it) that rects, in root
// coordinates, touch; its slice is reused between captures.
func (p *capturePipeline) damagedRows(rects []xproto.Rectangle, src aci.Rect) []bool {
	p.rows = grow(p.rows, src.H)
	clear(p.rows)
	for _, r := range rects {
		y0, y1 := max(int(r.Y), src.Y), min(int(r.Y)+int(r.Height), src.Y+src.H)
		if int(r.X) >= src.X+src.W || int(r.X)+int(r.Width) <= src.X {
			continue
		}
		for y := y0; y < y1; y++ {
			p.rows[y-src.Y] = true
		}
	}
	return p.rows
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
func (p *capturePipeline) release(sh *wire.Shot) {
	switch sh.Format {
	case aci.FormatRaw:
		p.rgbBuf.put(sh.Data)
	case wire.FormatRawS2:
		p.s2Buf.put(sh.Data)
	}
}

func (p *capturePipeline) encode(f *frame, format string, quality int) ([]byte, error) {
	switch format {
	case aci.FormatRaw:
		return f.rgb, nil
	case aci.FormatPNG:
		// Straight from RGB24, no RGBA copy, deflating only the bands that
		// changed since the last frame (docs/architecture.md, "Frames").
		return p.png.Encode(nil, f.rgb, f.w, f.h)
	}
	if quality == 0 {
		quality = aci.DefaultJPEGQuality
	}
	// Straight from RGB24 too, at about an eighth of image/jpeg's cost,
	// coding only the rows of MCUs that changed.
	return p.jpeg.Encode(nil, f.rgb, f.w, f.h, quality)
}
