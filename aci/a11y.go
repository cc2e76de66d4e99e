package aci

// Structured observation: the accessibility tree (docs/architecture.md,
// "Structured observation (a11y)").

// ElementRef is the target kind that names an element of the accessibility
// tree by its id ("e12") instead of a point. Pointer verbs resolve it to the
// centre of the element's current on-screen box.
const ElementRef = "element_ref"

// MarkLabel is one Set-of-Mark label (observe.som): its number as drawn,
// the element it marks, and that element's role, name and box (screen
// pixels). A target {kind: "mark", ref: "N"} names that element.
type MarkLabel struct {
	N    int    `msgpack:"n" json:"n"`
	Ref  string `msgpack:"ref" json:"ref"`
	Role string `msgpack:"role" json:"role"`
	Name string `msgpack:"name,omitempty" json:"name,omitempty"`
	Box  Rect   `msgpack:"box" json:"box"`
}

// Element verbs: they act on an element through the accessibility interfaces
// instead of the pointer.
const (
	// InvokeAction runs one of the element's actions (Text names it; empty:
	// its first).
	InvokeAction Verb = "invoke_action"
	// SetValue sets an element's text (editable text) or value (a range).
	SetValue Verb = "set_value"
)

// CodeStaleElementRef: an element ref that no longer resolves (the element
// is gone or off screen); re-observe and use a current id.
const CodeStaleElementRef Code = "stale_element_ref"

// Observe.A11y modes.
const (
	A11yNone = "none" // no tree (the default)
	A11yFull = "tree" // the whole tree
	A11yDiff = "diff" // what changed since the previous tree, or the whole tree past the line budget
)

// Ref builds an element_ref target.
func Ref(id string) *Target { return &Target{Kind: ElementRef, Ref: id} }

// Mark is the target kind that names a Set-of-Mark label drawn on the
// observed screenshot (OSWorld's som agents write tag_3): Ref holds the
// label's number. The server draws no marks yet (observe.som is not
// built), so mapping a mark target is refused as unsupported.
const Mark = "mark"

// MarkRef builds a mark target for label n.
func MarkRef(n string) *Target { return &Target{Kind: Mark, Ref: n} }

// markErr refuses a mark target that reached coordinate mapping: the
// server resolves marks against its last Set-of-Mark observation before
// mapping, so one left here had nothing to resolve it (a client mapping
// actions on its own).
func markErr(a *Action, t *Target) error {
	return Errorf(CodeUnsupported, "%s on mark %s (Set-of-Mark label tag_%s): a mark is resolved by the server against the env's last observe.som observation; give coordinates or an element ref here", a.Verb, t.Ref, t.Ref)
}

// Element is one node of the accessibility tree as tools see it.
type Element struct {
	ID      string   `msgpack:"id" json:"id"`
	Role    string   `msgpack:"role" json:"role"`
	Name    string   `msgpack:"name,omitempty" json:"name,omitempty"`
	Value   string   `msgpack:"value,omitempty" json:"value,omitempty"`
	States  []string `msgpack:"states,omitempty" json:"states,omitempty"`
	Actions []string `msgpack:"actions,omitempty" json:"actions,omitempty"`
	Box     Rect     `msgpack:"box" json:"box"`                           // screen pixels; zero when the element has no extents
	Parent  string   `msgpack:"parent,omitempty" json:"parent,omitempty"` // the nearest listed ancestor
	Depth   int      `msgpack:"depth" json:"depth"`
}

// A11yTree is one structured observation as the guest takes it: Text is
// what a model reads (one line per element), Elements the same elements as
// data, Hash the content address of the full tree text. In diff mode
// (Info.Diff) Text holds the changed and added lines and a summary of the
// removed ones, Elements the changed and added elements and Info.Removed the
// ids gone since revision Info.Base; a diff over the line budget is sent
// whole (Info.Diff false).
type A11yTree struct {
	A11yInfo `msgpack:",inline" json:"info"`
	Hash     string `msgpack:"hash" json:"hash"`
	Text     string `msgpack:"text" json:"text"`
	// FullText is the whole tree's text when Text is a diff (what Hash
	// addresses); empty otherwise. It stays between guest and server.
	FullText string    `msgpack:"full_text,omitempty" json:"full_text,omitempty"`
	Elements []Element `msgpack:"elements" json:"elements"`
}

// A11yInfo says what a structured observation holds and how it was taken.
type A11yInfo struct {
	Rev     int      `msgpack:"rev" json:"rev"` // revision of the tree content in this episode
	Diff    bool     `msgpack:"diff,omitempty" json:"diff,omitempty"`
	Base    int      `msgpack:"base,omitempty" json:"base,omitempty"` // the revision a diff is against
	Removed []string `msgpack:"removed,omitempty" json:"removed,omitempty"`
	App     string   `msgpack:"app,omitempty" json:"app,omitempty"`
	Window  string   `msgpack:"window,omitempty" json:"window,omitempty"`
	Focus   string   `msgpack:"focus,omitempty" json:"focus,omitempty"`
	Nodes   int      `msgpack:"nodes" json:"nodes"` // nodes the walk visited
	// Truncated says the walk stopped at a cap (TruncatedBy: nodes, depth,
	// time, children, app_timeout): the tree is partial.
	Truncated   bool   `msgpack:"truncated,omitempty" json:"truncated,omitempty"`
	TruncatedBy string `msgpack:"truncated_by,omitempty" json:"truncated_by,omitempty"`
	WalkMS      int64  `msgpack:"walk_ms" json:"walk_ms"`
	SettleMS    int64  `msgpack:"settle_ms" json:"settle_ms"` // waiting for a11y change events to go quiet
	Events      int    `msgpack:"events" json:"events"`       // a11y change events seen while settling
	// Error is why no tree came (an application that does not answer, no
	// accessibility bus); the pixels of the observation are still good.
	Error *Error `msgpack:"error,omitempty" json:"error,omitempty"`
}
