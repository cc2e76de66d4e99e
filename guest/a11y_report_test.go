package guest_test

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// visibleControls are, per shipped app and state, the clickable controls a
// person sees on its screenshot (menus, buttons, fields, items), named as
// they read on screen; the coverage report checks each against the tree.
var visibleControls = []struct {
	app, state string
	open       string // a menu opened first ("" for none)
	names      []string
}{
	{"galculator", "start", "", []string{"File", "Edit", "View", "Calculator", "Help",
		"<-", "C", "AC", "%", "sqrt", "=", "(", ")", "MS", "MR", "M+", "*", "+/-", "+", "-", "/", ".",
		"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "display"}},
	{"mousepad", "File menu open", "File", []string{"File", "Edit", "Search", "View", "Document", "Help", "text area",
		"New", "New Window", "New From Template", "Open...", "Open Recent", "Save", "Save As...", "Save All", "Revert",
		"Print...", "Detach Tab", "Close Tab", "Close Window", "Quit"}},
	{"pcmanfm", "home folder", "", []string{"File", "Edit", "View", "Bookmarks", "Go", "Tools", "Help",
		"New Tab", "Previous Folder", "History", "Next Folder", "Parent Folder", "Home Folder", "location", "Jump to",
		"Places", "Home Folder (places)", "docs", "downloads", "data.csv", "notes.txt"}},
}

// usable finds the element standing for a visible control: one with its
// name (the editable text for a field) and a non-empty box whose centre is
// on the app's window.
func usable(tr *aci.A11yTree, name string) (aci.Element, bool) {
	var frame aci.Rect
	for _, e := range tr.Elements {
		if e.Depth == 0 && (e.Role == "frame" || e.Role == "dialog") && slices.Contains(e.States, "active") {
			frame = e.Box
		}
	}
	in := func(b aci.Rect) bool {
		cx, cy := b.X+b.W/2, b.Y+b.H/2
		return b.W > 0 && b.H > 0 && cx >= frame.X && cy >= frame.Y && cx < frame.X+frame.W && cy < frame.Y+frame.H
	}
	skip := 0
	switch name {
	case "display", "text area", "location":
		for _, e := range tr.Elements {
			if e.Role == "text" && in(e.Box) {
				return e, true
			}
		}
		return aci.Element{}, false
	case "Home Folder (places)":
		name, skip = "Home Folder", 1
	}
	for _, e := range tr.Elements {
		if e.Name == name && in(e.Box) {
			if skip > 0 {
				skip--
				continue
			}
			return e, true
		}
	}
	return aci.Element{}, false
}

// TestA11yCoverage is the coverage report: of the clickable controls
// visible on the shipped apps, the share that have an accessibility node
// with their name and a usable on-screen box (target: 85% or more), and
// which do not.
func TestA11yCoverage(t *testing.T) {
	d := a11yDesk(t)
	var total, ok int
	var report strings.Builder
	for _, c := range visibleControls {
		launch(t, d, c.app)
		tr := tree(t, d, aci.A11yFull)
		if c.open != "" {
			actSettled(t, d, aci.Action{Verb: aci.Click, Target: aci.Ref(mustFind(t, tr, "menu", c.open).ID)})
			tr = tree(t, d, aci.A11yFull)
		}
		var missing []string
		for _, n := range c.names {
			if _, found := usable(tr, n); found {
				ok++
			} else {
				missing = append(missing, n)
			}
		}
		total += len(c.names)
		fmt.Fprintf(&report, "%-10s %-16s %2d/%2d usable; without a usable node: %s\n", c.app, c.state,
			len(c.names)-len(missing), len(c.names), strings.Join(missing, ", "))
		act(t, d, aci.Action{Verb: aci.Key, Keys: "Escape"})
		act(t, d, aci.Action{Verb: aci.Key, Keys: "ctrl+q"})
	}
	share := float64(ok) / float64(total)
	t.Logf("a11y coverage of visible clickable controls:\n%sall: %d/%d = %.0f%%", report.String(), ok, total, 100*share)
	if share < 0.85 {
		t.Errorf("coverage %.0f%%; want at least 85%%", 100*share)
	}
}

// wordRE approximates a BPE tokenizer's pieces on English UI text: a word,
// a number or one punctuation mark each.
var wordRE = regexp.MustCompile(`[A-Za-z]+|[0-9]+|[^\sA-Za-z0-9]`)

// vlmImageTokens is what a 1280x800 frame costs a typical VLM: Qwen2-VL
// rounds each side to a multiple of 28 and spends one token per 28x28 patch
// (46 x 29).
const vlmImageTokens = 46 * 29

// BenchmarkA11yObservation measures, on one desktop state per app
// (mousepad with its File menu open, a tree-rich screen; galculator's
// keypad), a png capture, a tree observation and a diff observation of the
// unchanged state (the frame answered not_modified, so the tree dominates):
// latency per op, and bytes and tokens per step.
func BenchmarkA11yObservation(b *testing.B) {
	for _, st := range []struct{ app, open string }{{"mousepad", "File"}, {"galculator", ""}} {
		b.Run(st.app, func(b *testing.B) {
			d := a11yDesk(b)
			launch(b, d, st.app)
			if st.open != "" {
				tr := tree(b, d, aci.A11yFull)
				actSettled(b, d, aci.Action{Verb: aci.Click, Target: aci.Ref(mustFind(b, tr, "menu", st.open).ID)})
			}
			base, err := d.cl.Screenshot(ctxT(b), wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG, A11y: aci.A11yFull}})
			if err != nil || base.A11y == nil || base.A11y.Error != nil {
				b.Fatalf("observe: %v %+v", err, base.A11y)
			}
			for _, mode := range []string{"png", aci.A11yFull, aci.A11yDiff} {
				b.Run(mode, func(b *testing.B) { benchObserve(b, d, base.Hash, mode) })
			}
		})
	}
}

func benchObserve(b *testing.B, d *desk, hash, mode string) {
	args := wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatPNG}}
	if mode != "png" {
		args.A11y, args.IfNoneMatch = mode, []string{hash}
	}
	var bytes, tokens int
	for i := 0; i < b.N; i++ {
		shot, err := d.cl.Screenshot(ctxT(b), args)
		if err != nil {
			b.Fatal(err)
		}
		if mode == "png" {
			bytes = len(shot.Data)
			continue
		}
		if shot.A11y == nil || shot.A11y.Error != nil {
			b.Fatalf("tree: %+v", shot.A11y)
		}
		els, _ := msgpack.Marshal(shot.A11y.Elements)
		bytes = len(shot.A11y.Text) + len(els)
		tokens = len(wordRE.FindAllString(shot.A11y.Text, -1))
		if mode == aci.A11yFull {
			b.ReportMetric(float64(len(shot.A11y.Text)), "text_bytes/op")
			b.ReportMetric(float64(shot.A11y.Nodes), "nodes/op")
		}
	}
	b.ReportMetric(float64(bytes), "wire_bytes/op")
	if mode == "png" {
		b.ReportMetric(vlmImageTokens, "tokens/op")
		return
	}
	b.ReportMetric(float64(tokens), "tokens/op")
	b.ReportMetric(math.Round(10*vlmImageTokens/float64(max(tokens, 1)))/10, "x_fewer_tokens_than_frame")
}
