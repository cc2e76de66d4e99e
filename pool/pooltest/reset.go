package pooltest

import (
	"context"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
)

// testResetInPlace proves that a sandbox reset in place to a snapshot is
// indistinguishable from one freshly restored from it: the same files, the
// same processes, the same windows, the same clipboard, the same pixels,
// whatever the episode did before (files everywhere, background processes,
// extra apps, the clipboard, a borrowed keycode, a held button, a moved
// pointer).
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
	MustSh(t, c, `echo golden > "$HOME/golden.txt" && mkdir -p /home/workspace/w && echo ws > /home/workspace/w/f.txt`)
	act(t, c, aci.Action{Verb: aci.LaunchApp, App: "xterm", Args: []string{"-title", "golden"}})
	snap, err := s.Snapshot(ctxT(t), sb.ID)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	t.Cleanup(func() { _ = s.DeleteSnapshot(context.Background(), snap) })

	// The episode: dirty everything a reset must undo.
	MustSh(t, c, `echo dirt > "$HOME/dirt.txt"; echo changed > "$HOME/golden.txt"; rm -rf /home/workspace/w; echo t > /tmp/dirt;
		mkdir -p "$HOME/locked/in" && chmod 000 "$HOME/locked"; (sleep 600 &) ; (setsid sleep 601 &) ; echo shm > /dev/shm/dirt 2>/dev/null; true`)
	act(t, c, aci.Action{Verb: aci.LaunchApp, App: "xterm", Args: []string{"-title", "dirt"}})
	act(t, c, aci.Action{Verb: aci.ClipboardSet, Text: "episode secret"})
	act(t, c, aci.Action{Verb: aci.TypeText, Text: "€ü"})
	act(t, c, aci.Action{Verb: aci.MouseDown, X: ptr(300), Y: ptr(300)})
	act(t, c, aci.Action{Verb: aci.Move, X: ptr(17), Y: ptr(23)})

	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	t0 := time.Now()
	if err := r.ResetInPlace(ctx, sb.ID, snap); err != nil {
		t.Fatalf("ResetInPlace: %v", err)
	}
	t.Logf("reset in place took %v", time.Since(t0))
	ref := forkN(t, p, s, snap, 1)[0]
	rc := Dial(t, ref)
	// A fresh guest connection, as the pool makes one after a reset.
	c2 := Dial(t, sb)

	files := `find "$HOME" /home/workspace /tmp -xdev \( -name '*.log' -o -name .X11-unix -o -name '.X*-lock' \) -prune -o -printf '%p %m %s\n' 2>&1 | sort; ls -A /dev/shm`
	// Relaunched apps write their own files as they come up: compare
	// once both have settled.
	var got, want string
	ok = false
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
		if got, want = MustSh(t, c2, files), MustSh(t, rc, files); got == want {
			ok = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !ok {
		t.Errorf("files after reset in place:\n%s\nwant (fresh restore):\n%s", got, want)
	}
	if got := MustSh(t, c2, `cat "$HOME/golden.txt" /home/workspace/w/f.txt`); got != "golden\nws" {
		t.Errorf("restored file contents = %q; want %q", got, "golden\nws")
	}
	procs := `ps -eo comm= | grep -v -x -e ps -e sh -e sort | sort`
	Eventually(t, 20*time.Second, "the same processes as a fresh restore", func() bool {
		return MustSh(t, c2, procs) == MustSh(t, rc, procs)
	})
	windows := func(c *client.Client) string {
		ws, err := c.ListWindows(ctxT(t))
		if err != nil {
			return "error: " + err.Error()
		}
		var out []string
		for _, w := range ws.Windows {
			out = append(out, w.Class+"|"+w.Title+"|"+rectString(w.Geometry)+"|"+boolString(w.Focused))
		}
		sort.Strings(out)
		return strings.Join(out, "\n")
	}
	Eventually(t, 20*time.Second, "the same windows as a fresh restore", func() bool {
		return windows(c2) == windows(rc) && strings.Contains(windows(rc), "golden")
	})
	clip := func(c *client.Client) string {
		r, err := c.Act(ctxT(t), wire.ActArgs{Action: aci.Action{Verb: aci.ClipboardGet}})
		if err != nil {
			return "error: " + string(aci.CodeOf(err))
		}
		return "text: " + r.Clipboard
	}
	if got, want := clip(c2), clip(rc); got != want {
		t.Errorf("clipboard after reset in place = %q; want %q (fresh restore)", got, want)
	}
	shot := func(c *client.Client) (string, [2]int) {
		s, err := c.Screenshot(ctxT(t), wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw}, AfterInput: true})
		if err != nil {
			return "error: " + err.Error(), [2]int{}
		}
		return s.Hash, s.Pointer
	}
	var last string
	Eventually(t, 20*time.Second, "the same pixels and pointer as a fresh restore", func() bool {
		h1, p1 := shot(c2)
		h2, p2 := shot(rc)
		last = h1 + " " + h2
		return h1 == h2 && p1 == p2
	})
	_ = last
	// Typing still works on the restored keyboard mapping.
	act(t, c2, aci.Action{Verb: aci.TypeText, Text: "ü"})

	// A second episode rewrites a file in place at the same size and sets
	// its times back, and swaps a directory for a file: the next reset
	// must still restore them.
	MustSh(t, c2, `f="$HOME/golden.txt"; t=$(stat -c %Y "$f"); printf 'GOLDEN\n' > "$f"; touch -d "@$t" "$f";
		rm -rf /home/workspace/w && echo x > /home/workspace/w`)
	if err := r.ResetInPlace(ctx, sb.ID, snap); err != nil {
		t.Fatalf("second ResetInPlace: %v", err)
	}
	c3 := Dial(t, sb)
	if got := MustSh(t, c3, `cat "$HOME/golden.txt" /home/workspace/w/f.txt`); got != "golden\nws" {
		t.Errorf("after a second reset: contents = %q; want %q", got, "golden\nws")
	}
}

func act(t *testing.T, c *client.Client, a aci.Action) *wire.ActResult {
	t.Helper()
	r, err := c.Act(ctxT(t), wire.ActArgs{Action: a})
	if err != nil {
		t.Fatalf("%s: %v", a.Verb, err)
	}
	return r
}

func ptr(v float64) *float64 { return &v }

func rectString(r aci.Rect) string {
	return strings.Join([]string{itoa(r.X), itoa(r.Y), itoa(r.W), itoa(r.H)}, ",")
}

func itoa(n int) string { return strconv.Itoa(n) }

func boolString(b bool) string {
	if b {
		return "focused"
	}
	return "-"
}
