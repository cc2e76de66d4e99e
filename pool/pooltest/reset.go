package pooltest

import (
	"context"
	"fmt"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
)

// stateScript prints what an agent can see of a sandbox's state: every
// file under its home, workspace and /tmp with its type, mode and content
// hash (the live session's own files left out: X sockets and locks, its
// buses' directories, guestd's logs; each sandbox has its own), then the command names of its
// processes but the probe's own.
const stateScript = `cd / && n=${DISPLAY#:} && me=$(id -u) && for d in "$HOME" /workspace /tmp /dev/shm /dev/mqueue; do
  [ -d "$d" ] || continue
  find "$d" -xdev \( -path "/tmp/.X11-unix/X$n" -o -path "/tmp/.X$n-lock" \) -prune -o -printf '%y %m %p\n' | sort
  find "$d" -xdev \( -path "/tmp/.X11-unix/X$n" -o -path "/tmp/.X$n-lock" \) -prune -o -type f -print0 | sort -z | xargs -0r md5sum
done
command -v xprop >/dev/null && xprop -root _NET_NUMBER_OF_DESKTOPS _NET_CURRENT_DESKTOP _NET_DESKTOP_NAMES _NET_SHOWING_DESKTOP 2>&1
for t in shm sem msg; do [ -r /proc/sysvipc/$t ] && echo "sysv $t of the agent: $(awk -v me="$me" 'NR > 1 && ($8 == me || $10 == me || $5 == me || $7 == me)' /proc/sysvipc/$t | wc -l)"; done
echo PROCS
for p in /proc/[0-9]*; do [ "${p#/proc/}" = "$$" ] && continue; u=$(awk '/^Uid:/ {print $2}' "$p/status" 2>/dev/null); [ "$u" = "$me" ] && u=agent || u=other; echo "$(cat "$p/comm" 2>/dev/null) $u"; done | grep -v -e '^sh ' -e '^find ' -e '^sort ' -e '^xargs ' -e '^md5sum ' -e '^cat ' -e '^grep ' -e '^awk ' -e '^wc ' -e '^ ' | sort`

// procsScript lists every process as "pid starttime uid comm", the agent's
// uid written "agent": a process listed the same before and after a reset
// lived through it.
const procsScript = `me=$(id -u); for p in /proc/[0-9]*; do s=$(cut -d')' -f2- "$p/stat" 2>/dev/null | awk '{print $20}'); u=$(awk '/^Uid:/ {print $2}' "$p/status" 2>/dev/null); [ "$u" = "$me" ] && u=agent; [ -n "$s" ] && echo "${p#/proc/} $s $u $(cat "$p/comm" 2>/dev/null)"; done`

// sandboxState is stateScript's output, the windows (title and class,
// sorted) and the clipboard.
func sandboxState(t *testing.T, c *client.Client) (files, procs, windows, clip string) {
	t.Helper()
	out := MustSh(t, c, stateScript)
	files, procs, _ = strings.Cut(out, "PROCS")
	ws, err := c.ListWindows(ctxT(t))
	if err != nil {
		t.Fatalf("list_windows: %v", err)
	}
	var names []string
	for _, w := range ws.Windows {
		names = append(names, w.Title+"|"+w.Class)
	}
	sort.Strings(names)
	r, err := c.Act(ctxT(t), wire.ActArgs{Action: aci.Action{Verb: aci.ClipboardGet}})
	if err != nil {
		t.Fatalf("clipboard_get: %v", err)
	}
	return files, strings.TrimSpace(procs), strings.Join(names, "\n"), r.Clipboard
}

// settledFrame is a settled raw capture, as the first observation of an
// episode is taken.
func settledFrame(t *testing.T, c *client.Client) *wire.Shot {
	t.Helper()
	s, err := c.Screenshot(ctxT(t), wire.ObserveArgs{AfterInput: true,
		Observe: aci.Observe{Format: aci.FormatRaw, Settle: &aci.Settle{FirstMS: 200, QuietMS: 500, MaxMS: 8000}}})
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	return s
}

// stableFrame is a fresh replica's settled frame, the reference a reset
// sandbox is held to: settled captures are taken until two in a row agree,
// so that one taken while an app was still drawing (a loaded machine can
// stall a client past the quiet period) is not the reference.
func stableFrame(t *testing.T, c *client.Client) *wire.Shot {
	t.Helper()
	prev := settledFrame(t, c)
	for deadline := time.Now().Add(20 * time.Second); ; {
		cur := settledFrame(t, c)
		if cur.Hash == prev.Hash {
			return cur
		}
		if time.Now().After(deadline) {
			t.Fatalf("a fresh replica's screen did not stop changing: %s", frameDiff(prev, cur))
		}
		prev = cur
	}
}

// awaitFrame waits until a settled capture of c equals want. Only the
// timing of drawing may differ between a reset sandbox and a fresh one: a
// difference of state (a window unfocused, moved or left behind, a
// keyboard mapping drawn differently) never goes away, and is reported with
// where on the screen it is.
func awaitFrame(t *testing.T, c *client.Client, want *wire.Shot, what string) {
	t.Helper()
	var got *wire.Shot
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		prev := got
		if got = settledFrame(t, c); got.Hash == want.Hash {
			return
		}
		if prev == nil {
			t.Logf("%s: the first settled frame is not yet a fresh replica's (settle %+v): %s", what, got.Settle, frameDiff(want, got))
		}
	}
	t.Errorf("%s: settled frame %s, a fresh replica's %s: %s", what, got.Hash, want.Hash, frameDiff(want, got))
}

// frameDiff says where two raw frames differ: the bounding box of the
// differing pixels, how many there are, and the first one's colours.
func frameDiff(a, b *wire.Shot) string {
	if a.W != b.W || a.H != b.H || len(a.Data) != len(b.Data) || len(a.Data) != 3*a.W*a.H {
		return fmt.Sprintf("sizes %dx%d (%d bytes) and %dx%d (%d bytes)", a.W, a.H, len(a.Data), b.W, b.H, len(b.Data))
	}
	x0, y0, x1, y1, n, first := a.W, a.H, -1, -1, 0, ""
	for i := 0; i < len(a.Data); i += 3 {
		if a.Data[i] == b.Data[i] && a.Data[i+1] == b.Data[i+1] && a.Data[i+2] == b.Data[i+2] {
			continue
		}
		x, y := (i/3)%a.W, (i/3)/a.W
		if n == 0 {
			first = fmt.Sprintf("(%d,%d) %x vs %x", x, y, a.Data[i:i+3], b.Data[i:i+3])
		}
		n++
		x0, y0, x1, y1 = min(x0, x), min(y0, y), max(x1, x), max(y1, y)
	}
	if n == 0 {
		return "same pixels, different pointer or hash"
	}
	return fmt.Sprintf("%d pixels differ within x %d..%d, y %d..%d; first %s", n, x0, x1, y0, y1, first)
}

// awaitWindow waits until a window titled title is listed.
func awaitWindow(t *testing.T, c *client.Client, title string) {
	t.Helper()
	Eventually(t, 20*time.Second, "window "+title, func() bool {
		ws, err := c.ListWindows(ctxT(t))
		if err != nil {
			return false
		}
		for _, w := range ws.Windows {
			if w.Title == title {
				return true
			}
		}
		return false
	})
}

// testResetInPlace: a sandbox reset in place after an episode that wrote,
// modified and deleted files in its home and /tmp, left processes running
// (some stopped by a score's freeze), launched a window, took the
// clipboard, borrowed keycodes and moved the pointer is indistinguishable
// from a fresh replica of the same snapshot: files, processes, windows,
// clipboard and the pixels of the first settled frame.
func testResetInPlace(t *testing.T, p pool.Provider) {
	r, ok := p.(pool.Resetter)
	if !ok {
		t.Skipf("provider %s does not reset in place", p.Capabilities().Provider)
	}
	if _, err := exec.LookPath("xterm"); err != nil && p.Capabilities().Provider == "process" {
		t.Skip("xterm not installed")
	}
	s := p.(pool.Snapshotter)
	sb := Create(t, p)
	c := Dial(t, sb)
	MustSh(t, c, `echo keep > "$HOME/kept.txt" && echo gone > "$HOME/deleted.txt" && mkdir -p "$HOME/d" /tmp/t && echo tmp > /tmp/t/f`)
	if _, err := c.Act(ctxT(t), wire.ActArgs{Action: aci.Action{Verb: aci.LaunchApp, App: "xterm", Args: []string{"-title", "golden"}}}); err != nil {
		t.Fatalf("launch_app xterm: %v", err)
	}
	snap, err := s.Snapshot(ctxT(t), sb.ID)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	t.Cleanup(func() { _ = s.DeleteSnapshot(context.Background(), snap) })

	restore := func() (*pool.Sandbox, *client.Client) {
		sb, err := s.Restore(ctxT(t), snap, pool.Spec{})
		if err != nil {
			t.Fatalf("Restore: %v", err)
		}
		own(t, p, sb)
		c := Dial(t, sb)
		awaitWindow(t, c, "golden")
		return sb, c
	}
	_, fc := restore()
	want := stableFrame(t, fc)
	wantFiles, wantProcs, wantWindows, wantClip := sandboxState(t, fc)

	esb, ec := restore()
	// The episode.
	MustSh(t, ec, `touch /tmp/.X999-lock; echo changed > "$HOME/kept.txt" && rm "$HOME/deleted.txt" && echo new > "$HOME/d/new.txt" && rm -r /tmp/t && echo x > /tmp/agent.txt && mkdir -p /workspace/w && echo w > /workspace/w/f
		(setsid sleep 1000 </dev/null >/dev/null 2>&1 &) ; (sleep 999 </dev/null >/dev/null 2>&1 &)`)
	for _, a := range []aci.Action{
		{Verb: aci.LaunchApp, App: "xterm", Args: []string{"-title", "episode"}},
		{Verb: aci.ClipboardSet, Text: "secret"},
		{Verb: aci.TypeText, Text: "ẞ€"}, // borrows spare keycodes
		{Verb: aci.Move, Target: aci.Norm(0.1, 0.9)},
		{Verb: aci.MouseDown},
	} {
		if _, err := ec.Act(ctxT(t), wire.ActArgs{Action: a}); err != nil {
			t.Fatalf("episode %s: %v", a.Verb, err)
		}
	}
	// What outlives processes: POSIX shared memory and message queues,
	// System V IPC (ipcmk makes a segment, a semaphore set and a queue).
	MustSh(t, ec, `echo x > /dev/shm/agent; ipcmk -M 4096 -S 1 -Q >/dev/null
if [ -d /dev/mqueue ] && command -v python3 >/dev/null; then python3 -c 'import ctypes, os; r = ctypes.CDLL("librt.so.1", use_errno=True).mq_open(b"/agent", os.O_CREAT | os.O_RDWR, 0o600, None); assert r >= 0, ctypes.get_errno()'; fi`)
	// What the window manager keeps, which lives through resets: its
	// desktops, changed through the X server as any client may.
	if _, err := exec.LookPath("xdotool"); err == nil {
		MustSh(t, ec, `xdotool set_num_desktops 3 && xdotool set_desktop 2`)
	}
	before := MustSh(t, ec, procsScript)
	// The episode ends with a score: the agent's processes are frozen.
	if _, err := ec.Score(ctxT(t), wire.ScoreArgs{Shell: "true"}); err != nil {
		t.Fatalf("score: %v", err)
	}
	if err := r.ResetInPlace(ctxT(t), esb.ID, snap, ec); err != nil {
		t.Fatalf("ResetInPlace: %v", err)
	}
	// Nothing that ran as the agent lives through a reset, the desktop's
	// buses and window manager included: only processes the agent cannot
	// trace or signal (guestd, the X server) may.
	old := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(before), "\n") {
		if f := strings.Fields(l); len(f) >= 3 {
			old[f[0]+" "+f[1]] = true
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(MustSh(t, ec, procsScript)), "\n") {
		if f := strings.Fields(l); len(f) >= 3 && old[f[0]+" "+f[1]] && f[2] == "agent" {
			t.Errorf("a process of the agent's uid lived through the reset: %s", l)
		}
	}
	if h, err := ec.Health(ctxT(t)); err != nil || !h.X || !h.WM {
		t.Fatalf("health after reset = %+v, %v; want x and wm up", h, err)
	}
	awaitWindow(t, ec, "golden")
	awaitFrame(t, ec, want, "after reset")
	files, procs, windows, clip := sandboxState(t, ec)
	// The accessibility bus answers after the reset (its daemons live
	// through it where they run as the desktop's own uid, or start afresh).
	if ec.Welcome().A11y {
		shot, err := ec.Screenshot(ctxT(t), wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG, A11y: aci.A11yFull}})
		if err != nil || shot.A11y == nil || shot.A11y.Error != nil {
			t.Errorf("accessibility tree after reset: %+v, %v; want a tree (xterm exports none: no applications)", shotA11y(shot), err)
		}
	}
	if files != wantFiles {
		t.Errorf("files after reset:\n%s\nfresh replica:\n%s", files, wantFiles)
	}
	if procs != wantProcs {
		t.Errorf("processes after reset:\n%s\nfresh replica:\n%s", procs, wantProcs)
	}
	if windows != wantWindows {
		t.Errorf("windows after reset:\n%s\nfresh replica:\n%s", windows, wantWindows)
	}
	if clip != wantClip {
		t.Errorf("clipboard after reset %q; fresh replica %q", clip, wantClip)
	}
	// Reset again, with nothing changed: still the same.
	if err := r.ResetInPlace(ctxT(t), esb.ID, snap, ec); err != nil {
		t.Fatalf("second ResetInPlace: %v", err)
	}
	awaitWindow(t, ec, "golden")
	awaitFrame(t, ec, want, "after a second reset")
	// Typing still works with the restored keyboard mapping.
	MustSh(t, ec, `true`)
	if _, err := ec.Act(ctxT(t), wire.ActArgs{Action: aci.Action{Verb: aci.TypeText, Text: "ok€"}}); err != nil {
		t.Fatalf("type_text after reset: %v", err)
	}

	// An episode that races the reset's kill sweep: loops that fork as fast
	// as they can, children that leave their session, none frozen by a
	// score. Nothing of it may live on into the next episode: the reset
	// either ends every one of them or fails (and the pool retires the
	// sandbox).
	MustSh(t, ec, `for i in 1 2 3; do (while :; do sleep 1000 </dev/null >/dev/null 2>&1 & (setsid sh -c 'sleep 1000' </dev/null >/dev/null 2>&1 &) ; done) </dev/null >/dev/null 2>&1 & done; sleep 0.3`)
	if err := r.ResetInPlace(ctxT(t), esb.ID, snap, ec); err != nil {
		t.Logf("ResetInPlace after fork loops failed (the sandbox would be retired): %v", err)
		return
	}
	awaitWindow(t, ec, "golden")
	if _, procs, _, _ := sandboxState(t, ec); procs != wantProcs {
		t.Errorf("processes after resetting fork loops:\n%s\nfresh replica:\n%s", procs, wantProcs)
	}
}

// shotA11y is a shot's structured observation, for a message.
func shotA11y(s *wire.Shot) any {
	if s == nil || s.A11y == nil {
		return nil
	}
	return s.A11y.A11yInfo
}
