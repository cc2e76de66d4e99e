package webapp

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
)

// kitLoad builds app name from testdata/name.json.
func kitLoad(t *testing.T, name string) App {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(name, data, nil)
	if err != nil {
		t.Fatal(err)
	}
	return a
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

func kitState1(t *testing.T, a App) []byte {
	t.Helper()
	b, err := a.State()
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("state is not JSON: %s", b)
	}
	return b
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

// kitRoundTrip checks State → New(data, state) → State is the identity.
func kitRoundTrip(t *testing.T, name string, a App) {
	t.Helper()
	data, err := os.ReadFile("testdata/" + name + ".json")
	if err != nil {
		t.Fatal(err)
	}
	s1 := kitState1(t, a)
	b, err := New(name, data, s1)
	if err != nil {
		t.Fatal(err)
	}
	if s2 := kitState1(t, b); !bytes.Equal(s1, s2) {
		t.Fatalf("round trip differs:\n%s\n%s", s1, s2)
	}
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
	before := kitState1(t, a)
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
	if after := kitState1(t, a); !bytes.Equal(before, after) {
		t.Fatalf("garbage changed the state; the log went from %d to %d bytes", len(before), len(after))
	}
}

func TestKitCents(t *testing.T) {
	for c, want := range map[int64]string{0: "$0.00", 5: "$0.05", 1234: "$12.34", 123456: "$1,234.56", 100000000: "$1,000,000.00", -250: "-$2.50"} {
		if got := kitCents(c); got != want {
			t.Errorf("kitCents(%d) = %q, want %q", c, got, want)
		}
	}
	for s, want := range map[string]int64{"25": 2500, "25.5": 2550, "$1,200.00": 120000, ".99": 99, "0": 0} {
		if got, ok := kitParseCents(s); !ok || got != want {
			t.Errorf("kitParseCents(%q) = %d %v, want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "abc", "1.234", "1e5", "-3", "12.", "99999999999999"} {
		if _, ok := kitParseCents(s); ok {
			t.Errorf("kitParseCents(%q) ok", s)
		}
	}
	for s, want := range map[string]bool{"a@b.co": true, "ada.park@example.com": true, "a@b": false, "a b@c.d": false, "@c.d": false, "a@@c.d": false, "a@c..d": false, "<a@b.c>": false} {
		if kitEmailOK(s) != want {
			t.Errorf("kitEmailOK(%q) != %v", s, want)
		}
	}
}
