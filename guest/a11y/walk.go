package a11y

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/shinken-rl/shinken/aci"
)

// Caps bound one walk of the tree. A walk that reaches a cap stops there and
// its tree is labelled truncated.
type Caps struct {
	MaxNodes    int           // nodes visited (default 1500)
	MaxDepth    int           // levels below a top-level window (default 40)
	MaxChildren int           // children read per node (default 200)
	MaxWalk     time.Duration // one walk, settle excluded (default 4 s; never past the caller's deadline)
	CallTimeout time.Duration // one application's answer to one call (default 2 s: a busy app, e.g. one building a dialog, is not a hung one)
	Parallel    int           // calls in flight (default 16)
}

func (c *Caps) fill() {
	if c.MaxNodes <= 0 {
		c.MaxNodes = 1500
	}
	if c.MaxDepth <= 0 {
		c.MaxDepth = 40
	}
	if c.MaxChildren <= 0 {
		c.MaxChildren = 200
	}
	if c.MaxWalk <= 0 {
		c.MaxWalk = 4 * time.Second
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 2 * time.Second
	}
	if c.Parallel <= 0 {
		c.Parallel = 16
	}
}

// Interface bits of a node.
const (
	hasComponent = 1 << iota
	hasAction
	hasValue
	hasText
	hasEditable
)

// node is one accessible as a walk read it.
type node struct {
	ref      objRef
	parent   int // index of the parent node in the walk, -1 for a top-level window
	depth    int
	role     string
	name     string
	states   stateBits
	ifaces   int
	box      aci.Rect
	actions  []string
	value    string
	nkids    int
	children []objRef
}

func (n *node) showing() bool { return n.states.has(stShowing) && !n.states.has(stDefunct) }

// unlisted reports whether a node's children are not read: it has more
// than maxKids, or it manages its descendants (creates them when asked) and
// has more than a walk reads of one node. A spreadsheet's grid is such a
// node: LibreOffice would create its million cells and stop answering
// meanwhile. A GTK tree view manages its descendants too, a few rows of
// them: those are read. The node itself is listed.
func (w *walker) unlisted(n *node) bool {
	return n.nkids > maxKids || n.states.has(stManagesDescendants) && n.nkids > w.caps.MaxChildren
}

// maxKids bounds the children a node may have and still be read.
const maxKids = 5000

// roleNames caches AT-SPI role numbers to names (GetRoleName), which do not
// change.
type roleNames struct {
	mu sync.Mutex
	m  map[uint32]string
}

func (r *roleNames) get(k uint32) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.m[k]
	return s, ok
}

func (r *roleNames) put(k uint32, s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[uint32]string)
	}
	r.m[k] = s
}

// errHung is a call that got no answer within the call timeout: the
// application is stopped or busy.
var errHung = errors.New("application did not answer")

// walker reads one application's tree.
type walker struct {
	conn  *dbus.Conn
	caps  Caps
	roles *roleNames
	nodes []*node
	trunc string
}

func (w *walker) truncate(by string) {
	if w.trunc == "" {
		w.trunc = by
	}
}

// multi issues calls on one object concurrently and waits for them all.
type pending struct {
	method string
	args   []any
	out    []any
	skip   bool
}

func (w *walker) calls(ctx context.Context, r objRef, ps []pending) error {
	ctx, cancel := context.WithTimeout(ctx, w.caps.CallTimeout)
	defer cancel()
	ch := make(chan *dbus.Call, len(ps))
	obj := w.conn.Object(r.Bus, r.Path)
	sent := make([]*dbus.Call, len(ps))
	for i, p := range ps {
		if p.skip {
			continue
		}
		sent[i] = obj.GoWithContext(ctx, p.method, 0, ch, p.args...)
	}
	// Every call reports on ch (its Done) once it ends, in any order: wait
	// for them all before reading any.
	for _, c := range sent {
		if c != nil {
			<-ch
		}
	}
	var first error
	for i, c := range sent {
		if c == nil {
			continue
		}
		err := c.Err
		if err == nil && len(ps[i].out) > 0 {
			err = c.Store(ps[i].out...)
		}
		if err != nil && first == nil {
			first = err
		}
	}
	if first != nil && ctx.Err() != nil {
		return errHung
	}
	return first
}

// read fetches one node: role, name, states and interfaces; then, for a
// node on screen, its children, extents, actions and value.
func (w *walker) read(ctx context.Context, r objRef, parent, depth int) (*node, error) {
	n := &node{ref: r, parent: parent, depth: depth}
	var (
		role   uint32
		states []uint32
		ifaces []string
		props  map[string]dbus.Variant
	)
	err := w.calls(ctx, r, []pending{
		{method: ifAccessible + ".GetRole", out: []any{&role}},
		{method: ifAccessible + ".GetState", out: []any{&states}},
		{method: ifAccessible + ".GetInterfaces", out: []any{&ifaces}},
		{method: ifProperties + ".GetAll", args: []any{ifAccessible}, out: []any{&props}},
	})
	if err != nil {
		return nil, err
	}
	n.states = bitsOf(states)
	if v, ok := props["Name"].Value().(string); ok {
		n.name = strings.TrimSpace(v) // GTK pads menu items for their accelerators
	}
	if v, ok := props["ChildCount"].Value().(int32); ok {
		n.nkids = int(v)
	}
	for _, i := range ifaces {
		switch i {
		case ifComponent:
			n.ifaces |= hasComponent
		case ifAction:
			n.ifaces |= hasAction
		case ifValue:
			n.ifaces |= hasValue
		case ifText:
			n.ifaces |= hasText
		case ifEditableText:
			n.ifaces |= hasEditable
		}
	}
	name, known := w.roles.get(role)
	if !n.showing() {
		if !known {
			name = fmt.Sprintf("role %d", role)
		}
		n.role = name
		return n, nil
	}
	var (
		kids    [][]any
		ext     extents
		acts    [][]any
		value   dbus.Variant
		text    string
		gotRole string
	)
	textual := n.ifaces&hasText != 0 && (n.states.has(stEditable) || role == roleText || role == roleTerminal || role == roleEntry)
	err = w.calls(ctx, r, []pending{
		{method: ifAccessible + ".GetRoleName", out: []any{&gotRole}, skip: known},
		{method: ifAccessible + ".GetChildren", out: []any{&kids}, skip: n.nkids == 0 || w.unlisted(n)},
		{method: ifComponent + ".GetExtents", args: []any{coordScreen}, out: []any{&ext}, skip: n.ifaces&hasComponent == 0},
		{method: ifAction + ".GetActions", out: []any{&acts}, skip: n.ifaces&hasAction == 0},
		{method: ifProperties + ".Get", args: []any{ifValue, "CurrentValue"}, out: []any{&value}, skip: n.ifaces&hasValue == 0},
		{method: ifText + ".GetText", args: []any{int32(0), int32(maxValueChars + 1)}, out: []any{&text}, skip: !textual},
	})
	if err != nil {
		return nil, err
	}
	if !known {
		name = gotRole
		w.roles.put(role, name)
	}
	n.role = name
	for _, k := range kids {
		if ref, ok := refOf(k); ok {
			n.children = append(n.children, ref)
		}
	}
	n.box = ext.rect()
	for _, a := range acts {
		if len(a) > 0 {
			if s, ok := a[0].(string); ok && s != "" {
				n.actions = append(n.actions, s)
			}
		}
	}
	switch {
	case textual:
		n.value = text
	case n.ifaces&hasValue != 0:
		if f, ok := value.Value().(float64); ok {
			n.value = trimFloat(f)
		}
	}
	return n, nil
}

// AT-SPI role numbers a walk treats specially.
const (
	roleEntry    = 79 // ATSPI_ROLE_ENTRY
	roleText     = 61 // ATSPI_ROLE_TEXT
	roleTerminal = 60 // ATSPI_ROLE_TERMINAL
)

const maxValueChars = 200

func refOf(v []any) (objRef, bool) {
	if len(v) != 2 {
		return objRef{}, false
	}
	b, ok1 := v[0].(string)
	p, ok2 := v[1].(dbus.ObjectPath)
	r := objRef{Bus: b, Path: p}
	return r, ok1 && ok2 && !r.null()
}

func trimFloat(f float64) string {
	s := fmt.Sprintf("%.4f", f)
	for len(s) > 1 && s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

// walk reads the subtree of each top-level window in tops, level by level,
// keeping only what is on screen, within the caps. An application that does
// not answer ends the walk with errHung.
func (w *walker) walk(ctx context.Context, tops []objRef) error {
	type item struct {
		ref    objRef
		parent int
	}
	level := make([]item, 0, len(tops))
	for _, t := range tops {
		level = append(level, item{ref: t, parent: -1})
	}
	sem := make(chan struct{}, w.caps.Parallel)
	for depth := 0; len(level) > 0; depth++ {
		if depth > w.caps.MaxDepth {
			w.truncate("depth")
			return nil
		}
		if len(w.nodes)+len(level) > w.caps.MaxNodes {
			level = level[:max(0, w.caps.MaxNodes-len(w.nodes))]
			w.truncate("nodes")
		}
		got := make([]*node, len(level))
		errs := make([]error, len(level))
		var wg sync.WaitGroup
		for i, it := range level {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				wg.Wait()
				return ctx.Err()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				got[i], errs[i] = w.read(ctx, it.ref, it.parent, depth)
			}()
		}
		wg.Wait()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var next []item
		for i, n := range got {
			if errs[i] != nil {
				if errors.Is(errs[i], errHung) {
					return errHung
				}
				continue // gone meanwhile: it is simply not in this tree
			}
			if !n.showing() {
				continue
			}
			idx := len(w.nodes)
			w.nodes = append(w.nodes, n)
			kids := n.children
			if len(kids) > w.caps.MaxChildren {
				kids = kids[:w.caps.MaxChildren]
				w.truncate("children")
			}
			for _, k := range kids {
				next = append(next, item{ref: k, parent: idx})
			}
		}
		level = next
	}
	return nil
}
