package envserver

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"image/png"
	"slices"
	"strconv"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/render"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/rgbs2"
	"github.com/zeebo/xxh3"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// An env's observation: the request's settings (observe), the capture on
// the guest, the frames kept and delivered once (frame dedup), the
// accessibility tree and the Set-of-Mark labels drawn over it
// (docs/architecture.md, "Frame dedup" and "Structured observation").

// observeFor resolves the request's observation settings and validates them.
func (s *Server) observeFor(o *api.Observe) (api.Observe, error) {
	obs := s.cfg.DefaultObserve
	if o != nil {
		obs = *o
		if obs.Format == "" {
			obs.Format = s.cfg.DefaultObserve.Format
		}
	}
	switch obs.Format {
	case aci.FormatPNG, aci.FormatRaw:
		obs.Quality = 0
	case aci.FormatJPEG:
		if obs.Quality == 0 {
			obs.Quality = aci.DefaultJPEGQuality
		}
		if obs.Quality < 1 || obs.Quality > 100 {
			return obs, aci.Errorf(aci.CodeBadRequest, "observe.quality %d: must be 1..100", obs.Quality)
		}
	default:
		return obs, aci.Errorf(aci.CodeBadRequest, "observe.format %q: want png, jpeg or raw", obs.Format)
	}
	if obs.MaxLongEdge < 0 {
		return obs, aci.Errorf(aci.CodeBadRequest, "observe: negative max_long_edge")
	}
	if obs.Settle == nil {
		obs.Settle = s.cfg.DefaultObserve.Settle
	}
	if obs.SoM {
		// Marks are drawn over the tree's boxes: the whole tree, on an
		// image format.
		switch {
		case obs.Format == aci.FormatRaw:
			return obs, aci.Errorf(aci.CodeBadRequest, "observe.som draws on png or jpeg frames, not raw")
		case obs.A11y == aci.A11yDiff:
			return obs, aci.Errorf(aci.CodeBadRequest, "observe.som needs the whole tree (a11y tree), not a diff")
		case obs.A11y == "" || obs.A11y == aci.A11yNone:
			obs.A11y = aci.A11yFull
		}
	}
	if err := s.checkA11y(&obs); err != nil {
		return obs, err
	}
	return obs, obs.Settle.Validate()
}

// checkA11y validates observe.a11y and refuses it where the pool's sandboxes
// have no accessibility bus.
func (s *Server) checkA11y(o *aci.Observe) error {
	switch o.A11y {
	case "", aci.A11yNone:
		o.A11y = ""
		return nil
	case aci.A11yFull, aci.A11yDiff:
	default:
		return aci.Errorf(aci.CodeBadRequest, "observe.a11y %q: want none, tree or diff", o.A11y)
	}
	if !s.pool.Capabilities().A11y {
		return aci.Errorf(aci.CodeUnsupported, "observe.a11y: this server's %s sandboxes have no accessibility bus", s.pool.Capabilities().Provider)
	}
	return nil
}

// observe captures e's screen under b's settings, through the shared frame
// cache, and returns the observation, the encoded bytes (nil when the client
// already has them) and how the capture was settled. act, when non-nil, is a
// capture that came back with an action and is used instead of a new one.
// afterInput settles a new capture as after an action (a desktop just set up
// or restored is still drawing).
func (s *Server) observe(ctx context.Context, e *env, b *batch, act *wire.Shot, afterInput bool) (*aci.Observation, []byte, *aci.SettleInfo, error) {
	shot := act
	if shot == nil {
		var err error
		args := s.observeArgs(e, b)
		args.AfterInput = afterInput
		shot, err = e.lease.Guest().Screenshot(ctx, args)
		if err != nil {
			return nil, nil, nil, err
		}
	}
	settle := shot.Settle
	key := frameKey{hash: shot.Hash, format: b.obs.Format, quality: b.obs.Quality}
	var data []byte
	switch {
	case !shot.NotModified:
		s.m.frames.WithLabelValues("encoded").Inc()
		var err error
		if data, err = s.keepFrame(ctx, e, b, key, shot); err != nil {
			return nil, nil, nil, err
		}
	case b.have[shot.Hash]:
		s.m.frames.WithLabelValues("not_modified").Inc()
	default:
		s.m.frames.WithLabelValues("not_modified").Inc()
		var ok bool
		if data, ok = b.cached(s.cache, key); ok {
			s.m.frames.WithLabelValues("cache_hit").Inc()
			break
		}
		// Evicted between the guest's answer and now: capture for real.
		s.m.frames.WithLabelValues("cache_miss").Inc()
		args := wire.ObserveArgs{Observe: s.guestObserve(e, b.obs)}
		fresh, err := e.lease.Guest().Screenshot(ctx, args)
		if err != nil {
			return nil, nil, nil, err
		}
		shot = fresh
		s.m.frames.WithLabelValues("encoded").Inc()
		key.hash = fresh.Hash
		if data, err = s.keepFrame(ctx, e, b, key, shot); err != nil {
			return nil, nil, nil, err
		}
	}
	e.lastFrame = shot.Hash
	e.lastTimings = shot.Timings
	d := shot.Display
	e.display = &d
	obs := &aci.Observation{
		Frame: shot.Hash, W: shot.W, H: shot.H, Format: b.obs.Format,
		Pointer: shot.Pointer, Display: shot.Display,
	}
	s.a11yInto(ctx, obs, shot.A11y)
	if b.obs.SoM {
		// The frame came whole (observeArgs asks for no not_modified).
		var err error
		if data, err = s.markFrame(ctx, e, b, obs, data); err != nil {
			return nil, nil, nil, err
		}
	} else if b.have[shot.Hash] {
		data = nil
	}
	return obs, data, settle, nil
}

// observeArgs builds a capture request whose if_none_match lists every hash
// whose bytes the server or the client already holds in this encoding.
func (s *Server) observeArgs(e *env, b *batch) wire.ObserveArgs {
	args := wire.ObserveArgs{Observe: s.guestObserve(e, b.obs)}
	s.a11yArgs(e, &args)
	if b.obs.SoM {
		return args // the frame is drawn on: it must come whole
	}
	inm := s.cache.recent(b.obs.Format, b.obs.Quality, 16)
	if e.lastFrame != "" {
		inm = append(inm, e.lastFrame)
	}
	for h := range b.have {
		if len(inm) >= 64 {
			break
		}
		inm = append(inm, h)
	}
	args.IfNoneMatch = inm
	return args
}

// guestObserve is o as asked of e's guest: a raw frame in its S2 form
// (wire.FormatRawS2) where the guest offers it, which crosses the guest
// socket at a twentieth of the size and is what the cache keeps anyway.
func (s *Server) guestObserve(e *env, o aci.Observe) aci.Observe {
	if o.Format == aci.FormatRaw && slices.Contains(e.lease.Guest().Welcome().Formats, wire.FormatRawS2) {
		o.Format = wire.FormatRawS2
	}
	return o
}

// keepFrame puts a new frame into the shared cache and the recorder and
// returns the bytes b's reply delivers (nil when its client has them): a
// raws2 frame is kept as sent and decoded for delivery only.
func (s *Server) keepFrame(ctx context.Context, e *env, b *batch, k frameKey, shot *wire.Shot) ([]byte, error) {
	if shot.Format != wire.FormatRawS2 {
		s.recordFrame(ctx, k, s.cache.put(k, shot.Data))
		return shot.Data, nil
	}
	var data []byte
	if !b.have[shot.Hash] {
		data = b.patchRaw(e, shot)
	}
	if data == nil && !b.have[shot.Hash] {
		var ok bool
		if data, ok = b.decodeStored(aci.FormatRaw, shot.Data, true); !ok {
			// The declared size was checked on arrival; the body is broken.
			return nil, aci.Errorf(aci.CodeInternal, "guest sent an undecodable raws2 frame")
		}
	}
	s.cache.putStored(k, shot.Data)
	s.recordFrame(ctx, k, shot.Data)
	return data, nil
}

// recordFrame hands a new frame, as the frame cache stores it, to the
// recorder (record_frames): queued, written off the step's path.
func (s *Server) recordFrame(ctx context.Context, k frameKey, stored []byte) {
	if s.rec == nil || stored == nil {
		return
	}
	s.rec.put(ctx, recordJob{hash: k.hash, format: storedFormat(k.format), data: stored})
}

// decodeStored is decodeStored for this batch's reply: a raw frame is
// decoded into a buffer from rawBufs that the written reply hands back
// (batchReply.release), so its bytes must not be kept past the reply.
func (b *batch) decodeStored(format string, stored []byte, ok bool) ([]byte, bool) {
	if !ok || format != aci.FormatRaw {
		return stored, ok
	}
	p, _ := rawBufs.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	}
	raw, err := decodeRawS2(*p, stored)
	if err != nil {
		rawBufs.Put(p)
		return nil, false
	}
	*p = raw[:0]
	b.mu.Lock()
	b.lent = append(b.lent, p)
	b.mu.Unlock()
	return raw, true
}

// cached is k's frame from c as b's reply delivers it.
func (b *batch) cached(c *frameCache, k frameKey) ([]byte, bool) {
	stored, ok := c.getStored(k)
	return b.decodeStored(k.format, stored, ok)
}

// The structured observation on the trainer side: observe.a11y is passed to
// the guest, the tree it took goes into the observation (tree_text,
// elements, tree) and its full text into the trajectory store, content
// addressed like frames (docs/architecture.md, "Structured observation").

// treeFormat is the store's "format" of a tree revision's text.
const treeFormat = "a11y"

// a11yArgs marks the first observation of an episode: the guest starts its
// element ids over (e.mu held).
func (s *Server) a11yArgs(e *env, args *wire.ObserveArgs) {
	if e.ep == nil || e.a11yEp == e.ep.traj.EpisodeID {
		return
	}
	args.A11yReset = true
	e.a11yEp = e.ep.traj.EpisodeID
}

// a11yInto puts the tree a shot carries into obs and stores its full text.
func (s *Server) a11yInto(ctx context.Context, obs *aci.Observation, t *aci.A11yTree) {
	if t == nil {
		return
	}
	info := t.A11yInfo
	obs.A11y = &info
	if t.Error != nil {
		return
	}
	obs.TreeText, obs.Elements, obs.Tree = t.Text, t.Elements, t.Hash
	if obs.Elements == nil {
		obs.Elements = []aci.Element{}
	}
	full := t.Text
	if t.Diff {
		full = t.FullText
	}
	if s.rec != nil && full != "" {
		s.rec.put(ctx, recordJob{hash: t.Hash, format: treeFormat, data: []byte(full)})
	}
}

// storedFormat is the format under which the cache's form of a format's
// frames is recorded: raw frames as wire.FormatRawS2, the rest as delivered.
func storedFormat(format string) string {
	if format == aci.FormatRaw {
		return wire.FormatRawS2
	}
	return format
}

// decodeStored turns what the cache holds back into the frame's encoding.
func decodeStored(format string, b []byte, ok bool) ([]byte, bool) {
	if !ok || format != aci.FormatRaw {
		return b, ok
	}
	raw, err := decodeRawS2(nil, b)
	if err != nil {
		return nil, false // only the cache wrote it; unreadable is a miss
	}
	return raw, true
}

// rawBufs holds the buffers raw frames are decoded into for delivery
// (batch.decodeStored), handed back once the reply is written: a fresh
// 3 MB buffer per raw step costs a page fault per 4 KiB page on first
// touch (docs/architecture.md, "Cost of a step").
var rawBufs sync.Pool // *[]byte

// maxRawFrame bounds the decoded size of a stored raw frame (16384² RGB24
// would be far beyond any screen X serves here).
const maxRawFrame = 64 << 20

// decodeRawS2 decodes a stored raw frame into dst when it is large enough,
// refusing one whose declared size is beyond maxRawFrame before allocating.
func decodeRawS2(dst, b []byte) ([]byte, error) {
	n, err := s2.DecodedLen(b)
	if err != nil {
		return nil, err
	}
	if n > maxRawFrame {
		return nil, fmt.Errorf("stored raw frame of %d bytes exceeds %d", n, maxRawFrame)
	}
	return s2.Decode(dst[:cap(dst)], b)
}

// dropRaw forgets e's kept frame (e.mu held). A reply still delivering it
// keeps its bytes until it is written.
func (e *env) dropRaw() {
	if e.raw != nil {
		keptRawBytes.Add(-int64(len(e.raw.rgb)))
		e.raw = nil
	}
}

// patchRaw returns shot's pixels decoded into e's kept frame, decoding only
// the bands that differ from the kept frame's, and lends them to b's reply;
// nil when shot has no bands, the kept frame is lent to a reply still being
// written, no room is left under maxKeptRawBytes, or a band does not decode
// on its own (the caller then decodes the frame whole). e.mu is held.
func (b *batch) patchRaw(e *env, shot *wire.Shot) []byte {
	if shot.Bands == nil {
		return nil
	}
	offs, err := rgbs2.Split(shot.Data, shot.Bands, nil)
	if err != nil {
		return nil
	}
	kr := e.raw
	if kr != nil && (kr.lent.Load() || kr.w != shot.W || kr.h != shot.H) {
		e.dropRaw()
		kr = nil
	}
	var old []byte
	if kr == nil {
		n := shot.W * shot.H * 3
		if keptRawBytes.Add(int64(n)) > maxKeptRawBytes {
			keptRawBytes.Add(-int64(n))
			return nil
		}
		kr = &keptRaw{w: shot.W, h: shot.H, rgb: make([]byte, n)}
		e.raw = kr
	} else {
		old = kr.blk
	}
	if kr.scratch, err = rgbs2.Patch(kr.rgb, kr.w, kr.h, old, kr.offs, shot.Data, offs, kr.scratch); err != nil {
		e.dropRaw() // partly patched
		return nil
	}
	kr.blk, kr.offs = shot.Data, offs
	kr.lent.Store(true)
	b.mu.Lock()
	b.kept = append(b.kept, kr)
	b.mu.Unlock()
	return kr.rgb
}

// Set-of-Mark observations (docs/api.md, "Set-of-Mark"): observe.som
// numbers the interactive elements of the accessibility tree, draws each
// element's box and number on the frame, and lists the labels in
// obs.marks. A step's target {kind: "mark", ref: "N"} then names the
// element under label N of the env's last marked observation; the guest
// resolves it as it resolves an element_ref (its current box), so a mark
// whose element is gone is stale_element_ref.

// maxMarks bounds the labels drawn on one frame.
const maxMarks = 200

// markRoles are the roles labelled even without an action of their own.
var markRoles = map[string]bool{
	"push button": true, "toggle button": true, "check box": true, "radio button": true,
	"link": true, "entry": true, "password text": true, "text": true, "combo box": true,
	"menu item": true, "check menu item": true, "radio menu item": true, "menu": true,
	"page tab": true, "spin button": true, "slider": true, "list item": true,
	"table cell": true, "tree item": true, "icon": true, "button": true,
}

// marksOf picks the interactive elements of a tree with a box on the
// delivered part of the screen, numbered from 1 in the tree's order.
func marksOf(els []aci.Element, d aci.Display) []aci.MarkLabel {
	var out []aci.MarkLabel
	src := image.Rect(d.SourceRect.X, d.SourceRect.Y, d.SourceRect.X+d.SourceRect.W, d.SourceRect.Y+d.SourceRect.H)
	for _, e := range els {
		if len(out) == maxMarks {
			break
		}
		b := e.Box
		if b.W <= 0 || b.H <= 0 || !(len(e.Actions) > 0 || markRoles[e.Role] || slices.Contains(e.States, "editable")) {
			continue
		}
		if !image.Rect(b.X, b.Y, b.X+b.W, b.Y+b.H).Overlaps(src) {
			continue
		}
		out = append(out, aci.MarkLabel{N: len(out) + 1, Ref: e.ID, Role: e.Role, Name: e.Name, Box: b})
	}
	return out
}

// markColor is the labels' colour: a saturated red no desktop theme uses
// for text, as OSWorld's own Set-of-Mark drawings.
var markColor = color.RGBA{230, 25, 75, 255}

// drawMarks draws marks on an encoded frame and encodes it again in its
// format.
func drawMarks(data []byte, format string, quality int, d aci.Display, marks []aci.MarkLabel) ([]byte, error) {
	img, err := render.Decode(data, format, d.W, d.H)
	if err != nil {
		return nil, err
	}
	rgba := render.ToRGBA(img)
	fb := rgba.Bounds()
	sx := float64(d.Delivered.W) / float64(max(d.SourceRect.W, 1))
	sy := float64(d.Delivered.H) / float64(max(d.SourceRect.H, 1))
	toFrame := func(x, y int) (int, int) {
		return int(float64(x-d.SourceRect.X) * sx), int(float64(y-d.SourceRect.Y) * sy)
	}
	face := basicfont.Face7x13
	for _, m := range marks {
		x0, y0 := toFrame(m.Box.X, m.Box.Y)
		x1, y1 := toFrame(m.Box.X+m.Box.W, m.Box.Y+m.Box.H)
		r := image.Rect(x0, y0, x1, y1).Intersect(fb)
		if r.Empty() {
			continue
		}
		outline(rgba, r, markColor)
		label := strconv.Itoa(m.N)
		lw, lh := 7*len(label)+4, 13+2
		lx, ly := min(max(r.Min.X, fb.Min.X), fb.Max.X-lw), min(max(r.Min.Y, fb.Min.Y), fb.Max.Y-lh)
		bg := image.Rect(lx, ly, lx+lw, ly+lh).Intersect(fb)
		draw.Draw(rgba, bg, image.NewUniform(markColor), image.Point{}, draw.Src)
		dr := &font.Drawer{Dst: rgba, Src: image.White, Face: face, Dot: fixed.P(lx+2, ly+11)}
		dr.DrawString(label)
	}
	var buf bytes.Buffer
	switch format {
	case aci.FormatPNG:
		err = (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, rgba)
	case aci.FormatJPEG:
		err = jpeg.Encode(&buf, rgba, &jpeg.Options{Quality: quality})
	default:
		return nil, fmt.Errorf("observe.som draws on png or jpeg frames, not %s", format)
	}
	return buf.Bytes(), err
}

// outline draws r's border, two pixels wide, inside r.
func outline(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	u := image.NewUniform(c)
	for _, b := range []image.Rectangle{
		image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+2), image.Rect(r.Min.X, r.Max.Y-2, r.Max.X, r.Max.Y),
		image.Rect(r.Min.X, r.Min.Y, r.Min.X+2, r.Max.Y), image.Rect(r.Max.X-2, r.Min.Y, r.Max.X, r.Max.Y),
	} {
		draw.Draw(img, b.Intersect(r), u, image.Point{}, draw.Src)
	}
}

// markHash is the marked frame's content address: the frame's and the
// marks' (what was drawn where).
func markHash(frame string, marks []aci.MarkLabel) string {
	h := xxh3.New()
	h.WriteString("som\x00" + frame)
	for _, m := range marks {
		fmt.Fprintf(h, "\x00%d %d %d %d %d", m.N, m.Box.X, m.Box.Y, m.Box.W, m.Box.H)
	}
	sum := h.Sum128().Bytes()
	return hex.EncodeToString(sum[:])
}

// markFrame turns obs into its Set-of-Mark form (e.mu held): the marks of
// its tree drawn on its frame, the labels in obs.Marks and kept on e for
// the next step's mark targets. data is the frame's bytes as the reply
// would carry them (nil when the client has them); the marked frame's
// bytes are returned the same way.
func (s *Server) markFrame(ctx context.Context, e *env, b *batch, obs *aci.Observation, data []byte) ([]byte, error) {
	marks := marksOf(obs.Elements, obs.Display)
	obs.Marks = marks
	if obs.Marks == nil {
		obs.Marks = []aci.MarkLabel{}
	}
	e.marks = make(map[string]string, len(marks))
	for _, m := range marks {
		e.marks[strconv.Itoa(m.N)] = m.Ref
	}
	mk := frameKey{hash: markHash(obs.Frame, marks), format: b.obs.Format, quality: b.obs.Quality}
	if b.have[mk.hash] {
		obs.Frame = mk.hash
		return nil, nil
	}
	if marked, ok := s.cache.getStored(mk); ok {
		obs.Frame = mk.hash
		return marked, nil
	}
	src := data
	if src == nil {
		var ok bool
		if src, ok = s.cache.getStored(frameKey{hash: obs.Frame, format: b.obs.Format, quality: b.obs.Quality}); !ok {
			return nil, aci.Errorf(aci.CodeInternal, "observe.som: frame %s left the cache before it was marked", obs.Frame)
		}
	}
	marked, err := drawMarks(src, b.obs.Format, b.obs.Quality, obs.Display, marks)
	if err != nil {
		return nil, aci.Errorf(aci.CodeInternal, "observe.som: %v", err)
	}
	s.recordFrame(ctx, mk, s.cache.put(mk, marked))
	obs.Frame = mk.hash
	return marked, nil
}

// resolveMarks turns the mark targets of acts into the element refs the
// env's last marked observation labelled (e.mu held); a label it did not
// draw is stale_element_ref, for the first action that names one (its
// index returned).
func (e *env) resolveMarks(acts []aci.Action) (int, error) {
	for i := range acts {
		for _, t := range []*aci.Target{acts[i].Target, acts[i].To} {
			if t == nil || t.Kind != aci.Mark {
				continue
			}
			ref, ok := e.marks[t.Ref]
			if !ok {
				if e.marks == nil {
					return i, aci.Errorf(aci.CodeStaleElementRef, "%s on mark %s: no observation of this episode drew marks (observe.som)", acts[i].Verb, t.Ref)
				}
				return i, aci.Errorf(aci.CodeStaleElementRef, "%s on mark %s: the last marked observation drew marks 1..%d", acts[i].Verb, t.Ref, len(e.marks))
			}
			*t = aci.Target{Kind: aci.ElementRef, Ref: ref}
		}
	}
	return 0, nil
}
