package guest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"golang.org/x/sys/unix"
)

// resetTimeout bounds the kill sweep and the wait for windows to go.
const resetTimeout = 5 * time.Second

// xBaseline is the X server's state as a fresh boot leaves it, recorded by
// Baseline before the agent can act; an in-place reset returns to it.
type xBaseline struct {
	minKC      xproto.Keycode
	per        byte
	syms       []xproto.Keysym
	mods       []xproto.Keycode // modifier mapping, 8 rows of perMod
	perMod     byte
	rootProps  map[xproto.Atom]bool
	pointer    [2]int
	focus      xproto.Window
	saverTO    int16
	saverIvl   int16
	saverBlank byte
	saverExp   byte
}

type resetState struct {
	mu   sync.Mutex
	base *xBaseline
}

// Baseline records the X server's state (keyboard and modifier mappings,
// root properties, pointer, focus, screen saver) for in-place resets. Call
// it once the desktop is up and before anything else acts on it.
func (s *Server) Baseline(ctx context.Context) error {
	var b xBaseline
	err := s.x.run(ctx, 0, func(x *xconn) error {
		st := xproto.Setup(x.c)
		n := byte(st.MaxKeycode - st.MinKeycode + 1)
		km, err := xproto.GetKeyboardMapping(x.c, st.MinKeycode, n).Reply()
		if err != nil {
			return err
		}
		b.minKC, b.per, b.syms = st.MinKeycode, km.KeysymsPerKeycode, km.Keysyms
		mm, err := xproto.GetModifierMapping(x.c).Reply()
		if err != nil {
			return err
		}
		b.mods, b.perMod = mm.Keycodes, mm.KeycodesPerModifier
		props, err := xproto.ListProperties(x.c, x.root).Reply()
		if err != nil {
			return err
		}
		b.rootProps = make(map[xproto.Atom]bool, len(props.Atoms))
		for _, a := range props.Atoms {
			b.rootProps[a] = true
		}
		p, err := x.pointer()
		if err != nil {
			return err
		}
		b.pointer = p
		f, err := xproto.GetInputFocus(x.c).Reply()
		if err != nil {
			return err
		}
		b.focus = f.Focus
		ss, err := xproto.GetScreenSaver(x.c).Reply()
		if err != nil {
			return err
		}
		b.saverTO, b.saverIvl, b.saverBlank, b.saverExp = int16(ss.Timeout), int16(ss.Interval), ss.PreferBlanking, ss.AllowExposures
		return nil
	})
	if err != nil {
		return fmt.Errorf("guest: baseline: %w", err)
	}
	s.reset.mu.Lock()
	s.reset.base = &b
	s.reset.mu.Unlock()
	return nil
}

// resetPhase is the reset method.
func (s *Server) resetPhase(ctx context.Context, a wire.ResetArgs) (*wire.ResetResult, error) {
	t0 := time.Now()
	s.reset.mu.Lock()
	base := s.reset.base
	s.reset.mu.Unlock()
	if base == nil {
		return nil, aci.Errorf(aci.CodeUnsupported, "reset: no X baseline was recorded at start")
	}
	// One reset (or verifier) at a time: the sweep must not race a score.
	s.score.Lock()
	defer s.score.Unlock()
	out := &wire.ResetResult{PhasesUS: map[string]int64{}}
	mark := time.Now()
	phase := func(name string) {
		out.PhasesUS[name] = time.Since(mark).Microseconds()
		mark = time.Now()
	}
	switch a.Phase {
	case wire.ResetClear:
		kctx, cancel := context.WithTimeout(ctx, resetTimeout)
		defer cancel()
		if err := s.cfg.AgentCgroups.Thaw(); err != nil {
			return nil, err
		}
		keep := s.exempt()
		if s.cfg.Keep != nil {
			for _, p := range s.cfg.Keep() {
				keep[p] = true
				// The scoring freeze stopped the window manager.
				_ = unix.Kill(p, unix.SIGCONT)
			}
		}
		n, err := killSweep(kctx, keep)
		out.Killed = n
		if err != nil {
			return nil, err
		}
		phase("kill")
		if err := clearIPC(); err != nil {
			return nil, err
		}
		phase("ipc")
		s.x.clipMu.Lock()
		s.x.clipText = ""
		s.x.clipMu.Unlock()
		if err := s.x.run(kctx, resetTimeout, func(x *xconn) error { return x.resetX(base) }); err != nil {
			return nil, err
		}
		phase("x")
		s.apps.mu.Lock()
		s.apps.list = nil
		s.apps.mu.Unlock()
	case wire.ResetStart:
		apps, err := ReadApps(s.cfg.StateDir)
		if err != nil {
			return nil, err
		}
		// The killed clients' windows went away while the host restored
		// the files; then the window manager, which may have loaded a
		// configuration the episode wrote (openbox runs commands bound to
		// keys), reads the restored one before anything else runs.
		wctx, cancel := context.WithTimeout(ctx, resetTimeout)
		defer cancel()
		if err := s.x.run(wctx, resetTimeout, func(x *xconn) error {
			if err := x.awaitNoClients(wctx); err != nil {
				return err
			}
			phase("windows")
			return x.reconfigureWM()
		}); err != nil {
			return nil, err
		}
		if err := s.Relaunch(ctx); err != nil {
			return nil, err
		}
		out.Launched = len(apps)
		phase("relaunch")
	default:
		return nil, aci.Errorf(aci.CodeBadRequest, "reset: phase %q: want %q or %q", a.Phase, wire.ResetClear, wire.ResetStart)
	}
	out.TookUS = time.Since(t0).Microseconds()
	return out, nil
}

// killSweep SIGKILLs every process but the kept ones (as PID 1: the whole
// pid namespace; elsewhere: this process's descendants), repeating until a
// pass finds none alive, then waits until they are gone. It returns how
// many it killed.
func killSweep(ctx context.Context, keep map[int]bool) (int, error) {
	self := os.Getpid()
	whole := self == 1
	type key struct {
		pid   int
		start uint64
	}
	killed := map[key]bool{}
	for {
		procs := listProcs()
		var parent map[int]int
		if !whole {
			parent = make(map[int]int, len(procs))
			for _, p := range procs {
				parent[p.pid] = p.ppid
			}
		}
		live := 0
		for _, p := range procs {
			if keep[p.pid] || p.state == 'Z' || p.state == 'X' {
				continue
			}
			if !whole && !descends(p.pid, self, parent) {
				continue
			}
			if !killed[key{p.pid, p.start}] {
				killed[key{p.pid, p.start}] = true
			}
			if unix.Kill(p.pid, unix.SIGKILL) == nil {
				live++
			}
		}
		if live == 0 {
			break
		}
		if ctx.Err() != nil {
			return len(killed), aci.Errorf(aci.CodeTimeout, "reset: processes kept running for %v", resetTimeout)
		}
		time.Sleep(200 * time.Microsecond)
	}
	// Wait for every killed process to be reaped (its pid gone).
	for k := range killed {
		for {
			st, ok := readStat(k.pid)
			if !ok || st.start != k.start {
				break
			}
			if ctx.Err() != nil {
				return len(killed), aci.Errorf(aci.CodeTimeout, "reset: pid %d was not reaped", k.pid)
			}
			time.Sleep(200 * time.Microsecond)
		}
	}
	return len(killed), nil
}

// clearIPC empties /dev/shm and removes every System V shared memory
// segment, semaphore set and message queue of the sandbox's IPC namespace
// (nothing that survives a reset uses them: guestd's own capture segment is
// marked for removal at creation). It is a no-op outside a sandbox (not PID 1).
func clearIPC() error {
	if os.Getpid() != 1 {
		return nil
	}
	ents, _ := os.ReadDir("/dev/shm")
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join("/dev/shm", e.Name())); err != nil {
			return fmt.Errorf("reset: /dev/shm: %w", err)
		}
	}
	for _, f := range []struct {
		path string
		rm   func(id int) error
	}{
		{"/proc/sysvipc/shm", func(id int) error { _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); return err }},
		{"/proc/sysvipc/sem", func(id int) error {
			_, _, e := unix.Syscall6(unix.SYS_SEMCTL, uintptr(id), 0, unix.IPC_RMID, 0, 0, 0)
			if e != 0 {
				return e
			}
			return nil
		}},
		{"/proc/sysvipc/msg", func(id int) error {
			_, _, e := unix.Syscall(unix.SYS_MSGCTL, uintptr(id), unix.IPC_RMID, 0)
			if e != 0 {
				return e
			}
			return nil
		}},
	} {
		b, err := os.ReadFile(f.path)
		if err != nil {
			continue
		}
		lines := bytes.Split(b, []byte("\n"))
		for _, ln := range lines[1:] {
			fs := strings.Fields(string(ln))
			if len(fs) < 2 {
				continue
			}
			id, err := strconv.Atoi(fs[1])
			if err != nil {
				continue
			}
			if f.path == "/proc/sysvipc/shm" && len(fs) > 2 {
				// Already marked for removal (mode bit 01000 SHM_DEST): it
				// goes with its last user.
				if mode, err := strconv.ParseInt(fs[2], 10, 64); err == nil && mode&0o1000 != 0 {
					continue
				}
			}
			if err := f.rm(id); err != nil && err != unix.EINVAL && err != unix.EIDRM {
				return fmt.Errorf("reset: remove %s id %d: %w", filepath.Base(f.path), id, err)
			}
		}
	}
	return nil
}

// resetX returns the X server's state to b: held buttons and keys
// released, mappings restored, the clipboard given up, the root's
// background, cursor and new properties dropped, the screen saver reset,
// the pointer and focus put back.
func (x *xconn) resetX(b *xBaseline) error {
	// Release whatever the episode left pressed.
	if qp, err := xproto.QueryPointer(x.c, x.root).Reply(); err == nil {
		for btn := byte(1); btn <= 5; btn++ {
			if qp.Mask&(xproto.ButtonMask1<<(btn-1)) != 0 {
				x.button(btn, false)
			}
		}
	}
	if km, err := xproto.QueryKeymap(x.c).Reply(); err == nil {
		for i, bits := range km.Keys {
			for j := 0; j < 8; j++ {
				if bits&(1<<j) != 0 {
					x.key(xproto.Keycode(i*8+j), false)
				}
			}
		}
	}
	// Keyboard and modifier mappings as at start (typing borrows spare
	// keycodes; the agent may have run xmodmap).
	st := xproto.Setup(x.c)
	n := byte(st.MaxKeycode - st.MinKeycode + 1)
	km, err := xproto.GetKeyboardMapping(x.c, st.MinKeycode, n).Reply()
	if err != nil {
		return err
	}
	if km.KeysymsPerKeycode != b.per || !equalSyms(km.Keysyms, b.syms) {
		if err := xproto.ChangeKeyboardMappingChecked(x.c, n, b.minKC, b.per, b.syms).Check(); err != nil {
			return fmt.Errorf("restore keyboard mapping: %w", err)
		}
	}
	x.keys = nil
	mm, err := xproto.GetModifierMapping(x.c).Reply()
	if err != nil {
		return err
	}
	if mm.KeycodesPerModifier != b.perMod || !bytes.Equal(kcBytes(mm.Keycodes), kcBytes(b.mods)) {
		if _, err := xproto.SetModifierMapping(x.c, b.perMod, b.mods).Reply(); err != nil {
			return fmt.Errorf("restore modifier mapping: %w", err)
		}
	}
	// The clipboard: give up guestd's ownership; the other owners were the
	// episode's clients, whose selections ended with them.
	if x.owned.Load() {
		if clip, err := x.atom("CLIPBOARD"); err == nil {
			xproto.SetSelectionOwner(x.c, xproto.AtomNone, clip, xproto.TimeCurrentTime)
		}
		x.owned.Store(false)
	}
	// The root: default background and cursor (None restores them), and
	// no property the episode added (xrdb's RESOURCE_MANAGER, cut buffers,
	// xsetroot's ids). The window manager's own _NET_/_OB_ properties stay.
	xproto.ChangeWindowAttributes(x.c, x.root, xproto.CwBackPixmap|xproto.CwCursor, []uint32{xproto.BackPixmapNone, xproto.CursorNone})
	xproto.ClearArea(x.c, false, x.root, 0, 0, 0, 0)
	if props, err := xproto.ListProperties(x.c, x.root).Reply(); err == nil {
		for _, a := range props.Atoms {
			if b.rootProps[a] || uint32(a) == x.barrierAtom.Load() {
				continue
			}
			name, err := xproto.GetAtomName(x.c, a).Reply()
			if err != nil {
				return err
			}
			if strings.HasPrefix(name.Name, "_NET_") || strings.HasPrefix(name.Name, "_OB_") {
				continue
			}
			xproto.DeleteProperty(x.c, x.root, a)
		}
	}
	xproto.SetScreenSaver(x.c, b.saverTO, b.saverIvl, b.saverBlank, b.saverExp)
	xproto.ForceScreenSaver(x.c, xproto.ScreenSaverReset)
	x.motion(b.pointer[0], b.pointer[1])
	focus := b.focus
	if focus > xproto.InputFocusPointerRoot {
		if _, err := xproto.GetWindowAttributes(x.c, focus).Reply(); err != nil {
			focus = xproto.InputFocusPointerRoot
		}
	}
	xproto.SetInputFocus(x.c, xproto.InputFocusPointerRoot, focus, xproto.TimeCurrentTime)
	if err := x.sync(); err != nil {
		return err
	}
	x.d.last = lastCapture{}
	return nil
}

// awaitNoClients waits until the window manager lists no client window:
// the killed clients' windows go once the server sees their connections
// close, and the window manager then drops them from its list.
func (x *xconn) awaitNoClients(ctx context.Context) error {
	for {
		wake := x.windowsChan()
		list, _ := x.clientList()
		if len(list) == 0 {
			break
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return aci.Errorf(aci.CodeTimeout, "reset: %d client window(s) still listed", len(list))
		}
		t.Stop()
	}
	return nil
}

func equalSyms(a, b []xproto.Keysym) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func kcBytes(k []xproto.Keycode) []byte {
	out := make([]byte, len(k))
	for i, v := range k {
		out[i] = byte(v)
	}
	return out
}

// reconfigureWM asks the window manager to reload its configuration
// (openbox's _OB_CONTROL reconfigure; other window managers ignore it).
func (x *xconn) reconfigureWM() error {
	ctl, err := x.atom("_OB_CONTROL")
	if err != nil {
		return err
	}
	ev := xproto.ClientMessageEvent{Format: 32, Window: x.root, Type: ctl,
		Data: xproto.ClientMessageDataUnionData32New([]uint32{1, 0, 0, 0, 0})}
	xproto.SendEvent(x.c, false, x.root, xproto.EventMaskSubstructureRedirect|xproto.EventMaskSubstructureNotify, string(ev.Bytes()))
	return x.sync()
}
