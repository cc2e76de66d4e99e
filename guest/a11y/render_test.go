package a11y

import (
	"strings"
	"testing"

	"github.com/godbus/dbus/v5"
)

func nodeOf(path string, parent int, role, name string, states ...int) *node {
	n := &node{ref: objRef{Bus: ":1.5", Path: dbus.ObjectPath("/org/a11y/atspi/accessible/" + path)}, parent: parent, role: role, name: name}
	n.states = 1<<stShowing | 1<<stSensitive | 1<<stEnabled
	for _, s := range states {
		n.states |= 1 << s
	}
	return n
}

// TestRenderIDsAndDiff: ids follow identity, not content; lines nest under
// their parent; a diff lists changed, added and removed elements within its
// budget and gives up past it.
func TestRenderIDsAndDiff(t *testing.T) {
	t0 := newIDs()
	nodes := []*node{
		nodeOf("1", -1, "frame", "Editor", stActive),
		nodeOf("2", 0, "filler", ""), // folded away
		nodeOf("3", 1, "push button", "Save"),
		nodeOf("4", 1, "text", "", stFocused, stEditable),
	}
	a := render(t0, "editor", nodes, "")
	want := "app: \"editor\" | window: \"Editor\"\ne1 frame \"Editor\" (active)\n  e2 push button \"Save\"\n  e3 text (focused, editable)\nfocus: e3\n"
	if a.text != want {
		t.Fatalf("text:\n%s\nwant:\n%s", a.text, want)
	}
	// The text changes value, the button goes, a menu comes: ids hold.
	nodes[3].value = "hi"
	b := render(t0, "editor", []*node{nodes[0], nodes[1], nodes[3], nodeOf("9", 1, "menu", "File")}, "")
	if b.elements[1].ID != "e3" || b.elements[2].ID != "e4" {
		t.Fatalf("ids after a change: %+v", b.elements)
	}
	text, els, removed, ok := diff(a, b, 40)
	if !ok || len(els) != 2 || len(removed) != 1 || removed[0] != "e2" ||
		!strings.Contains(text, "~ e3 text value=\"hi\" (focused, editable)\n") || !strings.Contains(text, "+ e4 menu \"File\"\n") ||
		!strings.Contains(text, "- removed 1: e2\n") {
		t.Fatalf("diff ok %v els %+v removed %v:\n%s", ok, els, removed, text)
	}
	if _, _, _, ok := diff(a, b, 2); ok {
		t.Error("a 3-line diff fit a budget of 2")
	}
	if got := ranges([]string{"e3", "e4", "e5", "e9", "e11", "e12"}); got != "e3-e5, e9, e11-e12" {
		t.Errorf("ranges: %q", got)
	}
	// An id is never given to another element, even after the first is gone.
	c := render(t0, "editor", []*node{nodes[0], nodeOf("2", 0, "push button", "Save")}, "")
	if c.elements[1].ID == "e2" {
		t.Errorf("a new element (new parent) took the gone element's id e2")
	}
	if h, h2 := render(newIDs(), "editor", nodes, "").hash, render(newIDs(), "editor", nodes, "").hash; h != h2 || len(h) != 32 || h == a.hash {
		t.Errorf("content hashes %q, %q (and %q before the change): want equal for equal content, 32 hex", h, h2, a.hash)
	}
	if tr := render(newIDs(), "editor", nodes, "nodes"); !strings.Contains(tr.text, "truncated: nodes cap reached") {
		t.Errorf("a truncated tree does not say so:\n%s", tr.text)
	}
}
