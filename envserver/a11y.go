package envserver

import (
	"context"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

// The structured observation on the trainer side: observe.a11y is passed to
// the guest, the tree it took goes into the observation (tree_text,
// elements, tree) and its full text into the trajectory store, content
// addressed like frames (docs/architecture.md, "Structured observation").

// treeFormat is the store's "format" of a tree revision's text.
const treeFormat = "a11y"

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

// a11yVerb reports whether v needs the accessibility tree.
func a11yVerb(v aci.Verb) bool {
	for _, a := range aci.A11yVerbs {
		if v == a {
			return true
		}
	}
	return false
}
