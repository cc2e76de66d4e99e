package a11y

import (
	"context"
	"errors"
	"strings"

	"github.com/godbus/dbus/v5"
	"github.com/shinken-rl/shinken/aci"
)

// AT-SPI names on the accessibility bus.
const (
	registryName = "org.a11y.atspi.Registry"
	rootPath     = dbus.ObjectPath("/org/a11y/atspi/accessible/root")
	nullPath     = dbus.ObjectPath("/org/a11y/atspi/null")

	ifAccessible   = "org.a11y.atspi.Accessible"
	ifComponent    = "org.a11y.atspi.Component"
	ifAction       = "org.a11y.atspi.Action"
	ifValue        = "org.a11y.atspi.Value"
	ifText         = "org.a11y.atspi.Text"
	ifEditableText = "org.a11y.atspi.EditableText"
	ifProperties   = "org.freedesktop.DBus.Properties"
	ifRegistry     = "org.a11y.atspi.Registry"

	coordScreen = uint32(0) // ATSPI_COORD_TYPE_SCREEN
)

// AT-SPI state bits (AtspiStateType).
const (
	stActive             = 1
	stChecked            = 4
	stCollapsed          = 5
	stDefunct            = 6
	stEditable           = 7
	stEnabled            = 8
	stExpandable         = 9
	stExpanded           = 10
	stFocusable          = 11
	stFocused            = 12
	stModal              = 16
	stPressed            = 20
	stSelected           = 23
	stSensitive          = 24
	stShowing            = 25
	stVisible            = 30
	stManagesDescendants = 31
	stCheckable          = 41
	stReadOnly           = 43
)

// stateBits is a node's state set: two 32-bit words as AT-SPI sends them.
type stateBits uint64

func (s stateBits) has(bit int) bool { return s&(1<<bit) != 0 }

func bitsOf(words []uint32) stateBits {
	var s stateBits
	for i, w := range words {
		if i > 1 {
			break
		}
		s |= stateBits(w) << (32 * i)
	}
	return s
}

// shownStates are the states a rendering names, in this order; "disabled"
// stands for a control that is neither sensitive nor enabled.
func (s stateBits) names(role string) []string {
	var out []string
	add := func(ok bool, name string) {
		if ok {
			out = append(out, name)
		}
	}
	add(s.has(stFocused), "focused")
	add(s.has(stActive) && isWindowRole(role), "active")
	add(s.has(stChecked), "checked")
	add(!s.has(stChecked) && s.has(stCheckable), "unchecked")
	add(s.has(stSelected), "selected")
	add(s.has(stPressed), "pressed")
	add(s.has(stExpandable) && s.has(stExpanded), "expanded")
	add(s.has(stExpandable) && !s.has(stExpanded), "collapsed")
	add(s.has(stEditable), "editable")
	add(s.has(stReadOnly), "read-only")
	add(s.has(stModal), "modal")
	add(!s.has(stSensitive) && !s.has(stEnabled), "disabled")
	return out
}

func isWindowRole(role string) bool {
	switch role {
	case "frame", "dialog", "window", "alert", "file chooser":
		return true
	}
	return false
}

// objRef is a D-Bus reference to an accessible: the owning connection's bus
// name and the object's path.
type objRef struct {
	Bus  string
	Path dbus.ObjectPath
}

func (r objRef) null() bool { return r.Bus == "" || r.Path == nullPath || r.Path == "" }

// call makes one D-Bus method call under ctx and stores its reply.
func call(ctx context.Context, c *dbus.Conn, r objRef, method string, out []any, args ...any) error {
	res := c.Object(r.Bus, r.Path).CallWithContext(ctx, method, 0, args...)
	if res.Err != nil {
		return res.Err
	}
	if len(out) == 0 {
		return nil
	}
	return res.Store(out...)
}

// gone reports whether a D-Bus error says the object or its application no
// longer exists.
func gone(err error) bool {
	var de dbus.Error
	if errors.As(err, &de) {
		switch de.Name {
		case "org.freedesktop.DBus.Error.UnknownObject", "org.freedesktop.DBus.Error.UnknownMethod",
			"org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner",
			"org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Disconnected":
			return de.Name != "org.freedesktop.DBus.Error.NoReply"
		}
		return strings.Contains(de.Name, "Unknown")
	}
	return false
}

// extents is Component.GetExtents' (iiii).
type extents struct{ X, Y, W, H int32 }

func (e extents) rect() aci.Rect { return aci.Rect{X: int(e.X), Y: int(e.Y), W: int(e.W), H: int(e.H)} }
