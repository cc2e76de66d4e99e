package webapp

// The helpers every app is written on: an answer built under the app's
// lock and written after it is released (so a slow client never holds the
// app), route registration that takes the lock and bounds posts, page
// rendering, field validators, pagination and small formatting helpers.

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

// siteStyle is how an app dresses its answers.
type siteStyle struct {
	csp            string // the Content-Security-Policy of every page
	guardRedirects bool   // redirects carry the security headers too
	errBody        string // the body of a page whose template failed
}

// plainStyle (shop, mail) keeps every page offline and script-free:
// nothing but the page itself and its inline style may load, forms post
// only to the app, and no one may frame it.
var plainStyle = siteStyle{
	csp:            "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
	guardRedirects: true,
	errBody:        "<!doctype html><title>Error</title><p>page error</p>",
}

// scriptStyle (wiki, admin, calendar) also allows the pages' inline
// scripts.
var scriptStyle = siteStyle{
	csp:     "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; form-action 'self'; img-src data:",
	errBody: "page error",
}

// answer is a handler's answer: a page (status and body) or a redirect.
// Handlers build it with the app's lock held; it is written after the
// lock is released.
type answer struct {
	status   int
	body     []byte
	location string // a path on this site; a 303 when set
	failed   bool   // the page's template failed: a 500 with the style's error body
}

// render executes t's "base" template with data into a page.
func render(t *template.Template, status int, data any) answer {
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "base", data); err != nil {
		return answer{status: http.StatusInternalServerError, failed: true}
	}
	return answer{status: status, body: b.Bytes()}
}

// redirect answers with a 303 to a local path the app built itself
// (never one taken from the request: no open redirects).
func redirect(path string) answer {
	if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") || strings.HasPrefix(path, "/\\") {
		path = "/"
	}
	return answer{status: http.StatusSeeOther, location: path}
}

// router registers an app's routes: each handler runs with mu held and
// its answer is written after; a post's form is read (bounded) before the
// lock is taken.
type router struct {
	mux   *http.ServeMux
	mu    *sync.Mutex
	style siteStyle
	// repeatOK, when set, says whether form field k may come n (> 1)
	// times; a post repeating another is refused with 400. Unset: any
	// field may repeat.
	repeatOK func(k string, n int) bool
	// full and fail, when set: a post is refused with fail's 429 page
	// once the log is full (mu held).
	full func() bool
	fail func(status int, msg string) answer
}

func newRouter(mu *sync.Mutex, style siteStyle) router {
	return router{mux: http.NewServeMux(), mu: mu, style: style}
}

func (s *router) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// send writes an answer.
func (s *router) send(w http.ResponseWriter, r *http.Request, k answer) {
	h := w.Header()
	if k.location != "" {
		if s.style.guardRedirects {
			s.guard(h)
		}
		seeOther(w, r, k.location)
		return
	}
	s.guard(h)
	h.Set("Content-Type", "text/html; charset=utf-8")
	body := k.body
	if k.failed {
		body = []byte(s.style.errBody)
	}
	w.WriteHeader(k.status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func (s *router) guard(h http.Header) {
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", s.style.csp)
}

func (s *router) run(w http.ResponseWriter, r *http.Request, h func() answer) {
	var resp answer
	func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		resp = h()
	}()
	s.send(w, r, resp)
}

// get serves GET (and HEAD) of pattern.
func (s *router) get(pattern string, h func(r *http.Request) answer) {
	s.handle("GET "+pattern, h)
}

// handle serves pattern as given (any method, unless it names one).
func (s *router) handle(pattern string, h func(r *http.Request) answer) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		s.run(w, r, func() answer { return h(r) })
	})
}

// post serves POST of pattern.
func (s *router) post(pattern string, h func(r *http.Request, f url.Values) answer) {
	s.form("POST "+pattern, h)
}

// form serves pattern as given with a form handler: a request that is not
// a POST is refused with 405 (see form).
func (s *router) form(pattern string, h func(r *http.Request, f url.Values) answer) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		f, ok := form(w, r)
		if !ok {
			return
		}
		if s.repeatOK != nil {
			for k, vs := range f {
				if len(vs) > 1 && !s.repeatOK(k, len(vs)) {
					http.Error(w, "repeated field", http.StatusBadRequest)
					return
				}
			}
		}
		s.run(w, r, func() answer {
			if s.full != nil && s.full() {
				return s.fail(http.StatusTooManyRequests, "Too many changes: this site accepts no more.")
			}
			return h(r, f)
		})
	})
}

// notFound serves every other path with the app's 404 page (fail's).
func (s *router) notFound() {
	s.handle("/", func(*http.Request) answer {
		return s.fail(http.StatusNotFound, "The page you asked for does not exist.")
	})
}

// firstErr is the first of the fields in order with an error in errs
// (the field a re-shown form focuses); "" for none.
func firstErr(errs map[string]string, order ...string) string {
	for _, k := range order {
		if errs[k] != "" {
			return k
		}
	}
	return ""
}

// failData is an error page's data: the status, its text and msg.
func failData(status int, msg string) map[string]any {
	return map[string]any{"Status": status, "Text": http.StatusText(status), "Msg": msg}
}

// parsePages parses each page template under dir of fsys together with
// dir/base.html into a set of its own, keyed by the page's file name
// without ".html": each page defines "content", base.html "base". A
// broken page is a programming error, found by the tests: it panics.
func parsePages(fsys fs.FS, dir string, funcs template.FuncMap) map[string]*template.Template {
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

// person is the signed-in user an app's data names.
type person struct {
	Name  string `json:"name"`
	Email string `json:"email"`
}

// crumb is one step of a page's breadcrumb trail ("" URL: the page itself).
type crumb struct{ Name, URL string }

// --- validators ---

// cleanLine trims a one-line field and checks it: "" when fine, else the
// message to show beside it. Empty is the caller's business.
func cleanLine(s string, max int) (string, string) {
	s = strings.TrimSpace(s)
	if !utf8.ValidString(s) {
		return "", "This field contains characters we can’t accept."
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return "", "This field contains characters we can’t accept."
		}
	}
	if utf8.RuneCountInString(s) > max {
		return "", "This is too long (at most " + strconv.Itoa(max) + " characters)."
	}
	return s, ""
}

// cleanText checks a multi-line field the way cleanLine checks one line
// (newlines and tabs allowed; line endings normalized to \n).
func cleanText(s string, max int) (string, string) {
	if !utf8.ValidString(s) {
		return "", "The text contains characters we can’t accept."
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	for _, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return "", "The text contains characters we can’t accept."
		}
	}
	if utf8.RuneCountInString(s) > max {
		return "", "The text is too long (at most " + strconv.Itoa(max) + " characters)."
	}
	return strings.TrimRight(s, " \t\n"), ""
}

// lineOK reports whether s is one line of printable text of at most max
// runes (valid UTF-8, no control characters or line separators).
func lineOK(s string, max int) bool {
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

// textOK reports whether s is multi-line text: valid UTF-8 with no
// control characters other than newline, carriage return and tab.
func textOK(s string) bool {
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

// mailboxOK reports whether s looks like a plain address
// (local@domain.tld) of any printable characters: what the shop's and
// mail's forms take.
func mailboxOK(s string) bool {
	if len(s) > 254 || strings.ContainsAny(s, " \t\r\n<>(),;:\"[]\\") {
		return false
	}
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") {
		return false
	}
	if !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.Contains(domain, "..") {
		return false
	}
	for _, r := range s {
		if r < 0x21 || r == 0x7f || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// emailOK reports whether s is an ASCII email address (letters, digits
// and .%+-_' before the @, a dotted host name after it): what the admin's
// and calendar's forms take.
func emailOK(s string) bool {
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

// idOK reports whether s may be an id in a URL path: 1 to 64 letters,
// digits, '-' or '_'.
func idOK(s string) bool {
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

// tokenOK reports whether s is 1 to max ASCII letters, digits, '.', '_'
// or '-' (a sku, a message id).
func tokenOK(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// parseFlag reads a checkbox-like value: true for on/1/true/yes, false for
// off/0/false/no, ok false for anything else.
func parseFlag(s string) (v, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "on", "1", "true", "yes":
		return true, true
	case "off", "0", "false", "no", "":
		return false, true
	}
	return false, false
}

// --- data ---

// jsonID is an id in an app's data: a JSON number, or a string of digits.
type jsonID int

func (k *jsonID) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	v, err := strconv.Atoi(n.String())
	if err != nil || v < 0 || v > 1e9 {
		return fmt.Errorf("id %s is not a whole number from 0 to 1e9", b)
	}
	*k = jsonID(v)
	return nil
}

// jsonStr is a string in an app's data that may also be given as a number.
type jsonStr string

func (k *jsonStr) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*k = jsonStr(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a string or a number, have %s", b)
	}
	*k = jsonStr(n.String())
	return nil
}

// freeID is the id for a new item: one past the largest id of items
// (1 for none), then past any id in taken.
func freeID[T any](items []T, id func(T) int, taken map[int]bool) int {
	n := 1
	for _, it := range items {
		if id(it) >= n {
			n = id(it) + 1
		}
	}
	for taken[n] {
		n++
	}
	return n
}

// pathItem is the item of items whose id is the request's {id}; the
// zero T (nil) when there is none.
func pathItem[T any](r *http.Request, items []T, id func(T) int) (none T) {
	n, err := strconv.Atoi(r.PathValue("id"))
	if err != nil {
		return none
	}
	for _, it := range items {
		if id(it) == n {
			return it
		}
	}
	return none
}

// --- dates ---

const dateLayout = "2006-01-02"

// todayDate is epoch's date.
var todayDate = epoch.Format(dateLayout)

// parseDate parses a YYYY-MM-DD date between the years 1970 and 2199.
func parseDate(s string) (time.Time, bool) {
	if len(s) != 10 {
		return time.Time{}, false
	}
	t, err := time.Parse(dateLayout, s)
	if err != nil || t.Year() < 1970 || t.Year() > 2199 {
		return time.Time{}, false
	}
	return t, true
}

// relDate says how long before epoch date d (YYYY-MM-DD, or YYYY-MM-DD
// HH:MM) was: "today", "yesterday", "3 days ago", or the date itself.
func relDate(d string) string {
	if len(d) < 10 {
		return d
	}
	t, ok := parseDate(d[:10])
	if !ok {
		return d
	}
	today, _ := parseDate(todayDate)
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

// --- money ---

// formatCents formats integer cents as dollars: 123456 -> "$1,234.56".
func formatCents(c int64) string {
	neg := c < 0
	if neg {
		c = -c
	}
	d := strconv.FormatInt(c/100, 10)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	b.WriteByte('$')
	for i, ch := range d {
		if i > 0 && (len(d)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	b.WriteByte('.')
	cc := c % 100
	b.WriteByte(byte('0' + cc/10))
	b.WriteByte(byte('0' + cc%10))
	return b.String()
}

// parseCents reads a dollar amount a person types ("25", "25.5",
// "$1,200.00") as cents; false if it is not one (or is absurdly large).
func parseCents(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	s = strings.TrimPrefix(s, "$")
	s = strings.ReplaceAll(s, ",", "")
	if s == "" || len(s) > 12 {
		return 0, false
	}
	whole, frac, dot := strings.Cut(s, ".")
	if whole == "" {
		whole = "0"
	}
	if dot && (frac == "" || len(frac) > 2) {
		return 0, false
	}
	for _, r := range whole + frac {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > 1e9 {
		return 0, false
	}
	var f int64
	if frac != "" {
		f, _ = strconv.ParseInt(frac, 10, 64)
		if len(frac) == 1 {
			f *= 10
		}
	}
	return w*100 + f, true
}

// --- lists ---

// pager is one page of a paginated list, with the links to its pages.
type pager struct {
	Page, Pages, First, Last, Total int // First/Last: 1-based item numbers shown
	Prev, Next                      string
	Links                           []pageLink
}

type pageLink struct {
	N       int
	URL     string
	Current bool
}

// paginate picks page pageArg (1-based, clamped) of total items, per a
// page, linking base with its query q plus page=N. lo/hi index the items
// shown.
func paginate(total, per int, pageArg, base string, q url.Values) (p pager, lo, hi int) {
	p.Total = total
	p.Pages = (total + per - 1) / per
	if p.Pages < 1 {
		p.Pages = 1
	}
	p.Page, _ = strconv.Atoi(pageArg)
	if p.Page < 1 {
		p.Page = 1
	}
	if p.Page > p.Pages {
		p.Page = p.Pages
	}
	lo = (p.Page - 1) * per
	hi = min(lo+per, total)
	if total > 0 {
		p.First, p.Last = lo+1, hi
	}
	link := func(n int) string {
		v := url.Values{}
		for k, vs := range q {
			if k != "page" && k != "msg" {
				v[k] = vs
			}
		}
		if n > 1 {
			v.Set("page", strconv.Itoa(n))
		}
		if e := v.Encode(); e != "" {
			return base + "?" + e
		}
		return base
	}
	if p.Page > 1 {
		p.Prev = link(p.Page - 1)
	}
	if p.Page < p.Pages {
		p.Next = link(p.Page + 1)
	}
	if p.Pages > 1 {
		for n := 1; n <= p.Pages; n++ {
			if n == 1 || n == p.Pages || (n >= p.Page-2 && n <= p.Page+2) {
				p.Links = append(p.Links, pageLink{N: n, URL: link(n), Current: n == p.Page})
			} else if len(p.Links) > 0 && p.Links[len(p.Links)-1].N != 0 {
				p.Links = append(p.Links, pageLink{}) // an ellipsis
			}
		}
	}
	return p, lo, hi
}

// orEmpty is s, or an empty slice for nil (so that JSON has [], not null).
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// values copies what ps points to (a snapshot for State).
func values[T any](ps []*T) []T {
	out := make([]T, len(ps))
	for i, p := range ps {
		out[i] = *p
	}
	return out
}

// clip shortens s to at most n runes, with an ellipsis.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:n])) + "…"
}

// fnvHash is a small stable hash (FNV-1a) for picking colours and
// instance-specific numbers from data.
func fnvHash(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}

// --- template functions ---

// plainFuncs are the template functions of the shop's and mail's pages.
var plainFuncs = template.FuncMap{
	"money": formatCents,
	"mul":   func(n int, c int64) int64 { return int64(n) * c },
	"initial": func(s string) string { // an avatar's letter
		for _, r := range s {
			if unicode.IsLetter(r) || unicode.IsDigit(r) {
				return strings.ToUpper(string(r))
			}
		}
		return "?"
	},
	"ext": func(name string) string { // a file's type badge: "PDF"
		if i := strings.LastIndexByte(name, '.'); i >= 0 && len(name)-i <= 6 && i < len(name)-1 {
			return strings.ToUpper(name[i+1:])
		}
		return "FILE"
	},
	"plural": func(n int, one, many string) string {
		if n == 1 {
			return one
		}
		return many
	},
}

// officeFuncs are the template functions of the wiki's, admin's and
// calendar's pages.
func officeFuncs() template.FuncMap {
	return template.FuncMap{"ago": relDate, "initials": initials, "plural": pluralize}
}

// pluralize is "1 seat", "4 seats".
func pluralize(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// initials is up to two initials of a name, upper-cased.
func initials(name string) string {
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
