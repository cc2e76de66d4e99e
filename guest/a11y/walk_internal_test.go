package a11y

import "testing"

// TestUnlistedChildren: a node that manages many descendants (a
// spreadsheet's grid) or has too many children is not enumerated; a tree
// view's few managed rows are.
func TestUnlistedChildren(t *testing.T) {
	w := &walker{caps: Caps{}}
	w.caps.fill()
	managed := stateBits(1 << stManagesDescendants)
	for _, c := range []struct {
		n    node
		want bool
	}{
		{node{nkids: 12, states: managed}, false},
		{node{nkids: w.caps.MaxChildren + 1, states: managed}, true},
		{node{nkids: maxKids}, false},
		{node{nkids: maxKids + 1}, true},
		{node{nkids: 1 << 30, states: managed}, true},
	} {
		if got := w.unlisted(&c.n); got != c.want {
			t.Errorf("unlisted(%d children, states %b) = %v; want %v", c.n.nkids, c.n.states, got, c.want)
		}
	}
}
