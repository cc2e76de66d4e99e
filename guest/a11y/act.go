package a11y

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/godbus/dbus/v5"
	"github.com/shinken-rl/shinken/aci"
)

func stale(ref, why string) error {
	return &aci.Error{Code: aci.CodeStaleElementRef,
		Message: "element " + ref + " " + why + "; observe again (observe.a11y) and use a current id",
		Detail:  map[string]string{"ref": ref, "hint": "re-observe"}}
}

// lookup finds the object an id names in this episode. Ids come from
// observations only: which objects an application exports, and so which
// ids a walk mints, depends on what was walked before, so a ref is good
// only as the observations of this episode issued it.
func (c *Client) lookup(ref string) (objRef, error) {
	if n, err := strconv.Atoi(strings.TrimPrefix(ref, "e")); err != nil || n <= 0 || !strings.HasPrefix(ref, "e") {
		return objRef{}, aci.Errorf(aci.CodeInvalidAction, "element ref %q: want e<N> from the observation's tree", ref)
	}
	if r, ok := c.ids.byID[ref]; ok {
		return r, nil
	}
	return objRef{}, stale(ref, "was not seen in this episode")
}

// callErr types a failed call on an element: gone is stale, no answer is a
// timeout, anything else the guest's.
func callErr(ref, what string, err error) error {
	var typed *aci.Error
	switch {
	case errors.As(err, &typed):
		return err // already typed (no bus to connect to)
	case gone(err):
		return stale(ref, "is gone")
	case errors.Is(err, errHung), errors.Is(err, context.DeadlineExceeded):
		return aci.Errorf(aci.CodeTimeout, "a11y: %s on %s: the application did not answer", what, ref)
	}
	return aci.Errorf(aci.CodeInternal, "a11y: %s on %s: %v", what, ref, err)
}

// reads (on the worker) makes read-only calls on r over the bus
// connection, and once more on a new connection when the bus dropped the
// one it used meanwhile: a dropped connection says nothing of the element.
// It returns the walker of the connection that answered.
func (c *Client) reads(ctx context.Context, r objRef, calls []pending) (*walker, error) {
	for attempt := 0; ; attempt++ {
		conn, err := c.connect(ctx)
		if err != nil {
			return nil, err
		}
		w := &walker{conn: conn, caps: c.cfg.Caps}
		err = w.calls(ctx, r, calls)
		if err != nil && attempt == 0 && !conn.Connected() {
			continue
		}
		return w, err
	}
}

// Box resolves an element id to its current on-screen box: an element that
// is gone, no longer showing, or has no extents is stale_element_ref.
func (c *Client) Box(ctx context.Context, ref string) (aci.Rect, error) {
	return do(ctx, c, "resolve "+ref, func(ctx context.Context) (aci.Rect, error) {
		r, err := c.lookup(ref)
		if err != nil {
			return aci.Rect{}, err
		}
		var states []uint32
		var ext extents
		if _, err := c.reads(ctx, r, []pending{
			{method: ifAccessible + ".GetState", out: []any{&states}},
			{method: ifComponent + ".GetExtents", args: []any{coordScreen}, out: []any{&ext}},
		}); err != nil {
			return aci.Rect{}, callErr(ref, "resolve", err)
		}
		st := bitsOf(states)
		if st.has(stDefunct) || !st.has(stShowing) {
			return aci.Rect{}, stale(ref, "is no longer on screen")
		}
		box := ext.rect()
		if box.W <= 0 || box.H <= 0 {
			return aci.Rect{}, stale(ref, "has no on-screen box (try invoke_action)")
		}
		return box, nil
	})
}

// Invoke runs the element's action named name (case-insensitive), or its
// first action when name is empty.
func (c *Client) Invoke(ctx context.Context, ref, name string) error {
	_, err := do(ctx, c, "invoke_action "+ref, func(ctx context.Context) (struct{}, error) {
		r, err := c.lookup(ref)
		if err != nil {
			return struct{}{}, err
		}
		var acts [][]any
		var ifaces []string
		w, err := c.reads(ctx, r, []pending{{method: ifAccessible + ".GetInterfaces", out: []any{&ifaces}}})
		if err != nil {
			return struct{}{}, callErr(ref, "invoke_action", err)
		}
		if !hasIface(ifaces, ifAction) {
			return struct{}{}, aci.Errorf(aci.CodeInvalidAction, "invoke_action: element %s has no actions", ref)
		}
		if err := w.calls(ctx, r, []pending{{method: ifAction + ".GetActions", out: []any{&acts}}}); err != nil {
			return struct{}{}, callErr(ref, "invoke_action", err)
		}
		idx, names := -1, make([]string, 0, len(acts))
		for i, a := range acts {
			s := ""
			if len(a) > 0 {
				s, _ = a[0].(string)
			}
			names = append(names, s)
			if idx < 0 && (name == "" || strings.EqualFold(s, name)) {
				idx = i
			}
		}
		if idx < 0 {
			return struct{}{}, aci.Errorf(aci.CodeInvalidAction, "invoke_action: element %s has no action %q (it has %s)", ref, name, strings.Join(names, ", "))
		}
		var ok bool
		if err := w.calls(ctx, r, []pending{{method: ifAction + ".DoAction", args: []any{int32(idx)}, out: []any{&ok}}}); err != nil {
			return struct{}{}, callErr(ref, "invoke_action", err)
		}
		if !ok {
			return struct{}{}, aci.Errorf(aci.CodeInvalidAction, "invoke_action: element %s refused action %q", ref, names[idx])
		}
		return struct{}{}, nil
	})
	return err
}

// SetValue replaces an editable element's text, or sets a range element's
// value (text parsed as a number).
func (c *Client) SetValue(ctx context.Context, ref, text string) error {
	_, err := do(ctx, c, "set_value "+ref, func(ctx context.Context) (struct{}, error) {
		r, err := c.lookup(ref)
		if err != nil {
			return struct{}{}, err
		}
		var ifaces []string
		var states []uint32
		w, err := c.reads(ctx, r, []pending{
			{method: ifAccessible + ".GetInterfaces", out: []any{&ifaces}},
			{method: ifAccessible + ".GetState", out: []any{&states}},
		})
		if err != nil {
			return struct{}{}, callErr(ref, "set_value", err)
		}
		switch {
		case hasIface(ifaces, ifEditableText) && bitsOf(states).has(stEditable):
			var ok bool
			if err := w.calls(ctx, r, []pending{{method: ifEditableText + ".SetTextContents", args: []any{text}, out: []any{&ok}}}); err != nil {
				return struct{}{}, callErr(ref, "set_value", err)
			}
			if !ok {
				return struct{}{}, aci.Errorf(aci.CodeInvalidAction, "set_value: element %s refused the text", ref)
			}
		case hasIface(ifaces, ifValue):
			f, perr := strconv.ParseFloat(strings.TrimSpace(text), 64)
			if perr != nil {
				return struct{}{}, aci.Errorf(aci.CodeInvalidAction, "set_value: element %s takes a number; got %q", ref, text)
			}
			if err := w.calls(ctx, r, []pending{{method: ifProperties + ".Set", args: []any{ifValue, "CurrentValue", dbus.MakeVariant(f)}}}); err != nil {
				return struct{}{}, callErr(ref, "set_value", err)
			}
		default:
			return struct{}{}, aci.Errorf(aci.CodeInvalidAction, "set_value: element %s is neither editable text nor a value", ref)
		}
		return struct{}{}, nil
	})
	return err
}

func hasIface(ifaces []string, want string) bool {
	for _, i := range ifaces {
		if i == want {
			return true
		}
	}
	return false
}
