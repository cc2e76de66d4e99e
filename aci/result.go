package aci

// Action result statuses (info.results[i].status); a refused or failed
// action's status is its error code, with the error beside it.
const (
	StatusOK      = "ok"      // the action ran
	StatusSkipped = "skipped" // an earlier action of the step failed, so it did not run
)

// ActionResult is what one action of a step did: its status and, for query
// verbs, what it returned.
type ActionResult struct {
	Status string `msgpack:"status" json:"status"`
	Error  *Error `msgpack:"error,omitempty" json:"error,omitempty"`
	// Text is the clipboard's text (clipboard_get).
	Text *string `msgpack:"text,omitempty" json:"text,omitempty"`
	// PID is the launched process (launch_app).
	PID int `msgpack:"pid,omitempty" json:"pid,omitempty"`
	// WindowID is the launched app's window once mapped (launch_app), or the
	// window raised (activate_window).
	WindowID uint32 `msgpack:"window_id,omitempty" json:"window_id,omitempty"`
	// Windows lists the top-level windows (list_windows).
	Windows []Window `msgpack:"windows,omitempty" json:"windows,omitempty"`
}

// Window is one top-level window.
type Window struct {
	ID       uint32 `msgpack:"id" json:"id"`
	Title    string `msgpack:"title" json:"title"`
	Class    string `msgpack:"class,omitempty" json:"class,omitempty"`
	PID      int    `msgpack:"pid,omitempty" json:"pid,omitempty"`
	Focused  bool   `msgpack:"focused" json:"focused"`
	Geometry Rect   `msgpack:"geometry" json:"geometry"`
}
