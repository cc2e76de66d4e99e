package a11y

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/shinken-rl/shinken/aci"
	"github.com/zeebo/xxh3"
)

// ids mints element ids for one episode: an element keeps its id while it
// lives (identity: bus name, object path, role and parent path), whatever
// its content does, and an id is never given to another element.
type ids struct {
	byKey map[string]string
	byID  map[string]objRef
	next  int
}

func newIDs() *ids { return &ids{byKey: make(map[string]string), byID: make(map[string]objRef)} }

// maxIDs bounds the ids one episode mints; past it the table starts over
// (a new episode's worth), which only a runaway app reaches.
const maxIDs = 200_000

func (t *ids) id(r objRef, role string, parent objRef) string {
	key := r.Bus + "\x00" + string(r.Path) + "\x00" + role + "\x00" + string(parent.Path)
	if id, ok := t.byKey[key]; ok {
		return id
	}
	if len(t.byKey) >= maxIDs {
		next := t.next
		*t = *newIDs()
		t.next = next
	}
	t.next++
	id := "e" + strconv.Itoa(t.next)
	t.byKey[key] = id
	t.byID[id] = r
	return id
}

// listed reports whether a node earns a line: it has a name, a value or an
// action, takes focus or text, or is a window or a container a model needs
// to see. Unnamed layout nodes are folded into their parent.
func listed(n *node) bool {
	switch n.role {
	case "separator", "filler", "redundant object", "unknown", "invalid":
		return n.name != "" && n.role != "separator"
	}
	if n.name != "" || n.value != "" || len(n.actions) > 0 || n.states.has(stEditable) || n.states.has(stFocusable) {
		return true
	}
	switch n.role {
	case "frame", "dialog", "window", "alert", "file chooser", "menu bar", "menu", "popup menu", "page tab list",
		"tool bar", "status bar", "table", "tree table", "tree", "list", "list box", "text", "entry", "combo box", "terminal", "document text":
		return true
	}
	return false
}

// tree is one walk rendered: its elements, their lines, and the whole text.
type tree struct {
	app, window, focus string
	elements           []aci.Element
	lines              []string // one per element, indented
	text               string
	hash               string
	truncated          string
	rev                int
}

// render assigns ids and renders the walked nodes.
func render(t *ids, app string, nodes []*node, truncated string) *tree {
	out := &tree{app: app, truncated: truncated}
	// The walk read breadth-first; lines go depth-first, children under
	// their parent.
	kids := make([][]int, len(nodes))
	var roots []int
	for i, n := range nodes {
		if n.parent >= 0 {
			kids[n.parent] = append(kids[n.parent], i)
		} else {
			roots = append(roots, i)
		}
	}
	var visit func(i int, parentEl int, level int, parentRef objRef)
	visit = func(i int, parentEl int, level int, parentRef objRef) {
		n := nodes[i]
		el, lvl := parentEl, level
		if listed(n) {
			e := aci.Element{
				ID:      t.id(n.ref, n.role, parentRef),
				Role:    n.role,
				Name:    n.name,
				Value:   n.value,
				States:  n.states.names(n.role),
				Actions: n.actions,
				Box:     n.box,
				Depth:   level,
			}
			if parentEl >= 0 {
				e.Parent = out.elements[parentEl].ID
			}
			if out.window == "" && isWindowRole(n.role) && n.parent < 0 && n.states.has(stActive) {
				out.window = n.name
			}
			if n.states.has(stFocused) {
				out.focus = e.ID
			}
			el, lvl = len(out.elements), level+1
			out.elements = append(out.elements, e)
			out.lines = append(out.lines, strings.Repeat("  ", e.Depth)+line(&e))
		}
		for _, k := range kids[i] {
			visit(k, el, lvl, n.ref)
		}
	}
	for _, r := range roots {
		visit(r, -1, 0, objRef{})
	}
	if out.window == "" {
		for _, r := range roots {
			if isWindowRole(nodes[r].role) {
				out.window = nodes[r].name
				break
			}
		}
	}
	var b strings.Builder
	b.WriteString(header(out))
	for _, l := range out.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString(trailer(out))
	out.text = b.String()
	h := xxh3.HashString128(out.text).Bytes()
	out.hash = fmt.Sprintf("%x", h[:])
	return out
}

func header(t *tree) string {
	s := "app: " + quoteName(t.app)
	if t.window != "" {
		s += " | window: " + quoteName(t.window)
	}
	s += "\n"
	if t.truncated != "" {
		s += "truncated: " + t.truncated + " cap reached; the tree is partial\n"
	}
	return s
}

func trailer(t *tree) string {
	if t.focus == "" {
		return "focus: none\n"
	}
	return "focus: " + t.focus + "\n"
}

// line renders one element: `e12 push button "Save" (focused) [Actions: click]`.
func line(e *aci.Element) string {
	var b strings.Builder
	b.WriteString(e.ID)
	b.WriteByte(' ')
	b.WriteString(e.Role)
	if e.Name != "" {
		b.WriteByte(' ')
		b.WriteString(quoteName(e.Name))
	}
	if e.Value != "" {
		b.WriteString(" value=")
		b.WriteString(quoteName(e.Value))
	}
	if len(e.States) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(e.States, ", "))
		b.WriteByte(')')
	}
	if len(e.Actions) > 0 {
		b.WriteString(" [Actions: ")
		b.WriteString(strings.Join(e.Actions, ", "))
		b.WriteByte(']')
	}
	return b.String()
}

// quoteName quotes a name for one line: newlines and quotes escaped, long
// names cut with an ellipsis.
func quoteName(s string) string {
	const maxName = 120
	if r := []rune(s); len(r) > maxName {
		s = string(r[:maxName]) + "…"
	}
	return strconv.Quote(s)
}

// diff renders cur against prev: changed (~) and added (+) lines, removed
// ids summarized as ranges. ok is false when the diff would take more than
// budget lines: the caller sends the whole tree instead.
func diff(prev, cur *tree, budget int) (text string, els []aci.Element, removed []string, ok bool) {
	old := make(map[string]string, len(prev.elements))
	for i, e := range prev.elements {
		old[e.ID] = strings.TrimLeft(prev.lines[i], " ")
	}
	seen := make(map[string]bool, len(cur.elements))
	var body []string
	for i, e := range cur.elements {
		seen[e.ID] = true
		l := strings.TrimLeft(cur.lines[i], " ")
		was, had := old[e.ID]
		switch {
		case !had:
			body = append(body, "+ "+l)
		case was != l:
			body = append(body, "~ "+l)
		default:
			continue
		}
		els = append(els, e)
	}
	for _, e := range prev.elements {
		if !seen[e.ID] {
			removed = append(removed, e.ID)
		}
	}
	if len(removed) > 0 {
		body = append(body, fmt.Sprintf("- removed %d: %s", len(removed), ranges(removed)))
	}
	if len(body) > budget {
		return "", nil, nil, false
	}
	var b strings.Builder
	b.WriteString(header(cur))
	if len(body) == 0 {
		b.WriteString("no changes\n")
	}
	for _, l := range body {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	b.WriteString(trailer(cur))
	return b.String(), els, removed, true
}

// ranges writes ids as runs: "e20-e35, e41".
func ranges(ids []string) string {
	var parts []string
	for i := 0; i < len(ids); {
		a, _ := strconv.Atoi(ids[i][1:])
		j := i
		for j+1 < len(ids) {
			n, _ := strconv.Atoi(ids[j+1][1:])
			if m, _ := strconv.Atoi(ids[j][1:]); n != m+1 {
				break
			}
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("e%d-%s", a, ids[j]))
		} else {
			parts = append(parts, ids[i])
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
