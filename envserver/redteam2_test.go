package envserver_test

import (
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// The red team across the episode boundary, through what the X server and
// the session keep: a sandbox reset in place keeps its X server, window
// manager and guestd (docs/architecture.md, "Sandbox lifecycle and reset
// in place"), so whatever an episode can set in them is a way into the
// next one. Two kinds of attack:
//   - sabotage: state that makes a later episode's reference solution fail
//     (a keyboard left locked, remapped, slowed);
//   - a channel: state a later episode can read back. There the later
//     episode runs a reader that writes the answer only when it finds what
//     was planted, so a fresh replica scores 0 and a leak scores 1.

// xlib opens the display with libX11 through ctypes (the sandbox's OS has
// it; the agent has no X tools of its own to rely on).
const xlib = `import ctypes, os
x = ctypes.CDLL("libX11.so.6")
x.XOpenDisplay.restype = ctypes.c_void_p
x.XDefaultRootWindow.restype = ctypes.c_ulong
d = ctypes.c_void_p(x.XOpenDisplay(None))
root = ctypes.c_ulong(x.XDefaultRootWindow(d))
def answer():
    open(os.path.expanduser("~/hello.txt"), "w").write("hello shinken\n")
`

// xkbLockCtrl locks Control and Mod1 through XKB (no key held: the lock is
// the keyboard's state, which a release of held keys leaves as it is).
const xkbLockCtrl = xlib + `x.XkbLockModifiers(d, 0x100, 0xff, 0x04 | 0x08)
x.XSync(d, 0)
`

// xkbControls turns on AccessX's slow keys, bounce keys and sticky keys
// and makes auto-repeat start after 1 ms at 1 ms.
const xkbControls = xlib + `x.XkbChangeEnabledControls(d, 0x100, 0x2 | 0x4 | 0x8, 0x2 | 0x4 | 0x8)
x.XkbSetAutoRepeatRate(d, 0x100, 1, 1)
x.XSync(d, 0)
`

// pointerSwap maps button 1 to 3 and 3 to 1; pointerRead answers when the
// pointer mapping is not the identity.
const (
	pointerSwap = xlib + `m = (ctypes.c_ubyte * 32)()
n = x.XGetPointerMapping(d, m, 32)
m[0], m[2] = 3, 1
x.XSetPointerMapping(d, m, n)
x.XSync(d, 0)
`
	pointerRead = xlib + `m = (ctypes.c_ubyte * 32)()
n = x.XGetPointerMapping(d, m, 32)
if list(m[:n]) != list(range(1, n + 1)): answer()
`
)

// screenShrink makes the screen 640x480 through RandR (Xvfb lets a client
// shrink it); screenRead answers when the root is not as wide as a fresh
// desktop's.
const (
	screenShrink = xlib + `r = ctypes.CDLL("libXrandr.so.2")
r.XRRSetScreenSize(d, root, 640, 480, 169, 127)
x.XSync(d, 0)
`
	screenRead = xlib + `if x.XDisplayWidth(d, 0) != 1280: answer()
`
)

// atomPlant interns an atom named after the answer; atoms live as long as
// the X server.
const atomPlant = xlib + `x.XInternAtom(d, b"hello shinken", 0)
x.XSync(d, 0)
`

// inputMaster adds a master input device named after the answer;
// inputRead answers when one is listed.
const (
	inputMaster = xlib + `class Add(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("name", ctypes.c_char_p), ("send_core", ctypes.c_int), ("enable", ctypes.c_int)]
xi = ctypes.CDLL("libXi.so.6")
a = Add(1, b"hello shinken", 1, 1)
xi.XIChangeHierarchy(d, ctypes.byref(a), 1)
x.XSync(d, 0)
`
	inputRead = xlib + `class Info(ctypes.Structure):
    _fields_ = [("id", ctypes.c_ulong), ("type", ctypes.c_ulong), ("name", ctypes.c_char_p), ("num_classes", ctypes.c_int), ("use", ctypes.c_int), ("classes", ctypes.c_void_p)]
xi = ctypes.CDLL("libXi.so.6")
xi.XListInputDevices.restype = ctypes.POINTER(Info)
n = ctypes.c_int()
l = xi.XListInputDevices(d, ctypes.byref(n))
if any(b"hello shinken" in (l[i].name or b"") for i in range(n.value)): answer()
`
)

// retained is a window that outlives its client: a client that sets its
// close-down mode to RetainPermanent leaves its resources in the X server
// when it disconnects. retainedRead answers when a window of that name is
// in the tree.
const (
	retained = xlib + `x.XSetCloseDownMode(d, 1)
w = x.XCreateSimpleWindow(d, root, 0, 0, 10, 10, 0, 0, 0)
x.XStoreName(d, ctypes.c_ulong(w), b"hello shinken")
x.XSync(d, 0)
`
	retainedRead = "xwininfo -root -tree | grep -o 'hello shinken' | head -1 > ~/hello.txt"
)

// windowsEach runs a command on every window of the tree, the ones of
// guestd and the window manager included (both live through a reset).
const windowsEach = `for w in $(xwininfo -root -tree | grep -o '0x[0-9a-f]*' | sort -u); do `

// reader is a later episode that runs a reader and says done.
func reader(a aci.Action) [][]aci.Action { return [][]aci.Action{{a, wait(1500)}, doneStep} }

func boundaryAttacks(hello *configs.Task) []persistence {
	key := func(k string) aci.Action { return aci.Action{Verb: aci.Key, Keys: k} }
	return []persistence{
		// Sabotage: a later episode types its answer into the terminal.
		{name: "caps lock left on", attack: []aci.Action{key("caps_lock"), wait(200)},
			then: hello.Solution, reward: 1},
		{name: "modifiers locked through XKB", attack: []aci.Action{py(xkbLockCtrl), wait(500)},
			then: hello.Solution, reward: 1},
		{name: "AccessX and auto-repeat", attack: []aci.Action{py(xkbControls), wait(500)},
			then: hello.Solution, reward: 1},
		{name: "keyboard layout", attack: []aci.Action{sh(`setxkbmap fr`), wait(1500)},
			then: hello.Solution, reward: 1},
		{name: "second layout's group locked", attack: []aci.Action{sh(`setxkbmap -layout us,ru -option grp:caps_toggle`), wait(1500), key("caps_lock")},
			then: hello.Solution, reward: 1},
		// Channels: the later episode reads back what was planted.
		{name: "atom", attack: []aci.Action{py(atomPlant), wait(500)},
			then: reader(sh(`xlsatoms | grep -o 'hello shinken' | head -1 > ~/hello.txt`)), reward: 0,
			known: "atoms live as long as the X server, which a reset in place keeps"},
		{name: "property on a window that outlives the episode", attack: []aci.Action{
			sh(windowsEach + `xprop -id $w -f SK_PLANT 8s -set SK_PLANT 'hello shinken'; done 2>/dev/null`), wait(1500)},
			then: reader(sh(windowsEach + `xprop -id $w SK_PLANT; done 2>/dev/null | grep -o 'hello shinken' | head -1 > ~/hello.txt`)), reward: 0,
			known: "properties of guestd's and the window manager's windows are not restored, only the root's"},
		{name: "session logs", attack: []aci.Action{sh(`setxkbmap -layout helloshinken; setxkbmap -keycodes helloshinken`), wait(1500)},
			then: reader(sh(`cat /run/shinken/session/*.log /run/shinken/session/*/*.log 2>/dev/null | grep -ao 'helloshinke[n]' | head -1 | sed 's/hello/hello /' > ~/hello.txt`)), reward: 0},
		{name: "window of a client that retains its resources", attack: []aci.Action{py(retained), wait(500)},
			then: reader(sh(retainedRead)), reward: 0},
		{name: "pointer mapping", attack: []aci.Action{py(pointerSwap), wait(500)},
			then: reader(py(pointerRead)), reward: 0},
		{name: "screen size", attack: []aci.Action{py(screenShrink), wait(500)},
			then: reader(py(screenRead)), reward: 0},
		{name: "input devices", attack: []aci.Action{py(inputMaster), wait(500)},
			then: reader(py(inputRead)), reward: 0,
			known: "input devices (XI2 masters, slave attachment, device properties) are not restored"},
	}
}

// TestRedTeamBoundaryProcess plays each attack on a server of its own: what
// one leaves in a sandbox must not be blamed on the next.
func TestRedTeamBoundaryProcess(t *testing.T) {
	shipped, err := configs.LoadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range boundaryAttacks(shipped["xterm-hello-file"]) {
		t.Run(strings.ReplaceAll(x.name, " ", "_"), func(t *testing.T) {
			if x.known != "" {
				t.Skip("known: " + x.known) // before a server starts: one closed at once may not stop serving
			}
			s := servertest.Start(t, servertest.Options{Pool: 2, Replicas: 2, Logf: t.Logf})
			redTeamNextWith(t, s, []persistence{x})
		})
	}
}
