// Package aci is the Agent-Computer Interface: the typed vocabulary of actions,
// observations and error codes that the guest, the env server, trajectories and
// rollouts all speak. It is a leaf: it imports nothing heavier than the standard
// library, so every other package can depend on it.
package aci

import (
	"errors"
	"fmt"
	"slices"
)

// Verb names one agent (or desktop) action.
type Verb string

// Agent verbs (docs/api.md, "Actions").
const (
	Click          Verb = "click"
	DoubleClick    Verb = "double_click"
	RightClick     Verb = "right_click"
	Move           Verb = "move"
	Scroll         Verb = "scroll"
	Drag           Verb = "drag"
	MouseDown      Verb = "mouse_down"
	MouseUp        Verb = "mouse_up"
	TypeText       Verb = "type_text"
	Key            Verb = "key"
	Wait           Verb = "wait"
	Screenshot     Verb = "screenshot"
	LaunchApp      Verb = "launch_app"
	ActivateWindow Verb = "activate_window"
	ClipboardGet   Verb = "clipboard_get"
	ClipboardSet   Verb = "clipboard_set"
	ListWindows    Verb = "list_windows"
	Done           Verb = "done"
	Fail           Verb = "fail"
)

// verbTable is the one list of verbs: every verb an agent may send, in the
// order /v1/spec lists them, and who carries it out. The lists below are
// read off it.
var verbTable = []struct {
	verb Verb
	by   verbDoer
}{
	{Click, byGuest}, {DoubleClick, byGuest}, {RightClick, byGuest}, {Move, byGuest},
	{Scroll, byGuest}, {Drag, byGuest}, {MouseDown, byGuest}, {MouseUp, byGuest},
	{TypeText, byGuest}, {Key, byGuest}, {Wait, byGuest}, {Screenshot, byGuest},
	{LaunchApp, byGuest}, {ActivateWindow, byGuest},
	{ClipboardGet, byGuest}, {ClipboardSet, byGuest}, {ListWindows, byGuest},
	{Done, byServer}, {Fail, byServer},
	{InvokeAction, byGuestTree}, {SetValue, byGuestTree},
}

// verbDoer says who carries a verb out.
type verbDoer int

const (
	byGuest     verbDoer = iota // guestd, on the desktop
	byServer                    // the env server (the episode's end)
	byGuestTree                 // guestd, through the accessibility tree
)

func verbsBy(keep func(verbDoer) bool) []Verb {
	var out []Verb
	for _, v := range verbTable {
		if keep(v.by) {
			out = append(out, v.verb)
		}
	}
	return out
}

var (
	// AgentVerbs lists, in a stable order, every verb an agent may send.
	AgentVerbs = verbsBy(func(verbDoer) bool { return true })
	// GuestVerbs are the verbs guestd carries out on the desktop (done and
	// fail are the env server's; A11yVerbs need the tree).
	GuestVerbs = verbsBy(func(d verbDoer) bool { return d == byGuest })
	// A11yVerbs are the verbs that need the accessibility tree.
	A11yVerbs = verbsBy(func(d verbDoer) bool { return d == byGuestTree })
)

// Known reports whether v is an agent verb.
func (v Verb) Known() bool {
	for _, k := range verbTable {
		if v == k.verb {
			return true
		}
	}
	return false
}

// Target kinds.
const (
	PointPx   = "point_px"   // x, y in screen pixels
	PointNorm = "point_norm" // x, y in 0..1; 1.0 is the last pixel
	// ElementRef (element_ref, in a11y.go): Ref names an element.
)

// Target is a point on the screen, or an element of the accessibility tree
// (Kind element_ref, Ref its id).
type Target struct {
	Kind string  `msgpack:"kind" json:"kind"`
	X    float64 `msgpack:"x" json:"x"`
	Y    float64 `msgpack:"y" json:"y"`
	Ref  string  `msgpack:"ref,omitempty" json:"ref,omitempty"`
}

// Action is one typed action. Which fields matter depends on Verb; the rest
// stay zero. X and Y are shorthand for a point_px Target.
type Action struct {
	Verb       Verb     `msgpack:"verb" json:"verb"`
	X          *float64 `msgpack:"x,omitempty" json:"x,omitempty"`
	Y          *float64 `msgpack:"y,omitempty" json:"y,omitempty"`
	Target     *Target  `msgpack:"target,omitempty" json:"target,omitempty"`
	Button     string   `msgpack:"button,omitempty" json:"button,omitempty"` // left|middle|right
	Text       string   `msgpack:"text,omitempty" json:"text,omitempty"`
	Keys       string   `msgpack:"keys,omitempty" json:"keys,omitempty"` // xdotool-style chord: "ctrl+shift+t"
	DX         int      `msgpack:"dx,omitempty" json:"dx,omitempty"`     // wheel steps, + right
	DY         int      `msgpack:"dy,omitempty" json:"dy,omitempty"`     // wheel steps, + down
	To         *Target  `msgpack:"to,omitempty" json:"to,omitempty"`
	DurationMS int      `msgpack:"duration_ms,omitempty" json:"duration_ms,omitempty"`
	MS         int      `msgpack:"ms,omitempty" json:"ms,omitempty"`
	App        string   `msgpack:"app,omitempty" json:"app,omitempty"`
	Args       []string `msgpack:"args,omitempty" json:"args,omitempty"`
	WindowID   uint32   `msgpack:"window_id,omitempty" json:"window_id,omitempty"`
	Modifiers  []string `msgpack:"modifiers,omitempty" json:"modifiers,omitempty"` // held during a click
}

// Point returns the action's primary target: Target if set, else X/Y as pixels.
// ok is false when the action names no point.
func (a *Action) Point() (t Target, ok bool) {
	if a.Target != nil {
		return *a.Target, true
	}
	if a.X != nil && a.Y != nil {
		return Target{Kind: PointPx, X: *a.X, Y: *a.Y}, true
	}
	if a.X != nil || a.Y != nil {
		return Target{}, false
	}
	return Target{}, false
}

// Px is a convenience for building pixel-targeted actions.
func Px(x, y float64) *Target { return &Target{Kind: PointPx, X: x, Y: y} }

// Norm is a convenience for building normalized-targeted actions.
func Norm(x, y float64) *Target { return &Target{Kind: PointNorm, X: x, Y: y} }

// Observation formats.
const (
	FormatPNG  = "png"
	FormatJPEG = "jpeg"
	FormatRaw  = "raw" // RGB24, row-major, no padding
)

// Formats is the one list of observation formats an agent may ask for, in
// the order /v1/spec lists them.
var Formats = []string{FormatPNG, FormatJPEG, FormatRaw}

// KnownFormat reports whether f is one of Formats.
func KnownFormat(f string) bool { return slices.Contains(Formats, f) }

// DefaultJPEGQuality is a jpeg observation's quality when none is asked for.
const DefaultJPEGQuality = 80

// Observation scopes.
const (
	ScopeScreen       = "screen"
	ScopeActiveWindow = "active_window"
	// "window:<id>" selects one window by id.
)

// Observe says how the caller wants the screen observed.
type Observe struct {
	Format      string  `msgpack:"format,omitempty" json:"format,omitempty"`
	MaxLongEdge int     `msgpack:"max_long_edge,omitempty" json:"max_long_edge,omitempty"`
	Quality     int     `msgpack:"quality,omitempty" json:"quality,omitempty"`
	Scope       string  `msgpack:"scope,omitempty" json:"scope,omitempty"`
	Settle      *Settle `msgpack:"settle,omitempty" json:"settle,omitempty"` // nil: the server's default
	A11y        string  `msgpack:"a11y,omitempty" json:"a11y,omitempty"`     // none|tree|diff (a11y.go)
	// SoM asks for a Set-of-Mark frame: the interactive elements of the
	// accessibility tree numbered and boxed on the frame, their table in
	// Observation.Marks (a11y.go; implies a11y tree).
	SoM bool `msgpack:"som,omitempty" json:"som,omitempty"`
}

// Rect is a rectangle in screen pixels.
type Rect struct {
	X int `msgpack:"x" json:"x"`
	Y int `msgpack:"y" json:"y"`
	W int `msgpack:"w" json:"w"`
	H int `msgpack:"h" json:"h"`
}

// Display describes how a delivered frame maps onto the screen: the screen is
// W x H, the frame shows SourceRect of it, scaled to Delivered.
type Display struct {
	W          int  `msgpack:"w" json:"w"`
	H          int  `msgpack:"h" json:"h"`
	SourceRect Rect `msgpack:"source_rect" json:"source_rect"`
	Delivered  Rect `msgpack:"delivered" json:"delivered"` // X=Y=0; W,H the frame's size
}

// Observation is what the trainer sees of a screen. The encoded image travels
// separately, keyed by Frame (an opaque 32-hex-char XXH3-128 hash).
type Observation struct {
	Frame   string  `msgpack:"frame" json:"frame"`
	W       int     `msgpack:"w" json:"w"`
	H       int     `msgpack:"h" json:"h"`
	Format  string  `msgpack:"format" json:"format"`
	Pointer [2]int  `msgpack:"pointer" json:"pointer"`
	Display Display `msgpack:"display" json:"display"`
	// Structured observation (observe.a11y tree|diff): the tree's
	// rendering for a model, its elements, and its content address.
	TreeText string    `msgpack:"tree_text,omitempty" json:"tree_text,omitempty"`
	Elements []Element `msgpack:"elements,omitempty" json:"elements,omitempty"`
	Tree     string    `msgpack:"tree,omitempty" json:"tree,omitempty"` // hash of the full tree text
	A11y     *A11yInfo `msgpack:"a11y,omitempty" json:"a11y,omitempty"` // how the tree was taken
	// Marks are the Set-of-Mark table (observe.som): mark N is drawn on
	// the frame over element Ref's box.
	Marks []MarkLabel `msgpack:"marks,omitempty" json:"marks,omitempty"`
}

// Code is a wire error code. The set is closed: see Codes.
type Code string

// Error codes (docs/api.md, "Errors").
const (
	CodeBadRequest      Code = "bad_request"
	CodePayloadTooLarge Code = "payload_too_large"
	CodeBatchTooLarge   Code = "batch_too_large"
	CodeUnauthorized    Code = "unauthorized"
	CodeNotFound        Code = "not_found"
	CodeInvalidAction   Code = "invalid_action"
	CodeUnknownVerb     Code = "unknown_verb"
	CodeDialectError    Code = "dialect_error"
	CodeUnsupported     Code = "unsupported"
	CodePoolExhausted   Code = "pool_exhausted"
	CodeSandboxDied     Code = "sandbox_died"
	CodeTimeout         Code = "timeout"
	CodeEpisodeOver     Code = "episode_over"
	CodeInternal        Code = "internal"
	CodeScorerError     Code = "scorer_error" // the verifier gave no valid verdict
	CodeAgentError      Code = "agent_error"  // the agent broke what it acted on (its session, pids, memory)
	// CodeCheckpointLimit: a new checkpoint would exceed the server's
	// count or bytes of checkpoints; delete some (docs/api.md, "Checkpoints").
	CodeCheckpointLimit Code = "checkpoint_limit"
	// CodeChecksumMismatch: a file's bytes do not have the sha256 the
	// request named (docs/api.md, "Trainer files").
	CodeChecksumMismatch Code = "checksum_mismatch"
	// Guest-side codes that stay inside the host⇄guest protocol or surface
	// through info.error.
	CodeBusy         Code = "busy"          // guest concurrency limit reached
	CodeDisplayError Code = "display_error" // X server wedged or gone
	CodeTooLarge     Code = "too_large"     // a value over its cap (clipboard, file)
	// CodeStaleElementRef (stale_element_ref) is in a11y.go.
)

// Error is a typed error that crosses the wire as {code, message, detail?}.
type Error struct {
	Code    Code   `msgpack:"code" json:"code"`
	Message string `msgpack:"message" json:"message"`
	Detail  any    `msgpack:"detail,omitempty" json:"detail,omitempty"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is makes errors.Is(err, &Error{Code: c}) match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Message == "" || t.Message == e.Message)
}

// Errorf builds a typed error.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns err's code: the code of the first *Error in its chain, or
// CodeInternal for an untyped error, or "" for nil.
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// AsError converts any error into a wire *Error (untyped errors become internal).
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}
