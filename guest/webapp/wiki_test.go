package webapp

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

type wikiTestState struct {
	Pages []struct {
		Slug      string   `json:"slug"`
		Title     string   `json:"title"`
		Body      string   `json:"body"`
		Tags      []string `json:"tags"`
		Updated   string   `json:"updated"`
		Author    string   `json:"author"`
		Revisions int      `json:"revisions"`
		History   []struct {
			Rev int `json:"rev"`
		} `json:"history"`
	} `json:"pages"`
	Log []Event `json:"log"`
}

func wikiTestPage(t *testing.T, a App, slug string) (int, *wikiTestState) {
	t.Helper()
	var s wikiTestState
	appState(t, a, &s)
	for i, p := range s.Pages {
		if p.Slug == slug {
			return i, &s
		}
	}
	return -1, &s
}

func TestWikiPagesRender(t *testing.T) {
	a, _ := loadApp(t, "wiki")
	for _, p := range []string{"/", "/?tag=process", "/page/onboarding", "/page/onboarding?rev=1", "/history/onboarding",
		"/recent", "/search?q=laptop", "/search?q=tag:finance", "/search", "/new", "/new?title=VPN+Setup",
		"/edit/onboarding", "/rename/onboarding", "/tags/onboarding", "/tags/onboarding/remove?tag=hr", "/delete/onboarding"} {
		body := wacGet(t, a, p, http.StatusOK)
		if !strings.Contains(body, "Team Wiki") || !strings.Contains(body, `action="/search"`) {
			t.Errorf("%s: no header or search box", p)
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("%s: refers to an external resource", p)
		}
	}
	for _, p := range []string{"/page/nope", "/page/onboarding?rev=9", "/edit/nope", "/nope", "/tags/onboarding/remove?tag=zzz", "/history/nope"} {
		wacGet(t, a, p, http.StatusNotFound)
	}
	// Forms put focus where the keyboard paths say.
	focus := map[string]string{
		"/new?title=X":                   `id="title" name="title" value="X" maxlength="120" required autofocus`,
		"/edit/onboarding":               `id="body" name="body" rows="18" autofocus`,
		"/rename/onboarding":             `name="title" value="Onboarding" maxlength="120" required autofocus`,
		"/tags/onboarding?add=x":         `name="tag" value="x" autofocus`,
		"/tags/onboarding/remove?tag=hr": `type="submit" autofocus>Remove tag`,
		"/delete/onboarding":             `type="submit" autofocus>Delete page`,
		"/search?q=a":                    `value="a" placeholder="Search titles and text, or tag:name" aria-label="Search terms" autofocus`,
	}
	for p, want := range focus {
		if body := wacGet(t, a, p, http.StatusOK); !strings.Contains(body, want) || strings.Count(body, "autofocus") != 1 {
			t.Errorf("%s: want one autofocus, on %s", p, want)
		}
	}
	// Markup: headings, lists, bold, links (existing and missing).
	body := wacGet(t, a, "/page/onboarding", http.StatusOK)
	for _, want := range []string{"<h2>Week one</h2>", "<li>Pick up your laptop from <strong>IT</strong> on day one</li>",
		`<a class="wikilink" href="/page/expense-policy">Expense Policy</a>`,
		`<a class="wikilink" href="/page/security-checklist">security basics</a>`,
		`<a class="wikilink missing" href="/new?title=VPN+Setup"`} {
		if !strings.Contains(body, want) {
			t.Errorf("onboarding page lacks %s", want)
		}
	}
	if body := wacGet(t, a, "/page/release-process", http.StatusOK); !strings.Contains(body, "Pages that link here") || !strings.Contains(body, "Meeting notes February 2026") {
		t.Error("release process: no backlink")
	}
	if body := wacGet(t, a, "/search?q=LAPTOP", http.StatusOK); !strings.Contains(body, `href="/page/onboarding"`) || !strings.Contains(body, "<mark>laptop</mark>") {
		t.Error("search for laptop misses onboarding")
	}
	if body := wacGet(t, a, "/search?q=tag:finance", http.StatusOK); !strings.Contains(body, `href="/page/expense-policy"`) || strings.Contains(body, `<a class="t" href="/page/onboarding"`) {
		t.Error("tag search")
	}
}

func TestWikiCreate(t *testing.T) {
	a, data := loadApp(t, "wiki")
	before := appState(t, a, nil)
	for _, f := range []url.Values{
		{"title": {""}, "body": {"x"}},
		{"title": {"  "}},
		{"title": {"!!!"}},
		{"title": {"onboarding"}, "body": {"dup title, any case"}},
		{"title": {"Onboarding!"}, "body": {"same slug"}},
		{"title": {"Fine"}, "tags": {"good, bad tag!"}},
		{"title": {"Fine"}, "body": {"nul \x00 byte"}},
		{"title": {strings.Repeat("t", 121)}},
	} {
		w := wacPost(t, a, "/new", f, http.StatusUnprocessableEntity)
		if !strings.Contains(w.Body.String(), `class="err"`) {
			t.Errorf("%v: no inline error", f)
		}
	}
	if w := wacPost(t, a, "/new", url.Values{"title": {"Fine"}, "tags": {"ok, bad tag!"}}, http.StatusUnprocessableEntity); !strings.Contains(w.Body.String(), "Tag “bad tag!” is not valid") {
		t.Error("tag error message")
	}
	wacSame(t, a, before, "refused creates")

	w := wacPost(t, a, "/new", url.Values{"title": {"VPN Setup"}, "body": {"Install the client.\r\n\r\n- Step **one**"}, "tags": {"IT, Security, it"}}, http.StatusSeeOther)
	if loc := w.Header().Get("Location"); loc != "/page/vpn-setup?flash=created" {
		t.Fatalf("redirect to %q", loc)
	}
	i, s := wikiTestPage(t, a, "vpn-setup")
	if i < 0 {
		t.Fatal("no page vpn-setup")
	}
	p := s.Pages[i]
	if p.Title != "VPN Setup" || p.Body != "Install the client.\n\n- Step **one**" || strings.Join(p.Tags, ",") != "it,security" ||
		p.Revisions != 1 || p.Author != "Dana Reyes" || p.Updated != "2026-03-02" {
		t.Errorf("created page %+v", p)
	}
	if e := wacLastLog(t, a); e.Action != "create_page" || e.Fields["slug"] != "vpn-setup" || e.Fields["tags"] != "it,security" {
		t.Errorf("log %+v", e)
	}
	if body := wacGet(t, a, "/page/vpn-setup?flash=created", http.StatusOK); !strings.Contains(body, "Page created.") {
		t.Error("no flash")
	}
	if body := wacGet(t, a, "/page/onboarding", http.StatusOK); !strings.Contains(body, `<a class="wikilink" href="/page/vpn-setup">VPN Setup</a>`) {
		t.Error("link to the new page is still missing")
	}
	if body := wacGet(t, a, "/recent", http.StatusOK); strings.Index(body, "VPN Setup") > strings.Index(body, "Release Process") {
		t.Error("recent changes: the new page is not first")
	}
	roundTrip(t, "wiki", data, a)
}

func TestWikiEditRenameTags(t *testing.T) {
	a, data := loadApp(t, "wiki")
	// No change: no log entry.
	wacPost(t, a, "/edit/onboarding", url.Values{"title": {"Onboarding"}, "body": {wikiTestBody(t, a, "onboarding")}, "tags": {"process, hr"}}, http.StatusSeeOther)
	var s wikiTestState
	appState(t, a, &s)
	if len(s.Log) != 0 {
		t.Fatalf("no-op edit logged %v", s.Log)
	}
	before := appState(t, a, nil)
	wacPost(t, a, "/edit/onboarding", url.Values{"title": {"Expense policy"}, "body": {"x"}}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/edit/onboarding", url.Values{"body": {"x"}}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/edit/nope", url.Values{"title": {"Nope"}, "body": {"x"}}, http.StatusNotFound)
	wacSame(t, a, before, "refused edits")

	w := wacPost(t, a, "/edit/onboarding", url.Values{"title": {"Onboarding"}, "body": {"New text."}, "tags": {"hr"}, "summary": {"Trimmed"}}, http.StatusSeeOther)
	if loc := w.Header().Get("Location"); loc != "/page/onboarding?flash=saved" {
		t.Errorf("redirect %q", loc)
	}
	i, st := wikiTestPage(t, a, "onboarding")
	if p := st.Pages[i]; p.Body != "New text." || strings.Join(p.Tags, ",") != "hr" || p.Revisions != 2 || len(p.History) != 2 || p.Author != "Dana Reyes" {
		t.Errorf("edited %+v", p)
	}
	if e := wacLastLog(t, a); e.Action != "edit_page" || e.Fields["body"] != "New text." || e.Fields["summary"] != "Trimmed" {
		t.Errorf("log %+v", e)
	}
	if body := wacGet(t, a, "/history/onboarding", http.StatusOK); !strings.Contains(body, "Trimmed") || !strings.Contains(body, "?rev=1") {
		t.Error("history")
	}
	if body := wacGet(t, a, "/page/onboarding?rev=1", http.StatusOK); !strings.Contains(body, "old revision") || !strings.Contains(body, "Week one") {
		t.Error("old revision view")
	}

	// Rename.
	before = appState(t, a, nil)
	wacPost(t, a, "/rename/onboarding", url.Values{"title": {"Expense Policy"}}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/rename/onboarding", url.Values{"title": {"Onboarding"}}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/rename/onboarding", url.Values{"title": {""}}, http.StatusUnprocessableEntity)
	wacSame(t, a, before, "refused renames")
	w = wacPost(t, a, "/rename/onboarding", url.Values{"title": {"New Hire Guide"}}, http.StatusSeeOther)
	if loc := w.Header().Get("Location"); loc != "/page/new-hire-guide?flash=renamed" {
		t.Errorf("redirect %q", loc)
	}
	if i, _ := wikiTestPage(t, a, "onboarding"); i >= 0 {
		t.Error("old slug still there")
	}
	i, st = wikiTestPage(t, a, "new-hire-guide")
	if i < 0 || st.Pages[i].Title != "New Hire Guide" || st.Pages[i].Revisions != 3 {
		t.Fatalf("renamed %+v", st.Pages)
	}
	if e := wacLastLog(t, a); e.Action != "rename_page" || e.Fields["from"] != "onboarding" || e.Fields["slug"] != "new-hire-guide" {
		t.Errorf("log %+v", e)
	}
	wacGet(t, a, "/page/onboarding", http.StatusNotFound)

	// Tags.
	before = appState(t, a, nil)
	wacPost(t, a, "/tags/new-hire-guide", url.Values{"tag": {"hr"}}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/tags/new-hire-guide", url.Values{"tag": {""}}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/tags/new-hire-guide", url.Values{"tag": {"<b>"}}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/tags/new-hire-guide/remove", url.Values{"tag": {"finance"}}, http.StatusUnprocessableEntity)
	wacSame(t, a, before, "refused tag changes")
	wacPost(t, a, "/tags/new-hire-guide", url.Values{"tag": {"People Ops"}}, http.StatusSeeOther)
	if e := wacLastLog(t, a); e.Action != "add_tag" || e.Fields["tag"] != "people-ops" {
		t.Errorf("log %+v", e)
	}
	wacPost(t, a, "/tags/new-hire-guide/remove", url.Values{"tag": {"hr"}}, http.StatusSeeOther)
	if e := wacLastLog(t, a); e.Action != "remove_tag" || e.Fields["tag"] != "hr" {
		t.Errorf("log %+v", e)
	}
	i, st = wikiTestPage(t, a, "new-hire-guide")
	if strings.Join(st.Pages[i].Tags, ",") != "people-ops" || st.Pages[i].Revisions != 5 {
		t.Errorf("tags %+v", st.Pages[i])
	}
	if body := wacGet(t, a, "/tags/new-hire-guide?flash=tagremoved", http.StatusOK); !strings.Contains(body, "Tag removed.") {
		t.Error("no flash")
	}

	// Delete needs the confirmation field.
	before = appState(t, a, nil)
	wacPost(t, a, "/delete/expense-policy", url.Values{}, http.StatusUnprocessableEntity)
	wacSame(t, a, before, "unconfirmed delete")
	wacPost(t, a, "/delete/expense-policy", url.Values{"confirm": {"yes"}}, http.StatusSeeOther)
	if i, _ := wikiTestPage(t, a, "expense-policy"); i >= 0 {
		t.Error("not deleted")
	}
	if e := wacLastLog(t, a); e.Action != "delete_page" || e.Fields["slug"] != "expense-policy" {
		t.Errorf("log %+v", e)
	}
	if body := wacGet(t, a, "/page/new-hire-guide", http.StatusOK); strings.Contains(body, "Expense") {
		t.Error("edited page still shows old text")
	}
	roundTrip(t, "wiki", data, a)
}

func wikiTestBody(t *testing.T, a App, slug string) string {
	i, s := wikiTestPage(t, a, slug)
	if i < 0 {
		t.Fatalf("no page %s", slug)
	}
	return s.Pages[i].Body
}

func TestWikiEscapes(t *testing.T) {
	a, _ := loadApp(t, "wiki")
	evil := "<script>alert(1)</script>\n# <img src=x onerror=alert(2)>\n- **<i>b</i>**\n[[<script>x</script>|<b>l</b>]] [[Expense Policy|\"><svg>]]"
	wacPost(t, a, "/new", url.Values{"title": {"<script>alert(3)</script>"}, "body": {evil}, "tags": {"x"}}, http.StatusSeeOther)
	_, s := wikiTestPage(t, a, "script-alert-3-script")
	body := wacGet(t, a, "/page/script-alert-3-script", http.StatusOK)
	for _, bad := range []string{"<script>alert", "<img", "<i>", "<b>", "<svg>"} {
		if strings.Contains(body, bad) {
			t.Errorf("page shows %s unescaped", bad)
		}
	}
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") || !strings.Contains(body, "<strong>&lt;i&gt;b&lt;/i&gt;</strong>") {
		t.Errorf("escaped text missing:\n%s", body)
	}
	for _, p := range []string{"/", "/recent", "/search?q=script", "/edit/script-alert-3-script", "/history/script-alert-3-script"} {
		if strings.Contains(wacGet(t, a, p, http.StatusOK), "<script>alert") {
			t.Errorf("%s shows the script unescaped", p)
		}
	}
	_ = s
}

func TestWikiLimits(t *testing.T) {
	a, data := loadApp(t, "wiki")
	for i := 0; i < 60; i++ {
		wacPost(t, a, "/edit/expense-policy", url.Values{"title": {"Expense Policy"}, "body": {fmt.Sprint("v", i)}}, http.StatusSeeOther)
	}
	i, s := wikiTestPage(t, a, "expense-policy")
	if p := s.Pages[i]; p.Revisions != 61 || len(p.History) != wikiMaxRevs || p.History[0].Rev != 12 {
		t.Errorf("revisions %d, history %d from %d", p.Revisions, len(p.History), p.History[0].Rev)
	}
	if body := wacGet(t, a, "/history/expense-policy", http.StatusOK); !strings.Contains(body, "11 older revisions") {
		t.Error("history does not say revisions were dropped")
	}
	wacGet(t, a, "/page/expense-policy?rev=3", http.StatusNotFound)
	roundTrip(t, "wiki", data, a)

	// 500 pages: no more.
	var pages []string
	for i := 0; i < wikiMaxPages; i++ {
		pages = append(pages, fmt.Sprintf(`{"title":"P%d"}`, i))
	}
	b, err := New("wiki", []byte(`{"pages":[`+strings.Join(pages, ",")+`]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := appState(t, b, nil)
	if w := wacPost(t, b, "/new", url.Values{"title": {"One more"}}, http.StatusUnprocessableEntity); !strings.Contains(w.Body.String(), "at most 500 pages") {
		t.Error("no limit message")
	}
	wacSame(t, b, before, "page over the limit")
}

func TestWikiData(t *testing.T) {
	for _, bad := range []string{
		`{"pages":[{"slug":"a","title":"A"},{"slug":"a","title":"B"}]}`,
		`{"pages":[{"slug":"a","title":"A"},{"slug":"b","title":"a"}]}`,
		`{"pages":[{"slug":"a/b","title":"A"}]}`,
		`{"pages":[{"title":"A","updated":"yesterday"}]}`,
		`{"pages":[{"title":"A","tags":["no way!"]}]}`,
		`{"pages":[{}]}`,
		`{"pages":{}}`,
		`[]`,
	} {
		if _, err := New("wiki", []byte(bad), nil); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	a, err := New("wiki", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	wacGet(t, a, "/", http.StatusOK)
	wacPost(t, a, "/new", url.Values{"title": {"First"}}, http.StatusSeeOther)
	roundTrip(t, "wiki", nil, a)
	for _, bad := range []string{`{`, `{"pages":[null]}`, `{"pages":[{"slug":"x","title":"X","updated":"2026-01-01","revisions":0,"history":[{},{}]}]}`} {
		if _, err := New("wiki", nil, []byte(bad)); err == nil {
			t.Errorf("saved %s: no error", bad)
		}
	}
}

func TestWikiHostile(t *testing.T) {
	a, _ := loadApp(t, "wiki")
	posts := []string{"/new", "/edit/onboarding", "/rename/onboarding", "/tags/onboarding", "/tags/onboarding/remove",
		"/delete/onboarding", "/edit/nope", "/rename/nope", "/tags/nope", "/tags/nope/remove", "/delete/nope", "/page/onboarding",
		"/", "/recent", "/search", "/nope", "/edit/%2e%2e", "/edit/" + strings.Repeat("a", 300)}
	gets := []string{"/", "/page/onboarding", "/page/nope", "/history/onboarding", "/recent", "/search", "/new", "/edit/onboarding",
		"/rename/onboarding", "/tags/onboarding", "/tags/onboarding/remove", "/delete/onboarding", "/page/%ff%fe", "/edit/a%00b"}
	wacHostile(t, a, posts, gets)
	// Redirects only go to this site's own pages.
	w := wacDo(a, http.MethodGet, "//evil.example/x", "")
	if loc := w.Header().Get("Location"); strings.Contains(loc, "//evil") {
		t.Errorf("redirect to %q", loc)
	}
}

func TestWikiConcurrent(t *testing.T) {
	a, data := loadApp(t, "wiki")
	wacConcurrent(t, a, []string{"/", "/page/onboarding", "/recent", "/search?q=e", "/edit/onboarding"}, func(i int) {
		wacDo(a, http.MethodPost, "/edit/release-process", url.Values{"title": {"Release Process"}, "body": {fmt.Sprint("v", i)}}.Encode())
		wacDo(a, http.MethodPost, "/new", url.Values{"title": {fmt.Sprint("Page ", i)}}.Encode())
	})
	var s wikiTestState
	appState(t, a, &s)
	if len(s.Pages) != 5+80 {
		t.Errorf("%d pages", len(s.Pages))
	}
	roundTrip(t, "wiki", data, a)
}

func TestWikiLogFull(t *testing.T) {
	a, _ := loadApp(t, "wiki")
	fillLog(&a.(*wikiApp).journal)
	before := appState(t, a, nil)
	wacPost(t, a, "/new", url.Values{"title": {"Late"}}, http.StatusTooManyRequests)
	wacSame(t, a, before, "a post past the log's limit")
}

func TestWikiManyLinks(t *testing.T) {
	// Pages full of links render without a cost that grows with pages ×
	// links × pages.
	var pages []string
	links := strings.Repeat("[[P7]] [[p8]] [[Nope]] ", 300)
	for i := 0; i < 300; i++ {
		pages = append(pages, fmt.Sprintf(`{"title":"P%d","body":%q}`, i, links))
	}
	a, err := New("wiki", []byte(`{"pages":[`+strings.Join(pages, ",")+`]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	body := wacGet(t, a, "/page/p7", http.StatusOK)
	if !strings.Contains(body, `<a class="wikilink" href="/page/p8">p8</a>`) || !strings.Contains(body, "Pages that link here") {
		t.Error("links")
	}
}
