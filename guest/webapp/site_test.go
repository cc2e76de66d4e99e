package webapp

// Test helpers for the apps: loading one, serving it requests, reading
// its state, and posting garbage at it.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// testdata is testdata/<name>.json.
func testdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// loadApp builds app name from testdata/<name>.json.
func loadApp(t *testing.T, name string) (App, []byte) {
	t.Helper()
	data := testdata(t, name)
	a, err := New(name, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a, data
}

// wacDo serves one request.
func wacDo(a App, method, path string, body string) *httptest.ResponseRecorder {
	var r *http.Request
	if body != "" || method == http.MethodPost {
		r = httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, path, nil)
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, r)
	return w
}

// wacGet fetches a page and wants status want.
func wacGet(t *testing.T, a App, path string, want int) string {
	t.Helper()
	w := wacDo(a, http.MethodGet, path, "")
	if w.Code != want {
		t.Fatalf("GET %s: %d, want %d\n%s", path, w.Code, want, wacTClip(w.Body.String()))
	}
	return w.Body.String()
}

// wacPost posts a form and wants status want; it returns the response.
func wacPost(t *testing.T, a App, path string, f url.Values, want int) *httptest.ResponseRecorder {
	t.Helper()
	w := wacDo(a, http.MethodPost, path, f.Encode())
	if w.Code != want {
		t.Fatalf("POST %s %v: %d, want %d\n%s", path, f, w.Code, want, wacTClip(w.Body.String()))
	}
	return w
}

func wacTClip(s string) string {
	if len(s) > 3000 {
		return s[:3000] + "…"
	}
	return s
}

// appState is an app's State (which must be JSON), decoded into v
// unless v is nil.
func appState(t *testing.T, a App, v any) []byte {
	t.Helper()
	b, err := a.State()
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("state is not JSON: %s", b)
	}
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// wacSame fails unless the state is still before.
func wacSame(t *testing.T, a App, before []byte, what string) {
	t.Helper()
	if after := appState(t, a, nil); !bytes.Equal(before, after) {
		t.Fatalf("%s changed the state:\nbefore %s\nafter  %s", what, wacTClip(string(before)), wacTClip(string(after)))
	}
}

// roundTrip checks that New(data, State) serves the same State.
func roundTrip(t *testing.T, name string, data []byte, a App) {
	t.Helper()
	s1 := appState(t, a, nil)
	b, err := New(name, data, s1)
	if err != nil {
		t.Fatalf("resume: %v", err)
	}
	s2 := appState(t, b, nil)
	if !bytes.Equal(s1, s2) {
		t.Fatalf("round trip differs:\n%s\n%s", wacTClip(string(s1)), wacTClip(string(s2)))
	}
}

// wacLastLog is the last log entry's action and fields.
func wacLastLog(t *testing.T, a App) Event {
	t.Helper()
	var s struct {
		Log []Event `json:"log"`
	}
	appState(t, a, &s)
	if len(s.Log) == 0 {
		t.Fatal("empty log")
	}
	return s.Log[len(s.Log)-1]
}

// wacGarbage is a set of hostile form bodies.
func wacGarbage() []string {
	huge := strings.Repeat("x", MaxBody+10)
	long := strings.Repeat("y", MaxField+1)
	return []string{
		"",
		"a=b&c=d",
		"%zz%%%",
		"title=" + long,
		"body=" + huge,
		"name=%00%01&email=%ff%fe&role=%00&status=%00&tag=%00&title=%00&date=%00&start=%00&end=%00",
		"id=../../etc/passwd&slug=..%2F..&label=%3Cscript%3E&confirm=no",
		"date=2026-02-30&start=25:00&end=-1:00&room=nowhere&attendees=%3Cx%3E",
		"session_timeout_minutes=999999999999999999999&max_upload_mb=-5",
	}
}

// wacHostile posts garbage to each of posts and sends wrong methods to
// each of posts and gets; every answer must be a 4xx and the state must
// not change. gets are also fetched (GET) with hostile query strings: no
// 5xx, no change.
func wacHostile(t *testing.T, a App, posts, gets []string) {
	t.Helper()
	before := appState(t, a, nil)
	for _, p := range posts {
		for _, body := range wacGarbage() {
			w := wacDo(a, http.MethodPost, p, body)
			if w.Code < 400 || w.Code > 499 {
				t.Errorf("POST %s (%d bytes of garbage): %d, want 4xx", p, len(body), w.Code)
			}
		}
		// A body that is not a form.
		r := httptest.NewRequest(http.MethodPost, p, strings.NewReader(`{"json":true}`))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		a.ServeHTTP(w, r)
		if w.Code < 400 || w.Code > 499 {
			t.Errorf("POST %s (JSON): %d, want 4xx", p, w.Code)
		}
	}
	for _, p := range append(append([]string{}, posts...), gets...) {
		for _, m := range []string{http.MethodPut, http.MethodDelete, http.MethodPatch, "BREW"} {
			if w := wacDo(a, m, p, "x=1"); w.Code < 400 || w.Code > 499 {
				t.Errorf("%s %s: %d, want 4xx", m, p, w.Code)
			}
		}
	}
	for _, p := range gets {
		for _, q := range []string{"", "?q=%3Cscript%3Ealert(7)%3C/script%3E&tag=%00&rev=-1&date=9999-99-99&sort=%27&dir=x&flash=%3Cb%3E",
			"?title=" + strings.Repeat("z", 5000) + "&start=99:99&role=root&status=gone&label=" + strings.Repeat("%ff", 100)} {
			sep := q
			if strings.Contains(p, "?") && strings.HasPrefix(q, "?") {
				sep = "&" + q[1:]
			}
			w := wacDo(a, http.MethodGet, p+sep, "")
			if w.Code >= 500 {
				t.Errorf("GET %s%s: %d", p, wacShort(sep), w.Code)
			}
			if strings.Contains(w.Body.String(), "<script>alert(7)") {
				t.Errorf("GET %s: unescaped input in the page", p)
			}
		}
	}
	wacSame(t, a, before, "hostile requests")
}

func wacShort(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// wacConcurrent hammers the app from several goroutines (for -race).
func wacConcurrent(t *testing.T, a App, gets []string, post func(i int)) {
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				wacDo(a, http.MethodGet, gets[(i+j)%len(gets)], "")
				if post != nil {
					post(i*10 + j)
				}
				if _, err := a.State(); err != nil {
					t.Error(err)
				}
			}
		}(i)
	}
	wg.Wait()
}

// kitDo serves one request; a non-nil form is posted urlencoded.
func kitDo(a App, method, path string, form url.Values) *httptest.ResponseRecorder {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, path, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, r)
	return w
}

// kitPost posts f to path and wants a 303.
func kitPost(t *testing.T, a App, path string, f url.Values) string {
	t.Helper()
	w := kitDo(a, "POST", path, f)
	if w.Code != http.StatusSeeOther {
		t.Fatalf("POST %s %v: %d, want 303\n%s", path, f, w.Code, kitText1(w.Body.String()))
	}
	return w.Header().Get("Location")
}

// kitGet gets path and wants code; it returns the page.
func kitGet(t *testing.T, a App, path string, code int) string {
	t.Helper()
	w := kitDo(a, "GET", path, nil)
	if w.Code != code {
		t.Fatalf("GET %s: %d, want %d\n%s", path, w.Code, code, kitText1(w.Body.String()))
	}
	return w.Body.String()
}

var kitTags = regexp.MustCompile(`(?s)<style.*?</style>|<[^>]*>`)

// kitText1 is a page's text, squeezed (for failure messages).
func kitText1(page string) string {
	s := strings.Join(strings.Fields(kitTags.ReplaceAllString(page, " ")), " ")
	if len(s) > 1500 {
		s = s[:1500]
	}
	return s
}

// kitOffline checks a page loads nothing from elsewhere.
func kitOffline(t *testing.T, path, page string) {
	t.Helper()
	for _, bad := range []string{"://", "src=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("%s: page has %q", path, bad)
		}
	}
}

// kitHostile posts and gets garbage at each path: every answer must be
// 4xx and the state must not change.
func kitHostile(t *testing.T, a App, paths []string, forms []url.Values, getOK map[string]bool) {
	t.Helper()
	before := appState(t, a, nil)
	check := func(what string, code int) {
		t.Helper()
		if code < 400 || code > 499 {
			t.Errorf("%s: %d, want 4xx", what, code)
		}
	}
	huge := strings.Repeat("x", MaxBody+10)
	long := strings.Repeat("y", MaxField+1)
	for _, p := range paths {
		for _, f := range forms {
			check("POST "+p+" "+f.Encode(), kitDo(a, "POST", p, f).Code)
		}
		for _, m := range []string{"GET", "PUT", "DELETE", "PATCH"} {
			if m == "GET" && getOK[p] {
				continue
			}
			w := kitDo(a, m, p, url.Values{"qty": {"1"}})
			check(m+" "+p, w.Code)
		}
		r := httptest.NewRequest("POST", p, strings.NewReader("qty="+huge))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w := httptest.NewRecorder()
		a.ServeHTTP(w, r)
		check("huge POST "+p, w.Code)
		check("long field POST "+p, kitDo(a, "POST", p, url.Values{"body": {long}, "qty": {"1"}}).Code)
		r = httptest.NewRequest("POST", p, strings.NewReader("%zz=%%&qty=1"))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		w = httptest.NewRecorder()
		a.ServeHTTP(w, r)
		check("bad encoding POST "+p, w.Code)
		r = httptest.NewRequest("POST", p, strings.NewReader("--x\r\n"))
		r.Header.Set("Content-Type", "multipart/form-data; boundary=x")
		w = httptest.NewRecorder()
		a.ServeHTTP(w, r)
		check("multipart POST "+p, w.Code)
	}
	if after := appState(t, a, nil); !bytes.Equal(before, after) {
		t.Fatalf("garbage changed the state; the log went from %d to %d bytes", len(before), len(after))
	}
}

func TestKitCents(t *testing.T) {
	for c, want := range map[int64]string{0: "$0.00", 5: "$0.05", 1234: "$12.34", 123456: "$1,234.56", 100000000: "$1,000,000.00", -250: "-$2.50"} {
		if got := formatCents(c); got != want {
			t.Errorf("formatCents(%d) = %q, want %q", c, got, want)
		}
	}
	for s, want := range map[string]int64{"25": 2500, "25.5": 2550, "$1,200.00": 120000, ".99": 99, "0": 0} {
		if got, ok := parseCents(s); !ok || got != want {
			t.Errorf("parseCents(%q) = %d %v, want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "abc", "1.234", "1e5", "-3", "12.", "99999999999999"} {
		if _, ok := parseCents(s); ok {
			t.Errorf("parseCents(%q) ok", s)
		}
	}
	for s, want := range map[string]bool{"a@b.co": true, "ada.park@example.com": true, "a@b": false, "a b@c.d": false, "@c.d": false, "a@@c.d": false, "a@c..d": false, "<a@b.c>": false} {
		if mailboxOK(s) != want {
			t.Errorf("mailboxOK(%q) != %v", s, want)
		}
	}
}

// fillLog fills an app's log to MaxLog, as if the agent had made that
// many changes.
func fillLog(j *journal) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for len(j.Log) < MaxLog {
		j.add("filler", nil)
	}
}
