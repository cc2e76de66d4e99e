package webapp

// Helpers the wiki, admin and calendar apps share: a handler answer built
// under the app's lock and written after it is released, route
// registration that takes the lock and bounds posts, and small validators.
// Their names start with "wac" so they stay clear of the other apps'.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// wacResp is a handler's answer: a page (status and body) or a redirect.
// Handlers build it with the app's lock held; it is written after the lock
// is released, so a slow client never holds the app.
type wacResp struct {
	status   int
	body     []byte
	location string // a path on this site; a 303 when set
}

func (k wacResp) write(w http.ResponseWriter, r *http.Request) {
	if k.location != "" {
		seeOther(w, r, k.location)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; form-action 'self'; img-src data:")
	w.WriteHeader(k.status)
	if r.Method != http.MethodHead {
		w.Write(k.body)
	}
}

// wacRedirect answers a post with a redirect to path (always a path this
// site built, never one the request supplied).
func wacRedirect(path string) wacResp { return wacResp{location: path} }

// wacPage executes template "base" of t with data into a page.
func wacPage(t *template.Template, status int, data any) wacResp {
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "base", data); err != nil {
		return wacResp{status: http.StatusInternalServerError, body: []byte("page error")}
	}
	return wacResp{status: status, body: b.Bytes()}
}

// wacSite registers an app's routes: each handler runs with mu held, a
// post's form is read (bounded) before the lock is taken, and a post is
// refused with 429 once the log is full.
type wacSite struct {
	mu   *sync.Mutex
	full func() bool                          // the log is full (mu held)
	fail func(status int, msg string) wacResp // the app's error page (mu held)
	mux  *http.ServeMux
}

func (s *wacSite) run(w http.ResponseWriter, r *http.Request, h func() wacResp) {
	var resp wacResp
	func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		resp = h()
	}()
	resp.write(w, r)
}

// get serves GET (and HEAD) of pattern.
func (s *wacSite) get(pattern string, h func(r *http.Request) wacResp) {
	s.mux.HandleFunc("GET "+pattern, func(w http.ResponseWriter, r *http.Request) {
		s.run(w, r, func() wacResp { return h(r) })
	})
}

// post serves POST of pattern.
func (s *wacSite) post(pattern string, h func(r *http.Request, f url.Values) wacResp) {
	s.mux.HandleFunc("POST "+pattern, func(w http.ResponseWriter, r *http.Request) {
		f, ok := form(w, r)
		if !ok {
			return
		}
		s.run(w, r, func() wacResp {
			if s.full() {
				return s.fail(http.StatusTooManyRequests, "Too many changes: this site accepts no more.")
			}
			return h(r, f)
		})
	})
}

// notFound serves every other path with the app's 404 page.
func (s *wacSite) notFound() {
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.run(w, r, func() wacResp { return s.fail(http.StatusNotFound, "The page you asked for does not exist.") })
	})
}

// wacVal is a form field, trimmed.
func wacVal(f url.Values, name string) string { return strings.TrimSpace(f.Get(name)) }

// wacText reports whether s is one line of printable text of at most max
// runes (valid UTF-8, no control characters).
func wacText(s string, max int) bool {
	if !utf8.ValidString(s) || utf8.RuneCountInString(s) > max {
		return false
	}
	for _, c := range s {
		if unicode.IsControl(c) || c == '\u2028' || c == '\u2029' {
			return false
		}
	}
	return true
}

// wacBody reports whether s is multi-line text: valid UTF-8 with no
// control characters other than newline, carriage return and tab.
func wacBody(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if unicode.IsControl(c) && c != '\n' && c != '\r' && c != '\t' {
			return false
		}
	}
	return true
}

// wacEmailOK reports whether s looks like an email address.
func wacEmailOK(s string) bool {
	if len(s) > 254 || strings.Count(s, "@") != 1 {
		return false
	}
	local, domain, _ := strings.Cut(s, "@")
	if local == "" || len(local) > 64 || domain == "" || !strings.Contains(domain, ".") {
		return false
	}
	if strings.HasPrefix(local, ".") || strings.HasSuffix(local, ".") || strings.Contains(local, "..") {
		return false
	}
	if strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.Contains(domain, "..") ||
		strings.HasPrefix(domain, "-") {
		return false
	}
	for _, c := range local {
		if !(c < 128 && (unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune(".%+-_'", c))) {
			return false
		}
	}
	for _, c := range domain {
		if !(c < 128 && (unicode.IsLetter(c) || unicode.IsDigit(c) || c == '.' || c == '-')) {
			return false
		}
	}
	tld := domain[strings.LastIndexByte(domain, '.')+1:]
	return len(tld) >= 2
}

// wacInt is an id in an app's data: a JSON number, or a string of digits.
type wacInt int

func (k *wacInt) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	v, err := strconv.Atoi(n.String())
	if err != nil || v < 0 || v > 1e9 {
		return fmt.Errorf("id %s is not a whole number from 0 to 1e9", b)
	}
	*k = wacInt(v)
	return nil
}

// wacStr is a string in an app's data that may also be given as a number.
type wacStr string

func (k *wacStr) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*k = wacStr(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a string or a number, have %s", b)
	}
	*k = wacStr(n.String())
	return nil
}

// wacIDOK reports whether s may be an id in a URL path: 1 to 64 letters,
// digits, '-' or '_'.
func wacIDOK(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c < 128 && (unicode.IsLetter(c) || unicode.IsDigit(c) || c == '-' || c == '_')) {
			return false
		}
	}
	return true
}

const wacDateLayout = "2006-01-02"

// wacToday is epoch's date.
var wacToday = epoch.Format(wacDateLayout)

// wacDate parses a YYYY-MM-DD date between the years 1970 and 2199.
func wacDate(s string) (time.Time, bool) {
	if len(s) != 10 {
		return time.Time{}, false
	}
	t, err := time.Parse(wacDateLayout, s)
	if err != nil || t.Year() < 1970 || t.Year() > 2199 {
		return time.Time{}, false
	}
	return t, true
}

// wacAgo says how long before epoch date d (YYYY-MM-DD, or YYYY-MM-DD
// HH:MM) was: "today", "yesterday", "3 days ago", or the date itself.
func wacAgo(d string) string {
	if len(d) < 10 {
		return d
	}
	t, ok := wacDate(d[:10])
	if !ok {
		return d
	}
	today, _ := wacDate(wacToday)
	days := int(today.Sub(t).Hours() / 24)
	switch {
	case days == 0:
		return "today"
	case days == 1:
		return "yesterday"
	case days > 1 && days < 31:
		return fmt.Sprintf("%d days ago", days)
	}
	return t.Format("Jan 2, 2006")
}

// wacFlag reads a checkbox-like value: true for on/1/true/yes, false for
// off/0/false/no, ok false for anything else.
func wacFlag(s string) (v, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "on", "1", "true", "yes":
		return true, true
	case "off", "0", "false", "no", "":
		return false, true
	}
	return false, false
}

// wacCrumb is one breadcrumb link.
type wacCrumb struct{ Name, URL string }

// wacClip shortens s to at most n runes, with an ellipsis.
func wacClip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n])) + "…"
}

// wacTemplates parses each page template under dir of fsys together with
// dir/base.html into a set of its own, keyed by the page's file name
// without ".html".
func wacTemplates(fsys fs.FS, dir string, funcs template.FuncMap) map[string]*template.Template {
	names, err := fs.Glob(fsys, dir+"/*.html")
	if err != nil || len(names) == 0 {
		panic("webapp: no templates under " + dir)
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		base := path.Base(n)
		if base == "base.html" {
			continue
		}
		t := template.Must(template.New(base).Funcs(funcs).ParseFS(fsys, dir+"/base.html", n))
		out[strings.TrimSuffix(base, ".html")] = t
	}
	return out
}

// wacFuncs are the template functions every wac app's pages may use.
func wacFuncs() template.FuncMap {
	return template.FuncMap{"ago": wacAgo, "initials": wacInitials, "plural": wacPlural}
}

// wacPlural is "1 seat", "4 seats".
func wacPlural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// wacInitials is up to two initials of a name, upper-cased.
func wacInitials(name string) string {
	var out []rune
	for _, w := range strings.Fields(name) {
		r, _ := utf8.DecodeRuneInString(w)
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			out = append(out, unicode.ToUpper(r))
		}
		if len(out) == 2 {
			break
		}
	}
	if len(out) == 0 {
		return "?"
	}
	return string(out)
}
