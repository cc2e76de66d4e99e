package envserver

import (
	"context"
	"slices"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/guest/wire"
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
