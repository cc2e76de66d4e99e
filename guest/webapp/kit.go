package webapp

// Small page helpers the shop and mail apps share: buffered rendering (a
// page is built while the app's lock is held and written after it is
// released, so a slow client never holds the lock), money and form-field
// checks, and pagination.

import (
	"bytes"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// kitCSP keeps every page offline: nothing but the page itself and its
// inline style may load, and forms post only to the app.
const kitCSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// kitResp is a response built under the app's lock and sent after it.
type kitResp struct {
	code     int
	body     []byte
	location string // a local path: a 303 to it
}

// kitPage executes t's "base" template with data into a response.
func kitPage(t *template.Template, code int, data any) kitResp {
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "base", data); err != nil {
		return kitResp{code: http.StatusInternalServerError, body: []byte("<!doctype html><title>Error</title><p>page error</p>")}
	}
	return kitResp{code: code, body: b.Bytes()}
}

// kitRedirect answers with a 303 to a local path the app built itself
// (never one taken from the request: no open redirects).
func kitRedirect(path string) kitResp {
	if !strings.HasPrefix(path, "/") || strings.HasPrefix(path, "//") || strings.HasPrefix(path, "/\\") {
		path = "/"
	}
	return kitResp{code: http.StatusSeeOther, location: path}
}

// send writes the response.
func (k kitResp) send(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", kitCSP)
	if k.location != "" {
		seeOther(w, r, k.location)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(k.code)
	if r.Method != http.MethodHead {
		w.Write(k.body)
	}
}

// kitCents formats integer cents as dollars: 123456 -> "$1,234.56".
func kitCents(c int64) string {
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

// kitParseCents reads a dollar amount a person types ("25", "25.5",
// "$1,200.00") as cents; false if it is not one (or is absurdly large).
func kitParseCents(s string) (int64, bool) {
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

// kitEmailOK reports whether s looks like a plain address (local@domain.tld).
func kitEmailOK(s string) bool {
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

// kitText trims a one-line field and checks it: "" when fine, else the
// message to show beside it. Empty is the caller's business.
func kitText(s string, max int) (string, string) {
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

// kitBody checks a multi-line field the way kitText checks one line
// (newlines and tabs allowed; line endings normalized to \n).
func kitBody(s string, max int) (string, string) {
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

// kitPager is one page of a paginated list, with the links to its pages.
type kitPager struct {
	Page, Pages, First, Last, Total int // First/Last: 1-based item numbers shown
	Prev, Next                      string
	Links                           []kitPageLink
}

type kitPageLink struct {
	N       int
	URL     string
	Current bool
}

// kitPaginate picks page pageArg (1-based, clamped) of total items,
// per a page, linking base with its query q plus page=N. lo/hi index the
// items shown.
func kitPaginate(total, per int, pageArg, base string, q url.Values) (p kitPager, lo, hi int) {
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
				p.Links = append(p.Links, kitPageLink{N: n, URL: link(n), Current: n == p.Page})
			} else if len(p.Links) > 0 && p.Links[len(p.Links)-1].N != 0 {
				p.Links = append(p.Links, kitPageLink{}) // an ellipsis
			}
		}
	}
	return p, lo, hi
}

// kitHash is a small stable hash (FNV-1a) for picking colours and
// instance-specific numbers from data.
func kitHash(b []byte) uint32 {
	h := uint32(2166136261)
	for _, c := range b {
		h ^= uint32(c)
		h *= 16777619
	}
	return h
}

// kitFuncs are the template functions both apps' pages use.
var kitFuncs = template.FuncMap{
	"money": kitCents,
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

// kitParse parses each page of dir (dir/NAME.html) with dir/base.html into
// its own template set: each page defines "content", base.html "base". A
// broken page is a programming error, found by the tests: it panics.
func kitParse(fsys fs.FS, dir string, pages ...string) map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, p := range pages {
		out[p] = template.Must(template.New(p).Funcs(kitFuncs).ParseFS(fsys, dir+"/base.html", dir+"/"+p+".html"))
	}
	return out
}

// kitCrumb is one step of a page's breadcrumb trail ("" URL: the page itself).
type kitCrumb struct{ Name, URL string }
