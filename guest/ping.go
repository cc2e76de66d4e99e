package guest

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
)

// Settling from when the app took the input (docs/architecture.md,
// "Observation fidelity").
//
// The settle's first window (first_ms: wait this long for the action's
// first drawing) counts from when the input reached the X server. On a
// loaded host the app the input went to may read it much later; the window
// then closes on a screen the app has not touched yet, and the frame shows
// the state before the action. EWMH apps answer _NET_WM_PING, the window
// manager's "are you alive" message, by sending it back to the root window.
// The X server queues events to a client in the order it raised them, and
// the ping goes out on the connection the input went out on, after it: the
// answer means the app's event loop has read the input. So after an action
// the settle pings the app with the keyboard focus (the active window) and,
// for a pointer action, the app under the pointer, when they list
// _NET_WM_PING in WM_PROTOCOLS, and its first window counts from the last
// answer (info.settle.input_ms). A window unmapped or destroyed meanwhile
// counts as an answer (the action closed it); an app that never answers
// holds the settle to its ceiling, as one that draws forever does.

// pings are a connection's pings in flight, by token (the echoed timestamp
// field).
type pings struct {
	mu      sync.Mutex
	next    uint32
	waiting map[uint32]ping
}

// ping is one in flight: the window asked and the channel closed when it
// answered, or when the window went away (an action that closes its
// window: the app took the input, and nothing is left to answer).
type ping struct {
	win  xproto.Window
	done chan struct{}
}

// onPong runs on the event loop for a _NET_WM_PING that came back.
func (p *pings) onPong(token uint32) {
	p.mu.Lock()
	pg, ok := p.waiting[token]
	delete(p.waiting, token)
	p.mu.Unlock()
	if ok {
		close(pg.done)
	}
}

// onGone runs on the event loop when window w is unmapped or destroyed.
func (p *pings) onGone(w xproto.Window) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for token, pg := range p.waiting {
		if pg.win == w {
			delete(p.waiting, token)
			close(pg.done)
		}
	}
}

func (p *pings) add(w xproto.Window) (uint32, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == nil {
		p.waiting = map[uint32]ping{}
	}
	p.next++
	ch := make(chan struct{})
	p.waiting[p.next] = ping{win: w, done: ch}
	return p.next, ch
}

func (p *pings) drop(token uint32) {
	p.mu.Lock()
	delete(p.waiting, token)
	p.mu.Unlock()
}

// isPong reports whether e is an answered _NET_WM_PING (event loop).
func (x *xconn) isPong(e xproto.ClientMessageEvent) (uint32, bool) {
	proto, ping := xproto.Atom(x.wmProtocols.Load()), x.netWMPing.Load()
	if proto == 0 || e.Type != proto || e.Format != 32 || e.Window != x.root {
		return 0, false
	}
	d := e.Data.Data32
	return d[1], len(d) >= 3 && d[0] == ping
}

// pingTargets lists the client windows an action's input went to that
// answer pings: the active window and, for a pointer action, the client
// window under the pointer.
func (x *xconn) pingTargets(pointer bool) []xproto.Window {
	var out []xproto.Window
	if w, ok := x.activeWindow(); ok && x.answersPing(w) {
		out = append(out, w)
	}
	if pointer {
		if w := x.pingerUnderPointer(); w != 0 && !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// pingerUnderPointer descends from the root to the deepest window under
// the pointer and climbs back to the first one that answers pings (the
// client window inside its frame); 0 when there is none.
func (x *xconn) pingerUnderPointer() xproto.Window {
	var path []xproto.Window
	w := x.root
	for range 16 {
		r, err := xproto.QueryPointer(x.c, w).Reply()
		if err != nil || r.Child == 0 {
			break
		}
		w = r.Child
		path = append(path, w)
	}
	for i := len(path) - 1; i >= 0; i-- {
		if x.answersPing(path[i]) {
			return path[i]
		}
	}
	return 0
}

// answersPing reports whether w lists _NET_WM_PING in WM_PROTOCOLS.
func (x *xconn) answersPing(w xproto.Window) bool {
	v, err := x.prop32(w, "WM_PROTOCOLS", xproto.AtomAtom, 32)
	return err == nil && slices.Contains(v, x.netWMPing.Load())
}

// inputTaken pings the apps the action's input went to and waits until
// each has answered or deadline passes. It returns when the last answer
// came, zero when no app was asked or one did not answer in time.
func (d *display) inputTaken(ctx context.Context, pointer bool, deadline time.Time) time.Time {
	var waits []chan struct{}
	var tokens []uint32
	var x *xconn
	err := d.run(ctx, 0, func(cx *xconn) error {
		x = cx
		if cx.wmProtocols.Load() == 0 {
			return nil
		}
		for _, w := range cx.pingTargets(pointer) {
			// Its unmap or destruction comes to this connection too.
			a, err := xproto.GetWindowAttributes(cx.c, w).Reply()
			if err != nil || a.MapState != xproto.MapStateViewable {
				continue // gone, or going
			}
			if xproto.ChangeWindowAttributesChecked(cx.c, w, xproto.CwEventMask,
				[]uint32{a.YourEventMask | xproto.EventMaskStructureNotify}).Check() != nil {
				continue
			}
			token, ch := cx.pings.add(w)
			tokens, waits = append(tokens, token), append(waits, ch)
			ev := xproto.ClientMessageEvent{Format: 32, Window: w, Type: xproto.Atom(cx.wmProtocols.Load()),
				Data: xproto.ClientMessageDataUnionData32New([]uint32{cx.netWMPing.Load(), token, uint32(w), 0, 0})}
			xproto.SendEvent(cx.c, false, w, xproto.EventMaskNoEvent, string(ev.Bytes()))
		}
		return nil
	})
	defer func() {
		for _, t := range tokens {
			x.pings.drop(t)
		}
	}()
	if err != nil || len(waits) == 0 {
		return time.Time{}
	}
	limit := time.NewTimer(time.Until(deadline))
	defer limit.Stop()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-limit.C:
			return time.Time{}
		case <-x.dead:
			return time.Time{}
		case <-ctx.Done():
			return time.Time{}
		}
	}
	return time.Now()
}

// pointerVerb reports whether v moves or presses the pointer.
func pointerVerb(v aci.Verb) bool {
	switch v {
	case aci.Click, aci.DoubleClick, aci.RightClick, aci.Move, aci.Scroll, aci.Drag, aci.MouseDown, aci.MouseUp:
		return true
	}
	return false
}
