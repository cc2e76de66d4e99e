package guest

import (
	"context"
	"os"
	"strings"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/res"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

func (d *display) listWindows(ctx context.Context) (*wire.Windows, error) {
	var out *wire.Windows
	err := d.run(ctx, 0, func(x *xconn) error {
		var err error
		out, err = x.windows()
		return err
	})
	return out, err
}

// windows lists top-level windows: the EWMH client list when a WM keeps one,
// else the root's mapped children.
func (x *xconn) windows() (*wire.Windows, error) {
	out := &wire.Windows{Windows: []wire.Window{}}
	ids, ewmh := x.clientList()
	if !ewmh {
		tree, err := xproto.QueryTree(x.c, x.root).Reply()
		if err != nil {
			return nil, err
		}
		for _, w := range tree.Children {
			a, err := xproto.GetWindowAttributes(x.c, w).Reply()
			if err == nil && a.MapState == xproto.MapStateViewable && !a.OverrideRedirect && a.Class == xproto.WindowClassInputOutput {
				ids = append(ids, w)
			}
		}
	}
	out.EWMH = ewmh
	active, _ := x.activeWindow()
	for _, id := range ids {
		r, err := x.windowRect(id)
		if err != nil {
			continue // gone meanwhile
		}
		name, class := x.windowName(id), x.windowClass(id)
		out.Windows = append(out.Windows, wire.Window{ID: uint32(id), Title: name, Class: class, PID: x.windowPID(id), Focused: id == active, Geometry: r})
	}
	return out, nil
}

func (x *xconn) clientList() ([]xproto.Window, bool) {
	if !x.wmRunning() {
		return nil, false
	}
	vals, err := x.prop32(x.root, "_NET_CLIENT_LIST", xproto.AtomWindow, 4096)
	if err != nil {
		return nil, false
	}
	// No property yet (a WM with no clients) reads as none.
	ids := make([]xproto.Window, len(vals))
	for i, v := range vals {
		ids[i] = xproto.Window(v)
	}
	return ids, true
}

// activeWindow is _NET_ACTIVE_WINDOW, else the focused top-level window.
func (x *xconn) activeWindow() (xproto.Window, bool) {
	if a, err := x.atom("_NET_ACTIVE_WINDOW"); err == nil {
		if w, ok := x.windowProp(x.root, a); ok && w != 0 {
			return w, true
		}
	}
	f, err := xproto.GetInputFocus(x.c).Reply()
	if err != nil || f.Focus <= 1 || f.Focus == x.root {
		return 0, false
	}
	return x.topLevel(f.Focus), true
}

// topLevel climbs from w to its ancestor that is a child of the root.
func (x *xconn) topLevel(w xproto.Window) xproto.Window {
	for i := 0; i < 64; i++ {
		t, err := xproto.QueryTree(x.c, w).Reply()
		if err != nil || t.Parent == x.root || t.Parent == 0 {
			return w
		}
		w = t.Parent
	}
	return w
}

// windowRect is w's rectangle in root coordinates.
func (x *xconn) windowRect(w xproto.Window) (aci.Rect, error) {
	g, err := xproto.GetGeometry(x.c, xproto.Drawable(w)).Reply()
	if err != nil {
		return aci.Rect{}, aci.Errorf(aci.CodeNotFound, "window %d: %v", w, err)
	}
	t, err := xproto.TranslateCoordinates(x.c, w, x.root, 0, 0).Reply()
	if err != nil {
		return aci.Rect{}, aci.Errorf(aci.CodeNotFound, "window %d: %v", w, err)
	}
	return aci.Rect{X: int(t.DstX), Y: int(t.DstY), W: int(g.Width), H: int(g.Height)}, nil
}

func (x *xconn) stringProp(w xproto.Window, name string) (string, bool) {
	a, err := x.atom(name)
	if err != nil {
		return "", false
	}
	r, err := xproto.GetProperty(x.c, false, w, a, xproto.AtomAny, 0, 1024).Reply()
	if err != nil || r.Format != 8 || r.ValueLen == 0 {
		return "", false
	}
	return string(r.Value), true
}

func (x *xconn) windowName(w xproto.Window) string {
	if s, ok := x.stringProp(w, "_NET_WM_NAME"); ok {
		return s
	}
	s, _ := x.stringProp(w, "WM_NAME")
	return s
}

// windowClass is the class part of WM_CLASS (instance\0class\0).
func (x *xconn) windowClass(w xproto.Window) string {
	s, ok := x.stringProp(w, "WM_CLASS")
	if !ok {
		return ""
	}
	parts := strings.Split(strings.TrimRight(s, "\x00"), "\x00")
	return parts[len(parts)-1]
}

func (x *xconn) windowInstance(w xproto.Window) string {
	s, _ := x.stringProp(w, "WM_CLASS")
	inst, _, _ := strings.Cut(s, "\x00")
	return inst
}

func (x *xconn) windowPID(w xproto.Window) int {
	a, err := x.atom("_NET_WM_PID")
	if err != nil {
		return 0
	}
	r, err := xproto.GetProperty(x.c, false, w, a, xproto.AtomCardinal, 0, 1).Reply()
	if err != nil || r.Format != 32 || r.ValueLen < 1 {
		return 0
	}
	return int(xgb.Get32(r.Value))
}

// launchedPID is the process a listed window is launch_app's evidence of:
// its _NET_WM_PID, else, but for a splash screen (a launcher's, such as
// LibreOffice's oosplash, before the app itself has a window), the process
// of the X client that created it (an app such as mupdf sets no
// _NET_WM_PID); 0 when unknown.
func (x *xconn) launchedPID(w wire.Window) int {
	if w.PID != 0 {
		return w.PID
	}
	if x.isSplash(xproto.Window(w.ID)) {
		return 0
	}
	return x.ownerPID(w.ID)
}

// isSplash reports whether w's _NET_WM_WINDOW_TYPE says splash.
func (x *xconn) isSplash(w xproto.Window) bool {
	typ, err := x.atom("_NET_WM_WINDOW_TYPE")
	if err != nil {
		return false
	}
	splash, err := x.atom("_NET_WM_WINDOW_TYPE_SPLASH")
	if err != nil {
		return false
	}
	r, err := xproto.GetProperty(x.c, false, w, typ, xproto.AtomAtom, 0, 16).Reply()
	if err != nil || r.Format != 32 {
		return false
	}
	for i := 0; i+4 <= len(r.Value); i += 4 {
		if xproto.Atom(xgb.Get32(r.Value[i:])) == splash {
			return true
		}
	}
	return false
}

// ownerPID asks the X server, through the X-Resource extension, for the
// process id of the client that owns the resource id (the server learns it
// from the client's socket). It answers 0 where there is nothing to ask or
// the answer would not be a pid of this process's namespace: only when the
// server gives guestd's own connection guestd's own pid (as killRetained
// checks) are its pids trusted.
func (x *xconn) ownerPID(id uint32) int {
	switch x.xresPIDs.Load() {
	case 0:
		ok := false
		if res.Init(x.c) == nil {
			if self, err := x.c.NewId(); err == nil {
				ok = x.clientPID(self) == os.Getpid()
			}
		}
		if ok {
			x.xresPIDs.Store(1)
		} else {
			x.xresPIDs.Store(-1)
			return 0
		}
	case -1:
		return 0
	}
	return x.clientPID(id)
}

// clientPID is the LocalClientPID the X server records for the client that
// owns the resource id (any id in its range, created yet or not).
func (x *xconn) clientPID(id uint32) int {
	r, err := res.QueryClientIds(x.c, 1, []res.ClientIdSpec{{Client: id, Mask: res.ClientIdMaskLocalClientPID}}).Reply()
	if err != nil {
		return 0
	}
	for _, v := range r.Ids {
		if v.Spec.Mask&res.ClientIdMaskLocalClientPID != 0 && len(v.Value) == 1 {
			return int(v.Value[0])
		}
	}
	return 0
}

// activateWindow raises and focuses a window named by id, or the first
// window of an app: matched by WM_CLASS (class or instance) or by the pid
// launch_app returned, else the first whose title contains app (any case).
func (s *Server) activateWindow(ctx context.Context, a aci.Action, res *wire.ActResult) error {
	if a.WindowID == 0 && a.App == "" {
		return invalid("activate_window needs window_id or app")
	}
	pids := s.apps.pidsOf(a.App)
	return s.x.run(ctx, 0, func(x *xconn) error {
		w := xproto.Window(a.WindowID)
		if w == 0 {
			list, err := x.windows()
			if err != nil {
				return err
			}
			for _, win := range list.Windows {
				id := xproto.Window(win.ID)
				if strings.EqualFold(win.Class, a.App) || strings.EqualFold(x.windowInstance(id), a.App) || pids[win.PID] {
					w = id
					break
				}
			}
			for _, win := range list.Windows {
				if w == 0 && strings.Contains(strings.ToLower(win.Title), strings.ToLower(a.App)) {
					w = xproto.Window(win.ID)
				}
			}
			if w == 0 {
				return aci.Errorf(aci.CodeNotFound, "activate_window: no window of app %q", a.App)
			}
		} else if _, err := x.windowRect(w); err != nil {
			return err
		}
		if x.wmRunning() {
			active, _ := x.atom("_NET_ACTIVE_WINDOW")
			ev := xproto.ClientMessageEvent{Format: 32, Window: w, Type: active,
				Data: xproto.ClientMessageDataUnionData32New([]uint32{2, 0, 0, 0, 0})}
			xproto.SendEvent(x.c, false, x.root, xproto.EventMaskSubstructureRedirect|xproto.EventMaskSubstructureNotify, string(ev.Bytes()))
		} else {
			xproto.ConfigureWindow(x.c, w, xproto.ConfigWindowStackMode, []uint32{xproto.StackModeAbove})
			xproto.SetInputFocus(x.c, xproto.InputFocusParent, w, xproto.TimeCurrentTime)
		}
		res.WindowID = uint32(w)
		p, err := x.pointer()
		res.Pointer = p
		return err
	})
}
