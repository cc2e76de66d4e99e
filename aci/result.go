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

// Results are a step's results, one per action in order.
type Results []ActionResult

// NewResults returns n results, each skipped until its action runs.
func NewResults(n int) Results {
	rs := make(Results, n)
	for i := range rs {
		rs[i].Status = StatusSkipped
	}
	return rs
}

// Fail marks action i as failed with err (its status is err's code).
func (rs Results) Fail(i int, err error) {
	if i < 0 || i >= len(rs) {
		return
	}
	e := AsError(err)
	rs[i] = ActionResult{Status: string(e.Code), Error: e}
}

// OK marks action i, of verb v, as run; of got it keeps what v returns
// (nil: v returned nothing).
func (rs Results) OK(i int, v Verb, got *ActionResult) {
	r := ActionResult{Status: StatusOK}
	if got != nil {
		switch v {
		case ClipboardGet:
			r.Text = got.Text
		case LaunchApp:
			r.PID, r.WindowID = got.PID, got.WindowID
		case ActivateWindow:
			r.WindowID = got.WindowID
		case ListWindows:
			r.Windows = got.Windows
			if r.Windows == nil {
				r.Windows = []Window{}
			}
		}
	}
	rs[i] = r
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
