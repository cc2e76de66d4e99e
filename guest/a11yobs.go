package guest

import (
	"context"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

// The structured observation: guestd's side of the accessibility tree
// (package a11y does the AT-SPI work).

// activePID is the pid that owns the active window, 0 when unknown.
func (d *display) activePID(ctx context.Context) int {
	pid := 0
	d.run(ctx, 0, func(x *xconn) error {
		if w, ok := x.activeWindow(); ok {
			pid = x.windowPID(w)
		}
		return nil
	})
	return pid
}

// a11yMode validates observe.a11y.
func a11yMode(mode string) (string, error) {
	switch mode {
	case "", aci.A11yNone:
		return aci.A11yNone, nil
	case aci.A11yFull, aci.A11yDiff:
		return mode, nil
	}
	return "", aci.Errorf(aci.CodeBadRequest, "observe: bad a11y %q (want none, tree or diff)", mode)
}

// observeTree takes the structured observation an observe asked for; nil
// when it asked for none. A tree that cannot be read (no accessibility bus,
// an application that does not answer) is a tree with Error set, never a
// failed observation.
func (s *Server) observeTree(ctx context.Context, o wire.ObserveArgs) (*aci.A11yTree, error) {
	mode, err := a11yMode(o.A11y)
	if err != nil {
		return nil, err
	}
	if s.a11y != nil && o.A11yReset {
		if err := s.a11y.Reset(ctx); err != nil {
			return nil, err
		}
	}
	if mode == aci.A11yNone {
		return nil, nil
	}
	if s.a11y == nil {
		return &aci.A11yTree{A11yInfo: aci.A11yInfo{Error: aci.Errorf(aci.CodeUnsupported, "observe: this sandbox has no accessibility bus (observe.a11y needs dbus and at-spi2-core in the sandbox)")}}, nil
	}
	pid := s.x.activePID(ctx)
	// The tree gets at most the time left minus a margin for the reply, so
	// a hung application costs a typed error inside the call's deadline.
	tctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		tctx, cancel = context.WithDeadline(ctx, dl.Add(-min(time.Until(dl)/4, 500*time.Millisecond)))
		defer cancel()
	}
	t, err := s.a11y.Snapshot(tctx, mode, pid)
	if err != nil {
		return &aci.A11yTree{A11yInfo: aci.A11yInfo{Error: aci.AsError(err)}}, nil
	}
	return t, nil
}

// resolveRefs turns element_ref targets into the pixel centres of the
// elements' current boxes.
func (s *Server) resolveRefs(ctx context.Context, a *aci.Action) error {
	if a.Verb == aci.InvokeAction || a.Verb == aci.SetValue {
		return nil // they act on the element itself
	}
	for _, t := range []*aci.Target{a.Target, a.To} {
		if t == nil || t.Kind != aci.ElementRef {
			continue
		}
		if s.a11y == nil {
			return aci.Errorf(aci.CodeUnsupported, "%s: element_ref targets need the accessibility bus, which this sandbox lacks", a.Verb)
		}
		box, err := s.a11y.Box(ctx, t.Ref)
		if err != nil {
			return err
		}
		*t = aci.Target{Kind: aci.PointPx, X: float64(box.X + box.W/2), Y: float64(box.Y + box.H/2)}
	}
	return nil
}

// elementAct runs invoke_action and set_value.
func (s *Server) elementAct(ctx context.Context, a aci.Action, res *wire.ActResult) error {
	if a.Target == nil || a.Target.Kind != aci.ElementRef || a.Target.Ref == "" {
		return invalid("%s needs target {kind: element_ref, ref}", a.Verb)
	}
	if s.a11y == nil {
		return aci.Errorf(aci.CodeUnsupported, "%s needs the accessibility bus, which this sandbox lacks", a.Verb)
	}
	var err error
	if a.Verb == aci.InvokeAction {
		err = s.a11y.Invoke(ctx, a.Target.Ref, a.Text)
	} else {
		err = s.a11y.SetValue(ctx, a.Target.Ref, a.Text)
	}
	if err != nil {
		return err
	}
	return s.x.pointerInto(ctx, res)
}
