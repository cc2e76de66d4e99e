// Package ui is the read-only web UI that envserver serves at /ui: a live
// view of the pool and its envs, a replay of every recorded episode and the
// task suite with recent pass rates. It reads the server's own state through
// Source (no second copy of envs, episodes or frames, and never a capture of
// its own) and serves static files embedded in the binary; the browser side
// is plain JavaScript with no build step.
package ui

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/trajectory"
)

//go:embed static
var staticFS embed.FS

// ErrNotFound is what a Source wraps for an unknown episode or frame.
var ErrNotFound = errors.New("not found")

// Source is what the UI reads from the server. Every method returns at once
// (no call waits on a step in flight) and returns copies the UI may keep.
type Source interface {
	// Envs lists the open envs.
	Envs() []Env
	// Pool describes the pool and each live sandbox.
	Pool() PoolView
	// Counters are the server's running totals, sampled for the gauges.
	Counters() Counters
	// Tasks lists the shipped tasks.
	Tasks() []Task
	// EpisodeIDs lists every episode the server can still return: live,
	// recently finished and stored.
	EpisodeIDs() []string
	// Episode returns one episode (live ones as they stand); an unknown id
	// wraps ErrNotFound.
	Episode(id string) (*trajectory.Trajectory, error)
	// Frame returns a frame's encoded bytes from the shared frame cache or
	// the frame store, and its format (png, jpeg or raw). Never a capture.
	Frame(hash string) (data []byte, format string, err error)
}

// Env is one open env as the pool view shows it.
type Env struct {
	ID         string    `json:"id"`
	State      string    `json:"state"` // idle | resetting | running | over | dead
	Busy       bool      `json:"busy"`  // a call on it is in flight
	Task       string    `json:"task,omitempty"`
	EpisodeID  string    `json:"episode_id,omitempty"`
	Step       int       `json:"step"`
	MaxSteps   int       `json:"max_steps"`
	Reward     float64   `json:"reward"`
	ExitReason string    `json:"exit_reason,omitempty"`
	Frame      string    `json:"frame,omitempty"` // latest frame hash
	Sandbox    string    `json:"sandbox,omitempty"`
	LastUsed   time.Time `json:"last_used"`
}

// PoolView is the pool at one moment.
type PoolView struct {
	Provider     string             `json:"provider"`
	SnapshotKind string             `json:"snapshot_kind"`
	Size         int                `json:"size"`
	Stats        Counters           `json:"stats"`
	Sandboxes    []pool.SandboxView `json:"sandboxes"`
	ScreenW      int                `json:"screen_w"`
	ScreenH      int                `json:"screen_h"`
}

// Counters are the server's gauges and running totals.
type Counters struct {
	Warm     int    `json:"warm"`
	Leased   int    `json:"leased"`
	Booting  int    `json:"booting"`
	Replicas int    `json:"replicas"`
	Resets   uint64 `json:"resets"`
	Steps    uint64 `json:"steps"`
	Deaths   uint64 `json:"deaths"`
	Episodes uint64 `json:"episodes"`
}

// Task is one task family: its instruction template and a few drawn
// instances (docs/tasks.md).
type Task struct {
	ID          string     `json:"id"`
	Version     int        `json:"version"`
	Instruction string     `json:"instruction"`
	Apps        []string   `json:"apps"`
	MaxSteps    int        `json:"max_steps"`
	Params      []string   `json:"params,omitempty"` // "name (kind)"
	TestPercent int        `json:"test_percent"`
	Samples     []Instance `json:"samples,omitempty"`
}

// Instance is one drawn instance of a family.
type Instance struct {
	Split       string `json:"split"`
	Seed        int64  `json:"seed"`
	Instruction string `json:"instruction"`
}

// Options tune a UI.
type Options struct {
	Token        string        // the server's bearer token; "" serves anyone (loopback)
	SampleEvery  time.Duration // gauge sampling period; default 1 s
	SeriesLen    int           // samples kept; default 600
	IndexEvery   time.Duration // how stale the episode index may get; default 1 s
	MaxGIFFrames int           // frames in an exported replay; default 300
}

// UI serves the web UI. Create it with New, sample with Run, serve with
// ServeHTTP.
type UI struct {
	src     Source
	opt     Options
	session []byte // the cookie value a login sets; derived from the token
	series  *series
	index   *index
	mux     *http.ServeMux
	gifSlot chan struct{} // one replay export at a time
	thumbs  *thumbCache
}

// CookieName is the session cookie a login sets.
const CookieName = "shinken_ui"

// New builds a UI over src.
func New(src Source, opt Options) *UI {
	if opt.SampleEvery <= 0 {
		opt.SampleEvery = time.Second
	}
	if opt.SeriesLen <= 0 {
		opt.SeriesLen = 600
	}
	if opt.IndexEvery <= 0 {
		opt.IndexEvery = time.Second
	}
	if opt.MaxGIFFrames <= 0 {
		opt.MaxGIFFrames = 300
	}
	u := &UI{src: src, opt: opt, series: newSeries(opt.SeriesLen), index: newIndex(src, opt.IndexEvery), gifSlot: make(chan struct{}, 1), thumbs: newThumbCache(16 << 20)}
	if opt.Token != "" {
		// The cookie carries a value derived from the token, not the token:
		// a leaked cookie jar or log line does not leak the API token.
		m := hmac.New(sha256.New, []byte(opt.Token))
		m.Write([]byte("shinken web ui session v1"))
		u.session = []byte(hex.EncodeToString(m.Sum(nil)))
	}
	u.routes()
	return u
}

// Run samples the server's counters every SampleEvery until ctx ends. The
// server runs it in a goroutine it owns.
func (u *UI) Run(ctx context.Context) {
	t := time.NewTicker(u.opt.SampleEvery)
	defer t.Stop()
	u.series.add(time.Now(), u.src.Counters())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			u.series.add(now, u.src.Counters())
		}
	}
}

func (u *UI) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	fileServer := http.StripPrefix("/ui/static/", http.FileServer(http.FS(static)))
	// Embedded files carry no modification time: ask the browser to
	// revalidate, so a new server's pages never run an old script.
	files := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		fileServer.ServeHTTP(w, r)
	})
	m.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	m.HandleFunc("GET /ui/{$}", u.page)
	m.Handle("GET /ui/static/", files)
	m.HandleFunc("GET /ui/api/pool", u.apiPool)
	m.HandleFunc("GET /ui/api/series", u.apiSeries)
	m.HandleFunc("GET /ui/api/tasks", u.apiTasks)
	m.HandleFunc("GET /ui/api/episodes", u.apiEpisodes)
	m.HandleFunc("GET /ui/api/episodes/{id}", u.apiEpisode)
	m.HandleFunc("GET /ui/api/episodes/{id}/replay.gif", u.apiGIF)
	m.HandleFunc("GET /ui/frames/{hash}", u.frame)
	u.mux = m
}

// ServeHTTP answers every /ui path. /ui/login and /ui/logout are open; the
// rest needs the token (Authorization: Bearer, or the session cookie a
// login set) when one is configured.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	switch r.URL.Path {
	case "/ui/login":
		u.login(w, r)
		return
	case "/ui/logout":
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/ui", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	if !u.Authorized(r) {
		u.refuse(w, r)
		return
	}
	u.mux.ServeHTTP(w, r)
}

// Authorized reports whether r carries the token as a bearer header or the
// session cookie; always true without a token.
func (u *UI) Authorized(r *http.Request) bool {
	if u.opt.Token == "" {
		return true
	}
	if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok &&
		subtle.ConstantTimeCompare([]byte(got), []byte(u.opt.Token)) == 1 {
		return true
	}
	c, err := r.Cookie(CookieName)
	return err == nil && subtle.ConstantTimeCompare([]byte(c.Value), u.session) == 1
}

// login checks a token given as a form field (POST) or ?token= (GET), sets
// the session cookie and redirects to a URL without the token in it.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	tok := r.FormValue("token")
	if u.opt.Token == "" {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(u.opt.Token)) != 1 {
		u.loginPage(w, http.StatusUnauthorized, "wrong token")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: string(u.session), Path: "/ui",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

func (u *UI) refuse(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/ui/api/") || strings.HasPrefix(r.URL.Path, "/ui/frames/") {
		writeJSONError(w, http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token or session cookie")
		return
	}
	u.loginPage(w, http.StatusUnauthorized, "")
}

func (u *UI) loginPage(w http.ResponseWriter, status int, msg string) {
	b, _ := staticFS.ReadFile("static/login.html")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
	if msg != "" {
		b = bytes.Replace(b, []byte("<!--msg-->"), []byte(`<p class="err">`+msg+`</p>`), 1)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

func (u *UI) page(w http.ResponseWriter, r *http.Request) {
	b, _ := staticFS.ReadFile("static/index.html")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}

// writeJSON answers v as JSON with a strong ETag of its bytes, and 304 when
// the client already holds them.
func writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Contains(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", "application/json")
	w.Write(b)
}

// writeJSONError answers the API's error shape.
func writeJSONError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

func (u *UI) apiPool(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, r, map[string]any{"pool": u.src.Pool(), "envs": u.src.Envs()})
}

func (u *UI) apiSeries(w http.ResponseWriter, r *http.Request) {
	after, _ := parseInt(r.URL.Query().Get("after"))
	writeJSON(w, r, u.series.since(after))
}
