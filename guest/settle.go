package guest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/xfixes"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
)

// Settling on X DAMAGE.
//
// Each connection holds one DAMAGE object on the root window at report level
// NonEmpty: the server sends one notify when the screen's damage goes from
// empty to non-empty, and the event loop counts it and subtracts the damage
// at once, re-arming the next notify. The count (seq) and the arrival time of
// the last notify say whether, and when, the screen last changed.
//
// Notifies travel behind replies, so "nothing arrived" is only trusted after
// a barrier: a property change on the guest's private window, whose
// PropertyNotify comes back through the same ordered event stream. When the
// event loop has seen the barrier it has seen every damage the server
// reported before it.
//
// A capture records the seq as of its barrier. Every notify counted by then
// had its subtract queued before the capture's GetImage, so any later drawing
// raises a new notify: seq equal to the capture's seq after a fresh barrier
// means the screen has not changed since that capture.

const barrierProperty = "SHINKEN_BARRIER"

// damageState is one connection's view of screen damage.
type damageState struct {
	ok bool
	id atomic.Uint32 // the damage object; set before it exists, as its first notify may come at once

	// Regions (damaged): what was drawn since the last capture, and the
	// event loop's and the capture's own subtract targets. 0: none.
	acc, tmpEL atomic.Uint32
	tmpCap     xfixes.Region

	sendMu sync.Mutex // orders barrier numbers with their requests
	sent   uint64     // barriers sent (guarded by sendMu)

	mu   sync.Mutex
	seq  uint64        // damage notifies seen
	last time.Time     // when the last one arrived
	seen uint64        // barriers seen
	wake chan struct{} // closed and replaced on every notify and barrier
}

type damageSnap struct {
	seq  uint64
	last time.Time
	seen uint64
	wake <-chan struct{}
}

func (s *damageState) snap() damageSnap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return damageSnap{seq: s.seq, last: s.last, seen: s.seen, wake: s.wake}
}

func (s *damageState) bump(damaged bool) {
	s.mu.Lock()
	if damaged {
		s.seq++
		s.last = time.Now()
	} else {
		s.seen++
	}
	close(s.wake)
	s.wake = make(chan struct{})
	s.mu.Unlock()
}

// initDamage negotiates XFIXES (DAMAGE requires it) and DAMAGE and creates
// the root's damage object. Without them observations are not settled and
// every observe captures; the welcome says so.
func (x *xconn) initDamage() {
	if err := xfixes.Init(x.c); err != nil {
		return
	}
	if _, err := xfixes.QueryVersion(x.c, 5, 0).Reply(); err != nil {
		return
	}
	if err := damage.Init(x.c); err != nil {
		return
	}
	if _, err := damage.QueryVersion(x.c, 1, 1).Reply(); err != nil {
		return
	}
	x.initDamageRegions()
	id, err := damage.NewDamageId(x.c)
	if err != nil {
		return
	}
	// A window's damage object reports the whole window at creation: the
	// event loop may see that notify before CreateChecked returns, and must
	// know the id to re-arm it.
	x.dmg.id.Store(uint32(id))
	if err := damage.CreateChecked(x.c, id, xproto.Drawable(x.root), damage.ReportLevelNonEmpty).Check(); err != nil {
		x.dmg.id.Store(0)
		return
	}
	x.dmg.ok = true
}

// onDamage runs on the event loop: count the notify and re-arm.
func (x *xconn) onDamage() {
	id := damage.Damage(x.dmg.id.Load())
	if id == 0 {
		return
	}
	if acc, tmp := xfixes.Region(x.dmg.acc.Load()), xfixes.Region(x.dmg.tmpEL.Load()); acc != 0 {
		// Where it was drawn joins what the next capture reads (damaged).
		damage.Subtract(x.c, id, 0, tmp)
		xfixes.UnionRegion(x.c, tmp, acc, acc)
	} else {
		damage.Subtract(x.c, id, 0, 0)
	}
	x.dmg.bump(true)
}

// Where the screen changed.
//
// The capture already trusts DAMAGE to say whether the screen changed since
// the last capture (an unchanged screen is not read at all); it also trusts
// it to say where, so that only the rows damaged since then are hashed and
// compared. Every subtract moves the damage into a region of its own (the
// event loop's, or the capture's: two goroutines must not share one), which
// is then joined to acc, all on the server and in request order. A capture,
// under the server grab and after its barrier (by when the event loop has
// sent the subtract of every notify before it), subtracts what is left,
// fetches acc and empties it: that is every rectangle drawn since the
// previous capture on this connection.

// initDamageRegions creates the regions; without them every row is hashed.
func (x *xconn) initDamageRegions() {
	var ids [3]xfixes.Region
	for i := range ids {
		id, err := xfixes.NewRegionId(x.c)
		if err != nil {
			return
		}
		if err := xfixes.CreateRegionChecked(x.c, id, nil).Check(); err != nil {
			return
		}
		ids[i] = id
	}
	x.dmg.tmpEL.Store(uint32(ids[1]))
	x.dmg.tmpCap = ids[2]
	x.dmg.acc.Store(uint32(ids[0])) // last: the event loop reads it first
}

// damaged returns the rectangles drawn since the previous call (the
// previous capture) and starts afresh; ok is false without regions. It runs
// under the display lock, after a barrier.
func (x *xconn) damaged() ([]xproto.Rectangle, bool, error) {
	acc := xfixes.Region(x.dmg.acc.Load())
	if acc == 0 {
		return nil, false, nil
	}
	damage.Subtract(x.c, damage.Damage(x.dmg.id.Load()), 0, x.dmg.tmpCap)
	xfixes.UnionRegion(x.c, x.dmg.tmpCap, acc, acc)
	r, err := xfixes.FetchRegion(x.c, acc).Reply()
	if err != nil {
		return nil, false, err
	}
	xfixes.SetRegion(x.c, acc, nil)
	return r.Rectangles, true, nil
}

// isBarrier reports whether e is a barrier's PropertyNotify (event loop).
func (x *xconn) isBarrier(e xproto.PropertyNotifyEvent) bool {
	return e.Window == x.clipWin && e.Atom != 0 && e.Atom == xproto.Atom(x.barrierAtom.Load())
}

// barrier returns once the event loop has seen every event the server sent
// before now.
func (x *xconn) barrier(ctx context.Context) error {
	x.dmg.sendMu.Lock()
	x.dmg.sent++
	n := x.dmg.sent
	xproto.ChangeProperty(x.c, xproto.PropModeReplace, x.clipWin, xproto.Atom(x.barrierAtom.Load()), xproto.AtomCardinal, 32, 1,
		[]byte{byte(n), byte(n >> 8), byte(n >> 16), byte(n >> 24)})
	x.dmg.sendMu.Unlock()
	limit := time.NewTimer(xTimeout)
	defer limit.Stop()
	for {
		s := x.dmg.snap()
		if s.seen >= n {
			return nil
		}
		select {
		case <-s.wake:
		case <-x.dead:
			return displayErr("x server %s: connection lost", x.d.name)
		case <-ctx.Done():
			return aci.Errorf(aci.CodeTimeout, "waiting for the x server: %v", ctx.Err())
		case <-limit.C:
			return displayErr("x server %s did not answer within %v", x.d.name, xTimeout)
		}
	}
}

// barrierOn takes a barrier on x under the display lock.
func (d *display) barrierOn(ctx context.Context, x *xconn) error {
	return d.run(ctx, 0, func(*xconn) error { return x.barrier(ctx) })
}

// damageMark is where a settle starts: the damage seen up to a barrier.
type damageMark struct {
	x     *xconn
	seq   uint64
	start time.Time
	// pointer: the action moved or pressed the pointer (its input also
	// went to the app under the pointer; ping.go).
	pointer bool
	// taken: when the apps the input went to answered a ping (ping.go);
	// zero: none was asked, or one did not answer.
	taken time.Time
}

// mark takes a barrier and returns the damage seen so far; a zero mark (no
// DAMAGE) settles nothing.
func (d *display) mark(ctx context.Context) (damageMark, error) {
	var m damageMark
	err := d.run(ctx, 0, func(x *xconn) error {
		if !x.dmg.ok {
			return nil
		}
		if err := x.barrier(ctx); err != nil {
			return err
		}
		m = damageMark{x: x, seq: x.dmg.snap().seq, start: time.Now()}
		return nil
	})
	return m, err
}

// settle waits for the screen to settle after m. With afterInput it first
// waits up to p.FirstMS for damage; otherwise only damage within the last
// p.QuietMS counts. Once damaged, it waits for p.QuietMS without damage. It
// never waits past p.MaxMS from m's start and reports what happened. It runs
// outside the display lock: only its barriers take it.
//
// frame, when not nil, brings the news of the browser with the focus
// (browser_settle.go): once it says the frame after the action was drawn,
// the settle ends frameQuiet after the later of that answer and the last
// damage, when that comes before the damage windows would end it; while it
// says a page loads, the settle does not end before the ceiling, and after
// a load the damage windows decide.
func (d *display) settle(ctx context.Context, m damageMark, p aci.Settle, afterInput bool, frame <-chan browserNews) (*aci.SettleInfo, error) {
	if m.x == nil || p.MaxMS <= 0 {
		return nil, nil
	}
	x := m.x
	quiet := time.Duration(p.QuietMS) * time.Millisecond
	ceiling := m.start.Add(time.Duration(p.MaxMS) * time.Millisecond)
	first := m.start
	if afterInput {
		from := m.start
		if m.taken.After(from) {
			from = m.taken // the first window counts from when the app took the input
		}
		first = from.Add(time.Duration(p.FirstMS) * time.Millisecond)
	} else if s := x.dmg.snap(); !s.last.IsZero() && m.start.Sub(s.last) < quiet {
		m.seq-- // damage within the quiet period before the observe counts
	}
	info := &aci.SettleInfo{}
	if !m.taken.IsZero() {
		info.InputMS = max(0, m.taken.Sub(m.start).Milliseconds())
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	confirmed := false // a barrier passed since the state last changed
	// Quiescence (quiesce.go) may end the wait before the damage windows
	// do. Its first read follows a barrier, so the X server has the action's
	// input by then; each later read is compared with the one before.
	q, horizon := d.quiet, time.Duration(max(p.FirstMS, p.QuietMS))*time.Millisecond
	var prev quietSnap
	var probeAt time.Time
	probeEvery := time.Millisecond
	var frameAt time.Time        // when the browser answered; zero: not (yet)
	held, loaded := false, false // a page loads; one did during this settle
	for {
		s := x.dmg.snap()
		now := time.Now()
		damaged := s.seq != m.seq
		var until time.Time
		switch {
		case !damaged && !now.Before(first):
			until = time.Time{} // no damage within the window: done once confirmed
		case !damaged:
			until = first
		case !now.Before(s.last.Add(quiet)):
			until = time.Time{} // quiet: done once confirmed
		default:
			until = s.last.Add(quiet)
		}
		byFrame := false
		if held && now.Before(ceiling) {
			until = ceiling // news that the load stopped, or the ceiling, wakes it
		}
		if !frameAt.IsZero() && !until.IsZero() && !loaded {
			fu := frameAt
			if s.last.After(fu) {
				fu = s.last
			}
			if fu = fu.Add(frameQuiet); !now.Before(fu) {
				until, byFrame = time.Time{}, true
			} else if fu.Before(until) {
				until = fu
			}
		}
		if !until.IsZero() && !now.Before(ceiling) {
			info.Damaged, info.TimedOut = damaged, damaged
			break
		}
		if until.IsZero() {
			if confirmed {
				info.Damaged, info.Frame = damaged, byFrame
				break
			}
			if err := d.barrierOn(ctx, x); err != nil {
				return nil, err
			}
			if x.dmg.snap().seq == s.seq {
				confirmed = true
			}
			continue
		}
		if q != nil && !held && !now.Before(probeAt) {
			if prev.run == nil {
				if err := d.barrierOn(ctx, x); err != nil {
					return nil, err
				}
			}
			cur := q.read(prev, horizon)
			if cur.quiet() {
				// Nothing ran since the last read and nothing will soon: every
				// drawing request is in the X server's hands, and the
				// barrier brings back the damage it raised.
				if err := d.barrierOn(ctx, x); err != nil {
					return nil, err
				}
				info.Damaged, info.Idle = x.dmg.snap().seq != m.seq, true
				break
			}
			prev = cur
			probeAt = time.Now().Add(probeEvery)
			probeEvery = min(2*probeEvery, maxProbeEvery)
			continue
		}
		confirmed = false
		next := minTime(until, ceiling)
		if q != nil {
			next = minTime(next, probeAt)
		}
		timer.Reset(time.Until(next))
		select {
		case <-s.wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		case n, ok := <-frame:
			switch {
			case !ok:
				frame = nil
			case n.loading:
				held, loaded = true, true
			case n.frame:
				frameAt = n.at
			default:
				held = false
			}
			if !timer.Stop() {
				<-timer.C
			}
		case <-x.dead:
			return nil, displayErr("x server %s: connection lost while settling", d.name)
		case <-ctx.Done():
			return nil, aci.Errorf(aci.CodeTimeout, "settling: %v", ctx.Err())
		}
	}
	info.WaitedMS = time.Since(m.start).Milliseconds()
	return info, nil
}

// maxProbeEvery bounds the pause between two quiescence reads while the
// desktop is busy: the reads cost about a tenth of a millisecond each.
const maxProbeEvery = 16 * time.Millisecond

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// windowsChanged wakes waiters for a window to appear (event loop).
func (x *xconn) windowsChanged() {
	x.windowsMu.Lock()
	close(x.windowsWake)
	x.windowsWake = make(chan struct{})
	x.windowsMu.Unlock()
}

func (x *xconn) windowsChan() <-chan struct{} {
	x.windowsMu.Lock()
	defer x.windowsMu.Unlock()
	return x.windowsWake
}
