package guest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

const (
	// MaxClipboard caps clipboard text; more is a too_large error, never a
	// silent truncation.
	MaxClipboard = 1 << 20
	// incrChunk is the size of one INCR piece; text above it moves in pieces
	// (ICCCM 2.7.2), since one property change is bounded by the request size.
	incrChunk    = 64 << 10
	clipProperty = "SHINKEN_CLIPBOARD"
	clipWait     = 2 * time.Second
)

// clipOffer is the text this guest offers as CLIPBOARD owner. It outlives
// a connection: a reconnect offers it again once clipboard_set takes the
// selection.
type clipOffer struct {
	mu   sync.Mutex
	text string
}

func (o *clipOffer) offer(text string) {
	o.mu.Lock()
	o.text = text
	o.mu.Unlock()
}

func (o *clipOffer) offered() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.text
}

// clipConn is one connection's side of the clipboard: the event loop hands
// conversions and INCR pieces to clipboard_get through sel and props, and
// serves INCR sends from incr.
type clipConn struct {
	sel   chan xproto.SelectionNotifyEvent // clipboard_get waiting for a conversion
	props chan xproto.PropertyNotifyEvent  // INCR reads
	incr  map[incrKey]*incrSend            // INCR sends, owned by the event loop
	owned atomic.Bool                      // we own CLIPBOARD
}

func newClipConn() clipConn {
	return clipConn{sel: make(chan xproto.SelectionNotifyEvent, 1), props: make(chan xproto.PropertyNotifyEvent, 64),
		incr: map[incrKey]*incrSend{}}
}

type incrKey struct {
	win  xproto.Window
	prop xproto.Atom
}

type incrSend struct {
	data   []byte
	target xproto.Atom
	off    int
	done   bool
}

func (d *display) clipboardSet(ctx context.Context, text string) error {
	if len(text) > MaxClipboard {
		return aci.Errorf(aci.CodeTooLarge, "clipboard_set: %d bytes exceeds %d", len(text), MaxClipboard)
	}
	d.clip.offer(text)
	return d.run(ctx, 0, func(x *xconn) error {
		clip, err := x.atom("CLIPBOARD")
		if err != nil {
			return err
		}
		x.clip.owned.Store(true)
		xproto.SetSelectionOwner(x.c, x.clipWin, clip, xproto.TimeCurrentTime)
		r, err := xproto.GetSelectionOwner(x.c, clip).Reply()
		if err != nil {
			return err
		}
		if r.Owner != x.clipWin {
			x.clip.owned.Store(false)
			return aci.Errorf(aci.CodeInternal, "clipboard_set: could not take the CLIPBOARD selection")
		}
		return nil
	})
}

func (d *display) clipboardGet(ctx context.Context, res *wire.ActResult) error {
	return d.run(ctx, clipWait, func(x *xconn) error {
		clip, err := x.atom("CLIPBOARD")
		if err != nil {
			return err
		}
		owner, err := xproto.GetSelectionOwner(x.c, clip).Reply()
		if err != nil {
			return err
		}
		if owner.Owner == 0 {
			res.Clipboard = ""
			return nil
		}
		if owner.Owner == x.clipWin && x.clip.owned.Load() {
			res.Clipboard = x.d.clip.offered()
			return nil
		}
		text, err := x.convertClipboard(ctx, clip)
		res.Clipboard = text
		return err
	})
}

// convertClipboard asks the CLIPBOARD owner for UTF8_STRING and reads the
// answer, following INCR transfers.
func (x *xconn) convertClipboard(ctx context.Context, clip xproto.Atom) (string, error) {
	utf8, _ := x.atom("UTF8_STRING")
	prop, _ := x.atom(clipProperty)
	incr, err := x.atom("INCR")
	if err != nil {
		return "", err
	}
	for len(x.clip.sel) > 0 { // a stale answer from an abandoned request
		<-x.clip.sel
	}
	xproto.ConvertSelection(x.c, x.clipWin, clip, utf8, prop, xproto.TimeCurrentTime)
	timeout := time.NewTimer(clipWait)
	defer timeout.Stop()
	var ev xproto.SelectionNotifyEvent
	select {
	case ev = <-x.clip.sel:
	case <-timeout.C:
		// The X server answered; the owner, a client of the agent's
		// desktop (guestd owns none it does not answer for), did not: the
		// agent's outcome, never the infrastructure's (docs/architecture.md,
		// "Reward integrity").
		return "", aci.Errorf(aci.CodeAgentError, "clipboard_get: the CLIPBOARD owner (a client of the agent's desktop) did not answer within %v", clipWait)
	case <-ctx.Done():
		return "", aci.Errorf(aci.CodeTimeout, "clipboard_get: %v", ctx.Err())
	}
	if ev.Property == 0 {
		return "", nil // the owner has no text
	}
	for len(x.clip.props) > 0 {
		<-x.clip.props
	}
	r, err := xproto.GetProperty(x.c, true, x.clipWin, prop, xproto.AtomAny, 0, MaxClipboard/4+1).Reply()
	if err != nil {
		return "", err
	}
	if r.Type != incr {
		if r.BytesAfter > 0 || len(r.Value) > MaxClipboard {
			return "", aci.Errorf(aci.CodeTooLarge, "clipboard_get: clipboard text exceeds %d bytes", MaxClipboard)
		}
		return string(r.Value), nil
	}
	// INCR: each deletion asks for the next piece; a zero-length piece ends it.
	var buf []byte
	for {
		select {
		case pe := <-x.clip.props:
			if pe.Atom != prop || pe.State != xproto.PropertyNewValue {
				continue
			}
		case <-timeout.C:
			return "", aci.Errorf(aci.CodeAgentError, "clipboard_get: the CLIPBOARD owner (a client of the agent's desktop) stalled its INCR transfer")
		case <-ctx.Done():
			return "", aci.Errorf(aci.CodeTimeout, "clipboard_get: %v", ctx.Err())
		}
		r, err := xproto.GetProperty(x.c, true, x.clipWin, prop, xproto.AtomAny, 0, MaxClipboard/4+1).Reply()
		if err != nil {
			return "", err
		}
		if len(r.Value) == 0 {
			return string(buf), nil
		}
		buf = append(buf, r.Value...)
		if len(buf) > MaxClipboard {
			return "", aci.Errorf(aci.CodeTooLarge, "clipboard_get: clipboard text exceeds %d bytes", MaxClipboard)
		}
		timeout.Reset(clipWait)
	}
}

// serveSelection answers another client's request for our CLIPBOARD (runs
// on the event loop; sends only unchecked requests).
func (x *xconn) serveSelection(e xproto.SelectionRequestEvent) {
	notify := xproto.SelectionNotifyEvent{Time: e.Time, Requestor: e.Requestor, Selection: e.Selection, Target: e.Target, Property: e.Property}
	if notify.Property == 0 {
		notify.Property = e.Target // obsolete clients
	}
	clip, _ := x.atom("CLIPBOARD")
	targets, _ := x.atom("TARGETS")
	utf8, _ := x.atom("UTF8_STRING")
	text, _ := x.atom("TEXT")
	incr, _ := x.atom("INCR")
	data := []byte(x.d.clip.offered())
	switch {
	case e.Owner != x.clipWin || e.Selection != clip || !x.clip.owned.Load():
		notify.Property = 0
	case e.Target == targets:
		list := make([]byte, 16)
		for i, a := range []xproto.Atom{targets, utf8, xproto.AtomString, text} {
			xgb.Put32(list[i*4:], uint32(a))
		}
		xproto.ChangeProperty(x.c, xproto.PropModeReplace, e.Requestor, notify.Property, xproto.AtomAtom, 32, 4, list)
	case e.Target == utf8 || e.Target == xproto.AtomString || e.Target == text:
		typ := e.Target
		if typ == text {
			typ = utf8
		}
		if len(data) <= incrChunk {
			xproto.ChangeProperty(x.c, xproto.PropModeReplace, e.Requestor, notify.Property, typ, 8, uint32(len(data)), data)
			break
		}
		// Too big for one request: announce INCR and send on each deletion.
		xproto.ChangeWindowAttributes(x.c, e.Requestor, xproto.CwEventMask, []uint32{xproto.EventMaskPropertyChange})
		x.clip.incr[incrKey{e.Requestor, notify.Property}] = &incrSend{data: data, target: typ}
		xproto.ChangeProperty(x.c, xproto.PropModeReplace, e.Requestor, notify.Property, incr, 32, 1, put32(uint32(len(data))))
	default:
		notify.Property = 0
	}
	xproto.SendEvent(x.c, false, e.Requestor, 0, string(notify.Bytes()))
}

// continueIncr sends the next INCR piece when the requestor deleted the last.
func (x *xconn) continueIncr(e xproto.PropertyNotifyEvent) {
	k := incrKey{e.Window, e.Atom}
	t, ok := x.clip.incr[k]
	if !ok || e.State != xproto.PropertyDelete {
		return
	}
	n := min(incrChunk, len(t.data)-t.off)
	xproto.ChangeProperty(x.c, xproto.PropModeReplace, e.Window, e.Atom, t.target, 8, uint32(n), t.data[t.off:t.off+n])
	t.off += n
	if n == 0 {
		delete(x.clip.incr, k)
		xproto.ChangeWindowAttributes(x.c, e.Window, xproto.CwEventMask, []uint32{0})
	}
}

// dropSelections gives up every selection guestd owns and forgets the text
// it offered (a reset: the next episode starts with an empty clipboard).
func (x *xconn) dropSelections() error {
	x.clip.owned.Store(false)
	x.d.clip.offer("")
	for _, name := range []string{"CLIPBOARD", "PRIMARY", "SECONDARY"} {
		a, err := x.atom(name)
		if err != nil {
			return err
		}
		if r, err := xproto.GetSelectionOwner(x.c, a).Reply(); err == nil && r.Owner == x.clipWin {
			xproto.SetSelectionOwner(x.c, 0, a, xproto.TimeCurrentTime)
		}
	}
	return nil
}

func put32(v uint32) []byte {
	b := make([]byte, 4)
	xgb.Put32(b, v)
	return b
}
