package guest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/damage"
	"github.com/jezek/xgb/shm"
	"github.com/jezek/xgb/xproto"
	"github.com/jezek/xgb/xtest"
	"github.com/shinken-rl/shinken/aci"
	"golang.org/x/sys/unix"
)

func init() {
	// xgb logs unrecoverable reads when a display dies; guestd reports those
	// as typed errors instead.
	xgb.Logger.SetOutput(discard{})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// xTimeout bounds how long the X server may take to answer beyond an
// operation's own expected duration before it counts as wedged.
const xTimeout = 3 * time.Second

// display owns the connection to one X server. Operations run one at a time
// (X input must be serialized anyway), each under a deadline: an X server
// that stops answering costs one display_error and a reconnect, never a hang.
type display struct {
	name     string
	sem      chan struct{}
	noDamage bool // health probes: no DAMAGE object
	// stalled, when set, diagnoses an X server that did not answer in
	// time (xstall.go): an error to return instead of display_error.
	stalled func(within time.Duration) error
	cur     *xconn // guarded by sem

	clip    clipOffer       // the text this guest offers as CLIPBOARD owner (clipboard.go)
	pipe    capturePipeline // the frames observe delivers (capture.go; guarded by sem, but for its buffers)
	initial *xInitial       // the X state a reset returns to (xreset.go; guarded by sem)
	quiet   *quiescence     // ends settles on quiescence (quiesce.go); nil: damage windows only (Config.SettleIdle)
}

func newDisplay(name string) *display {
	return &display{name: name, sem: make(chan struct{}, 1)}
}

// xconn is one live connection; a new one replaces it after a failure.
type xconn struct {
	d    *display
	nc   net.Conn
	c    *xgb.Conn
	root xproto.Window
	w, h int
	dead chan struct{} // closed when the connection is gone
	ops  sync.WaitGroup

	shmOK    bool
	shmTried bool
	shmSeg   shm.Seg
	shmMem   []byte
	fb       *framebuffer // the X server's own pixels (framebuffer.go); nil: GetImage
	fbTried  bool

	keys    *keymap
	xkbOp   byte // XKB's major opcode once enabled on this connection (xkbstate.go)
	atomMu  sync.Mutex
	atoms   map[string]xproto.Atom
	clipWin xproto.Window // guestd's private window: CLIPBOARD owner, conversion target, barrier (settle.go)
	clip    clipConn      // this connection's side of the clipboard (clipboard.go)

	dmg         damageState   // screen damage (settle.go)
	barrierAtom atomic.Uint32 // the barrier property, read by the event loop
	wmProtocols atomic.Uint32 // WM_PROTOCOLS and _NET_WM_PING, read by the event loop (ping.go)
	netWMPing   atomic.Uint32
	pings       pings         // pings in flight (ping.go)
	windowsWake chan struct{} // closed and replaced when the window list may have changed
	windowsMu   sync.Mutex
	xresPIDs    atomic.Int32 // whether the X-Resource extension's client pids are ours: 0 not asked yet, 1 yes, -1 no (windows.go)
}

type screenInfo struct {
	w, h   int
	shm    bool
	damage bool
}

func displayErr(format string, args ...any) *aci.Error {
	return aci.Errorf(aci.CodeDisplayError, format, args...)
}

// run runs fn with a live connection. expect is how long fn may legitimately
// take (drags, settles); past expect+xTimeout the X server counts as wedged:
// the connection is dropped and display_error returned.
func (d *display) run(ctx context.Context, expect time.Duration, fn func(x *xconn) error) error {
	return d.runWithin(ctx, expect+xTimeout, fn)
}

// runWithin is run with an explicit bound on how long X may take.
func (d *display) runWithin(ctx context.Context, within time.Duration, fn func(x *xconn) error) error {
	select {
	case d.sem <- struct{}{}:
	case <-ctx.Done():
		return aci.Errorf(aci.CodeTimeout, "waiting for the display: %v", ctx.Err())
	}
	defer func() { <-d.sem }()

	limit := time.NewTimer(within)
	defer limit.Stop()
	done := make(chan error, 1)
	var x *xconn
	connected := make(chan *xconn, 1)
	cur := d.cur
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- aci.Errorf(aci.CodeInternal, "x operation panicked: %v", r)
			}
		}()
		cx := cur
		if cx == nil || cx.isDead() {
			var err error
			cx, err = d.connect()
			if err != nil {
				done <- err
				return
			}
		}
		cx.ops.Add(1)
		defer cx.ops.Done()
		connected <- cx
		done <- fn(cx)
	}()
	fail := func(err error) error {
		if x != nil {
			x.kill()
		}
		if d.cur == x {
			d.cur = nil
		}
		return err
	}
	for {
		select {
		case x = <-connected:
			d.cur = x
			continue
		case err := <-done:
			if x == nil {
				select {
				case x = <-connected:
					d.cur = x
				default:
				}
			}
			var ae *aci.Error
			if err != nil && !errors.As(err, &ae) {
				// An untyped error is the X connection failing (or a protocol
				// error): drop the connection, a fresh one is made next time.
				return fail(displayErr("x server %s: %v", d.name, err))
			}
			return err
		case <-ctx.Done():
			return fail(aci.Errorf(aci.CodeTimeout, "x operation on %s: %v", d.name, ctx.Err()))
		case <-limit.C:
			fail(nil)
			if d.stalled != nil {
				if err := d.stalled(within); err != nil {
					return err
				}
			}
			return displayErr("x server %s did not answer within %v", d.name, within)
		}
	}
}

func (x *xconn) isDead() bool {
	select {
	case <-x.dead:
		return true
	default:
		return false
	}
}

// kill drops the connection at once (without the graceful round trip that
// xgb's Close makes, which a wedged server would never answer).
func (x *xconn) kill() { x.nc.Close() }

func (d *display) close() {
	d.sem <- struct{}{}
	defer func() { <-d.sem }()
	if d.cur != nil {
		d.cur.kill()
		<-d.cur.dead
		d.cur = nil
	}
}

// dialX connects to an X display name such as ":3", ":3.0", "host:3" or a
// socket path.
func dialX(name string, timeout time.Duration) (net.Conn, error) {
	if strings.HasPrefix(name, "/") {
		return net.DialTimeout("unix", name, timeout)
	}
	host, num, ok := strings.Cut(name, ":")
	if !ok {
		return nil, fmt.Errorf("bad display %q", name)
	}
	num, _, _ = strings.Cut(num, ".")
	n, err := strconv.Atoi(num)
	if err != nil {
		return nil, fmt.Errorf("bad display %q", name)
	}
	if host == "" || host == "unix" {
		return net.DialTimeout("unix", "/tmp/.X11-unix/X"+num, timeout)
	}
	return net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(6000+n)), timeout)
}

// connect dials the X server, retrying once: a server that just resumed
// (SIGCONT) may drop the first new connection.
func (d *display) connect() (*xconn, error) {
	x, err := d.connectOnce()
	if err != nil {
		x, err = d.connectOnce()
	}
	return x, err
}

func (d *display) connectOnce() (*xconn, error) {
	nc, err := dialX(d.name, xTimeout)
	if err != nil {
		return nil, displayErr("connect to x server %s: %v", d.name, err)
	}
	nc.SetDeadline(time.Now().Add(xTimeout)) // bounds the handshake and setup round trips
	c, err := xgb.NewConnNet(nc)
	if err != nil {
		nc.Close()
		return nil, displayErr("x handshake with %s: %v", d.name, err)
	}
	x := &xconn{d: d, nc: nc, c: c, dead: make(chan struct{}), atoms: map[string]xproto.Atom{},
		clip: newClipConn(), windowsWake: make(chan struct{})}
	x.dmg.wake = make(chan struct{})
	go x.eventLoop()
	if err := x.setup(); err != nil {
		x.kill()
		return nil, displayErr("x setup on %s: %v", d.name, err)
	}
	nc.SetDeadline(time.Time{})
	go func() { // release the shared memory once no operation uses it
		<-x.dead
		x.ops.Wait()
		if x.shmMem != nil {
			unix.SysvShmDetach(x.shmMem)
		}
		if x.fb != nil {
			x.fb.detach()
		}
	}()
	return x, nil
}

func (x *xconn) setup() error {
	s := xproto.Setup(x.c)
	if s == nil || len(s.Roots) == 0 {
		return errors.New("no screens")
	}
	scr := s.DefaultScreen(x.c)
	x.root = scr.Root
	x.w, x.h = int(scr.WidthInPixels), int(scr.HeightInPixels)
	if err := xtest.Init(x.c); err != nil {
		return fmt.Errorf("XTEST: %w", err)
	}
	// A private window: clipboard owner and conversion target.
	win, err := xproto.NewWindowId(x.c)
	if err != nil {
		return err
	}
	if err := xproto.CreateWindowChecked(x.c, 0, win, x.root, -10, -10, 1, 1, 0, xproto.WindowClassInputOnly, 0,
		xproto.CwEventMask, []uint32{xproto.EventMaskPropertyChange}).Check(); err != nil {
		return fmt.Errorf("create window: %w", err)
	}
	x.clipWin = win
	// Intern up front what the event loop needs, so it never waits on a reply.
	for _, name := range []string{"CLIPBOARD", "TARGETS", "UTF8_STRING", "TEXT", "INCR", clipProperty,
		"_NET_SUPPORTING_WM_CHECK", "_NET_ACTIVE_WINDOW", "_NET_CLIENT_LIST", "_NET_WM_NAME", "_NET_WM_PID", barrierProperty} {
		if _, err := x.atom(name); err != nil {
			return err
		}
	}
	b, _ := x.atom(barrierProperty)
	x.barrierAtom.Store(uint32(b))
	if p, err := x.atom("WM_PROTOCOLS"); err == nil {
		if ping, err := x.atom("_NET_WM_PING"); err == nil {
			x.netWMPing.Store(uint32(ping))
			x.wmProtocols.Store(uint32(p))
		}
	}
	// Window list changes (launch_app waits for its window on them).
	xproto.ChangeWindowAttributes(x.c, x.root, xproto.CwEventMask,
		[]uint32{xproto.EventMaskPropertyChange | xproto.EventMaskSubstructureNotify})
	if !x.d.noDamage {
		x.initDamage()
		if err := x.captureInitial(); err != nil {
			return fmt.Errorf("initial state: %w", err)
		}
	}
	return nil
}

// initSHM attaches one System V segment big enough for the whole screen. On
// any failure capture falls back to GetImage.
// It runs on first use, so connections that never capture (health probes)
// hold no segment.
func (x *xconn) initSHM() {
	if x.shmTried {
		return
	}
	x.shmTried = true
	if err := shm.Init(x.c); err != nil {
		return
	}
	size := x.w * x.h * 4
	id, err := unix.SysvShmGet(unix.IPC_PRIVATE, size, unix.IPC_CREAT|0o600)
	if err != nil {
		return
	}
	defer unix.SysvShmCtl(id, unix.IPC_RMID, nil) // freed once both sides detach
	mem, err := unix.SysvShmAttach(id, 0, 0)
	if err != nil {
		return
	}
	seg, err := shm.NewSegId(x.c)
	if err == nil {
		err = shm.AttachChecked(x.c, seg, uint32(id), false).Check()
	}
	if err != nil {
		unix.SysvShmDetach(mem)
		return
	}
	x.shmOK, x.shmSeg, x.shmMem = true, seg, mem
}

func (x *xconn) eventLoop() {
	defer close(x.dead)
	for {
		ev, err := x.c.WaitForEvent()
		if ev == nil && err == nil {
			return
		}
		switch e := ev.(type) {
		case xproto.SelectionRequestEvent:
			x.serveSelection(e)
		case xproto.SelectionClearEvent:
			x.clip.owned.Store(false)
		case xproto.SelectionNotifyEvent:
			select {
			case x.clip.sel <- e:
			default:
			}
		case damage.NotifyEvent:
			x.onDamage()
		case xproto.MapNotifyEvent:
			x.windowsChanged()
		case xproto.ClientMessageEvent:
			if token, ok := x.isPong(e); ok {
				x.pings.onPong(token)
			}
		case xproto.UnmapNotifyEvent:
			x.pings.onGone(e.Window)
		case xproto.DestroyNotifyEvent:
			x.pings.onGone(e.Window)
		case xproto.PropertyNotifyEvent:
			if x.isBarrier(e) {
				x.dmg.bump(false)
			} else if e.Window == x.root {
				x.windowsChanged()
			} else if e.Window == x.clipWin {
				select {
				case x.clip.props <- e:
				default:
				}
			} else {
				x.continueIncr(e)
			}
		}
	}
}

// atom interns name (cached per connection).
func (x *xconn) atom(name string) (xproto.Atom, error) {
	x.atomMu.Lock()
	a, ok := x.atoms[name]
	x.atomMu.Unlock()
	if ok {
		return a, nil
	}
	r, err := xproto.InternAtom(x.c, false, uint16(len(name)), name).Reply()
	if err != nil {
		return 0, err
	}
	x.atomMu.Lock()
	x.atoms[name] = r.Atom
	x.atomMu.Unlock()
	return r.Atom, nil
}

// sync makes a round trip, so every request before it has been processed.
func (x *xconn) sync() error {
	_, err := xproto.GetInputFocus(x.c).Reply()
	return err
}

func (x *xconn) pointer() ([2]int, error) {
	r, err := xproto.QueryPointer(x.c, x.root).Reply()
	if err != nil {
		return [2]int{}, err
	}
	return [2]int{int(r.RootX), int(r.RootY)}, nil
}

func (d *display) info(ctx context.Context) (screenInfo, error) {
	var si screenInfo
	err := d.run(ctx, 0, func(x *xconn) error {
		x.initSHM()
		si = screenInfo{w: x.w, h: x.h, shm: x.shmOK, damage: x.dmg.ok}
		return nil
	})
	return si, err
}

// wmAlive makes an X round trip and reports whether a window manager holds
// the root: _NET_SUPPORTING_WM_CHECK names a live window that names itself.
// X counts as wedged when it takes more than within to answer.
func (d *display) wmAlive(ctx context.Context, within time.Duration) (bool, error) {
	var ok bool
	err := d.runWithin(ctx, within, func(x *xconn) error {
		if err := x.sync(); err != nil {
			return err
		}
		ok = x.wmRunning()
		return nil
	})
	return ok, err
}

func (x *xconn) wmRunning() bool {
	check, err := x.atom("_NET_SUPPORTING_WM_CHECK")
	if err != nil {
		return false
	}
	w, ok := x.windowProp(x.root, check)
	if !ok || w == 0 {
		return false
	}
	self, ok := x.windowProp(w, check)
	return ok && self == w
}

// wmProbe is wmServing's state across calls: the unmapped window whose
// frame extents are asked for, on the connection that made it.
type wmProbe struct {
	x   *xconn
	win xproto.Window
}

// wmServing reports whether the window manager's event loop runs. Claiming
// the root comes first in a WM's start (wmRunning; openbox claims it, then
// loads its configuration, theme and fonts, and only then handles events),
// and a window mapped in between is managed late: an Xt client such as
// xterm waits out its 5 s wmTimeout for a ConfigureNotify, and the window
// may map unfocused. So once the root is claimed, an unmapped window of
// this connection asks for its frame extents (EWMH
// _NET_REQUEST_FRAME_EXTENTS), which only the event loop answers, by
// setting _NET_FRAME_EXTENTS on it; the request is sent again on each call
// until it is answered, since a WM may drop what came during its start. A
// WM that does not list the request in _NET_SUPPORTED serves once it holds
// the root.
func (x *xconn) wmServing(pr *wmProbe) (bool, error) {
	if !x.wmRunning() {
		return false, nil
	}
	req, err := x.atom("_NET_REQUEST_FRAME_EXTENTS")
	if err != nil {
		return false, err
	}
	if pr.x != x {
		if ok, err := x.supported(req); err != nil || !ok {
			return !ok, err
		}
		win, err := xproto.NewWindowId(x.c)
		if err != nil {
			return false, err
		}
		if err := xproto.CreateWindowChecked(x.c, 0, win, x.root, 0, 0, 1, 1, 0, xproto.WindowClassInputOutput, 0, 0, nil).Check(); err != nil {
			return false, fmt.Errorf("create window: %w", err)
		}
		pr.x, pr.win = x, win
	} else {
		ext, err := x.prop32(pr.win, "_NET_FRAME_EXTENTS", xproto.AtomCardinal, 4)
		if err != nil {
			return false, err
		}
		if len(ext) == 4 {
			return true, nil
		}
	}
	ev := xproto.ClientMessageEvent{Format: 32, Window: pr.win, Type: req, Data: xproto.ClientMessageDataUnionData32New(make([]uint32, 5))}
	if err := xproto.SendEventChecked(x.c, false, x.root, xproto.EventMaskSubstructureNotify|xproto.EventMaskSubstructureRedirect, string(ev.Bytes())).Check(); err != nil {
		return false, fmt.Errorf("request frame extents: %w", err)
	}
	return false, nil
}

// supported reports whether the window manager lists a in _NET_SUPPORTED.
func (x *xconn) supported(a xproto.Atom) (bool, error) {
	atoms, err := x.prop32(x.root, "_NET_SUPPORTED", xproto.AtomAtom, 4096)
	return slices.Contains(atoms, uint32(a)), err
}

// prop32 reads up to max values of w's 32-bit property name; none when it
// is unset or of another format.
func (x *xconn) prop32(w xproto.Window, name string, typ xproto.Atom, max uint32) ([]uint32, error) {
	prop, err := x.atom(name)
	if err != nil {
		return nil, err
	}
	r, err := xproto.GetProperty(x.c, false, w, prop, typ, 0, max).Reply()
	if err != nil || r.Format != 32 {
		return nil, err
	}
	out := make([]uint32, 0, r.ValueLen)
	for i := 0; i+4 <= len(r.Value); i += 4 {
		out = append(out, xgb.Get32(r.Value[i:]))
	}
	return out, nil
}

// windowProp reads a WINDOW-typed (32-bit) property's first value.
func (x *xconn) windowProp(w xproto.Window, prop xproto.Atom) (xproto.Window, bool) {
	r, err := xproto.GetProperty(x.c, false, w, prop, xproto.AtomAny, 0, 1).Reply()
	if err != nil || r.Format != 32 || r.ValueLen < 1 {
		return 0, false
	}
	return xproto.Window(xgb.Get32(r.Value)), true
}
