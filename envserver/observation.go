package envserver

import (
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
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
