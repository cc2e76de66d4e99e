package webapp

import (
	"net/http"
	"net/url"
	"sync"
	"time"
)

// MaxLog bounds an app's action log; past it the app refuses changes with
// 429 (an agent that loops a form cannot grow the state without bound).
const MaxLog = 2000

// MaxField bounds one form field's length in bytes.
const MaxField = 8 << 10

// Event is one state change the agent made, as the verifier reads it.
type Event struct {
	Seq    int               `json:"seq"`
	Action string            `json:"action"`
	Fields map[string]string `json:"fields,omitempty"`
}

// journal is an app's action log; embed it and hold mu around changes.
type journal struct {
	mu  sync.Mutex
	Log []Event `json:"log"`
}

// add appends an event (mu held); false when the log is full.
func (j *journal) add(action string, fields map[string]string) bool {
	if len(j.Log) >= MaxLog {
		return false
	}
	j.Log = append(j.Log, Event{Seq: len(j.Log) + 1, Action: action, Fields: fields})
	return true
}

// form reads a POST's form, bounded by MaxBody and MaxField; on failure it
// has answered the request and returns false.
func form(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return nil, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return nil, false
	}
	for _, vs := range r.PostForm {
		for _, v := range vs {
			if len(v) > MaxField {
				http.Error(w, "field too long", http.StatusRequestEntityTooLarge)
				return nil, false
			}
		}
	}
	return r.PostForm, true
}

// seeOther redirects after a successful POST (post/redirect/get).
func seeOther(w http.ResponseWriter, r *http.Request, to string) {
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// epoch is the fixed "now" of every app: pages show dates relative to the
// instance's data, never the wall clock, so an instance renders the same
// on every run.
var epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// logRouter is the router of an app whose every change is logged: once the
// log is full, a post is refused with fail's 429 page.
func (j *journal) logRouter(fail func(status int, msg string) answer) router {
	s := newRouter(&j.mu, scriptStyle)
	s.full = func() bool { return len(j.Log) >= MaxLog }
	s.fail = fail
	return s
}
