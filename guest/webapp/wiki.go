package webapp

// Keyboard paths (the oracle's recipes). Every change starts with ctrl+l,
// typing the URL (with "http://"), and Enter; the page then has focus on
// the field named. In a text field Enter submits its form; the body is a
// textarea, where Enter is a newline and ctrl+Enter submits.
//
//	create page:  /new?title=T (also &body=B&tags=a,b to prefill): focus in
//	              Title; Tab → Body (type it); Tab → Tags (type "a, b");
//	              Enter. With everything prefilled: Enter.
//	edit page:    /edit/SLUG: focus in Body (ctrl+a, type the new text);
//	              ctrl+Enter saves. Tab from Body → Tags → Summary; Enter in
//	              either saves. shift+Tab from Body → Title (ctrl+a, type,
//	              Enter saves).
//	rename page:  /rename/SLUG?title=NEW: focus in "New title" (prefilled
//	              with NEW, else the current title: ctrl+a, type); Enter.
//	add tag:      /tags/SLUG?add=TAG: focus in "Add tag" (prefilled); Enter.
//	              (Several at once: "a, b".)
//	remove tag:   /tags/SLUG/remove?tag=TAG: a confirmation page, focus on
//	              its "Remove tag" button; Enter.
//	delete page:  /delete/SLUG: a confirmation page, focus on its "Delete
//	              page" button; Enter. (The post needs confirm=yes, which
//	              the page's form carries.)
//
// Read-only pages: / (all pages, ?tag=T filters), /page/SLUG (?rev=N an
// old revision), /history/SLUG, /recent, /search?q=Q (q "tag:T" lists a
// tag's pages).

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The wiki ("Team Wiki") is a small knowledge base: pages written in a
// light markup, tagged, searchable, with a revision history.
//
// Data (all fields optional unless said):
//
//	{
//	  "site": "Team Wiki",              // the name in the header
//	  "user": {"name": "Dana Reyes"},  // who the agent is: the author of its edits
//	  "pages": [{
//	    "slug": "onboarding",          // URL name: letters, digits, '-', '_' (1-100);
//	                                   // made from the title when absent; unique
//	    "title": "Onboarding",         // required unless slug is given; unique (any case)
//	    "body": "# Week one\n- Get a laptop\nSee [[Expenses]] and **ask**.",
//	    "tags": ["hr", "process"],     // lower-cased; spaces become '-'
//	    "updated": "2026-02-20",       // YYYY-MM-DD; today (2026-03-02) when absent
//	    "author": "Sam Lee"
//	  }]
//	}
//
// Markup: a blank line separates paragraphs; "# ", "## ", "### " start
// headings; "- " or "* " starts a bullet; **bold**; [[Page title]] or
// [[Page title|label]] links to a page by title or slug (a missing page's
// link is red and leads to /new?title=).
//
// Limits: 500 pages, 20 tags a page (40 characters each), titles of 120
// characters, bodies of MaxField bytes, 50 revisions kept a page (the
// revision count goes on counting).
//
// State: {"pages": [{slug, title, body, tags, updated, author, revisions,
// history: [{rev, seq, date, author, summary, title, body, tags}]}] (by
// slug), "log": [...]}. Log actions and their fields: create_page {slug,
// title, body, tags}, edit_page {slug, title, body, tags, summary},
// rename_page {from, slug, from_title, title}, add_tag {slug, tag},
// remove_tag {slug, tag}, delete_page {slug, title}. Tags in fields are
// comma-separated.

func init() { register("wiki", newWiki) }

//go:embed pages/wiki/*.html
var wikiFS embed.FS

const (
	wikiMaxPages = 500
	wikiMaxRevs  = 50
	wikiMaxTags  = 20
	wikiMaxTag   = 40
	wikiMaxTitle = 120
)

var wikiTmpl = parsePages(wikiFS, "pages/wiki", officeFuncs())

type wikiRev struct {
	Rev     int      `json:"rev"`
	Seq     int      `json:"seq"` // the log entry that made it; 0 for the data's
	Date    string   `json:"date"`
	Author  string   `json:"author"`
	Summary string   `json:"summary"`
	Title   string   `json:"title"`
	Body    string   `json:"body"`
	Tags    []string `json:"tags"`
}

type wikiPage struct {
	Slug      string    `json:"slug"`
	Title     string    `json:"title"`
	Body      string    `json:"body"`
	Tags      []string  `json:"tags"`
	Updated   string    `json:"updated"`
	Author    string    `json:"author"`
	Revisions int       `json:"revisions"`
	History   []wikiRev `json:"history"`
}

type wikiState struct {
	Pages []*wikiPage `json:"pages"`
	Log   []Event     `json:"log"`
}

type wikiApp struct {
	journal
	web   router
	name  string
	user  string
	pages map[string]*wikiPage
	// titles indexes pages by lower-cased title; nil when stale. Every
	// change goes through add, which drops it.
	titles map[string]*wikiPage
}

// add logs a change (mu held) and drops the title index: the caller is
// about to change the pages.
func (a *wikiApp) add(action string, fields map[string]string) bool {
	a.titles = nil
	return a.journal.add(action, fields)
}

func newWiki(data, saved []byte) (App, error) {
	var d struct {
		Site string `json:"site"`
		User struct {
			Name string `json:"name"`
		} `json:"user"`
		Pages []struct {
			Slug    string   `json:"slug"`
			Title   string   `json:"title"`
			Body    string   `json:"body"`
			Tags    []string `json:"tags"`
			Updated string   `json:"updated"`
			Author  string   `json:"author"`
		} `json:"pages"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("wiki: data: %v", err)
	}
	a := &wikiApp{name: strings.TrimSpace(d.Site), user: strings.TrimSpace(d.User.Name), pages: map[string]*wikiPage{}}
	if a.name == "" {
		a.name = "Team Wiki"
	}
	if a.user == "" {
		a.user = "You"
	}
	if !lineOK(a.name, 60) || !lineOK(a.user, 100) {
		return nil, fmt.Errorf("wiki: site or user name is not one line of at most 60/100 characters")
	}
	if len(d.Pages) > wikiMaxPages {
		return nil, fmt.Errorf("wiki: %d pages, over %d", len(d.Pages), wikiMaxPages)
	}
	for i, dp := range d.Pages {
		p := &wikiPage{Slug: strings.TrimSpace(dp.Slug), Title: strings.TrimSpace(dp.Title), Body: wikiNormBody(dp.Body),
			Updated: strings.TrimSpace(dp.Updated), Author: strings.TrimSpace(dp.Author)}
		if p.Title == "" {
			p.Title = p.Slug
		}
		if p.Slug == "" {
			p.Slug = wikiSlugify(p.Title)
		}
		if p.Updated == "" {
			p.Updated = todayDate
		}
		tags, err := wikiParseTags(dp.Tags)
		if err != nil {
			return nil, fmt.Errorf("wiki: page %d (%q): %v", i, p.Slug, err)
		}
		p.Tags = tags
		p.Revisions = 1
		p.History = []wikiRev{{Rev: 1, Date: p.Updated, Author: p.Author, Summary: "Created page", Title: p.Title, Body: p.Body, Tags: p.Tags}}
		if err := a.check(p); err != nil {
			return nil, fmt.Errorf("wiki: page %d: %v", i, err)
		}
		a.pages[p.Slug] = p
		a.titles = nil
	}
	if saved != nil {
		var s wikiState
		if err := json.Unmarshal(saved, &s); err != nil {
			return nil, fmt.Errorf("wiki: saved state: %v", err)
		}
		if len(s.Pages) > wikiMaxPages || len(s.Log) > MaxLog {
			return nil, fmt.Errorf("wiki: saved state: over the limits")
		}
		a.pages, a.titles = map[string]*wikiPage{}, nil
		for i, p := range s.Pages {
			if p == nil {
				return nil, fmt.Errorf("wiki: saved state: page %d is null", i)
			}
			if p.Tags == nil {
				p.Tags = []string{}
			}
			if len(p.History) > wikiMaxRevs || p.Revisions < len(p.History) {
				return nil, fmt.Errorf("wiki: saved state: page %q: bad history", p.Slug)
			}
			for j := range p.History {
				if p.History[j].Tags == nil {
					p.History[j].Tags = []string{}
				}
			}
			if err := a.check(p); err != nil {
				return nil, fmt.Errorf("wiki: saved state: %v", err)
			}
			a.pages[p.Slug] = p
			a.titles = nil
		}
		a.Log = s.Log
	}
	a.routes()
	return a, nil
}

// check validates page p against the pages already in a.
func (a *wikiApp) check(p *wikiPage) error {
	if !wikiSlugOK(p.Slug) {
		return fmt.Errorf("slug %q: want 1-100 letters, digits, '-' or '_'", p.Slug)
	}
	if p.Title == "" || !lineOK(p.Title, wikiMaxTitle) {
		return fmt.Errorf("page %q: title must be one line of 1-%d characters", p.Slug, wikiMaxTitle)
	}
	if !textOK(p.Body) {
		return fmt.Errorf("page %q: body has control characters or is not UTF-8", p.Slug)
	}
	if _, ok := parseDate(p.Updated); !ok {
		return fmt.Errorf("page %q: updated %q is not YYYY-MM-DD", p.Slug, p.Updated)
	}
	if !lineOK(p.Author, 100) {
		return fmt.Errorf("page %q: author is not one line", p.Slug)
	}
	if _, dup := a.pages[p.Slug]; dup {
		return fmt.Errorf("duplicate slug %q", p.Slug)
	}
	if o := a.byTitle(p.Title); o != nil {
		return fmt.Errorf("page %q: title %q is also page %q's", p.Slug, p.Title, o.Slug)
	}
	return nil
}

func (a *wikiApp) State() ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := wikiState{Pages: a.sorted(), Log: orEmpty(a.Log)}
	return json.Marshal(s)
}

func (a *wikiApp) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.web.ServeHTTP(w, r) }

func (a *wikiApp) routes() {
	a.web = a.journal.logRouter(a.fail)
	s := &a.web
	s.get("/{$}", a.home)
	s.get("/page/{slug}", a.view)
	s.get("/history/{slug}", a.history)
	s.get("/recent", a.recent)
	s.get("/search", a.search)
	s.get("/new", a.newForm)
	s.post("/new", a.create)
	s.get("/edit/{slug}", a.editForm)
	s.post("/edit/{slug}", a.edit)
	s.get("/rename/{slug}", a.renameForm)
	s.post("/rename/{slug}", a.rename)
	s.get("/tags/{slug}", a.tagsForm)
	s.post("/tags/{slug}", a.addTag)
	s.get("/tags/{slug}/remove", a.removeTagForm)
	s.post("/tags/{slug}/remove", a.removeTag)
	s.get("/delete/{slug}", a.deleteForm)
	s.post("/delete/{slug}", a.delete)
	s.notFound()
}

// --- helpers ---

func wikiSlugOK(s string) bool {
	n := utf8.RuneCountInString(s)
	if n == 0 || n > 100 || !utf8.ValidString(s) {
		return false
	}
	for _, c := range s {
		if !(unicode.IsLetter(c) || unicode.IsDigit(c) || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// wikiSlugify makes a slug from a title: lower case, runs of other
// characters become one '-'.
func wikiSlugify(title string) string {
	var b strings.Builder
	dash, n := false, 0
	for _, c := range strings.ToLower(title) {
		if n >= 80 {
			break
		}
		if unicode.IsLetter(c) || unicode.IsDigit(c) {
			b.WriteRune(c)
			dash = false
			n++
		} else if b.Len() > 0 && !dash {
			b.WriteByte('-')
			dash = true
			n++
		}
	}
	return strings.TrimRight(b.String(), "-")
}

func wikiNormBody(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	s = strings.TrimLeft(s, "\n")
	return strings.TrimRight(s, " \t\n")
}

// wikiNormTag normalizes one tag; "" when it is not a valid tag.
func wikiNormTag(t string) string {
	t = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(t), "#")))
	t = strings.Join(strings.Fields(t), "-")
	if t == "" || utf8.RuneCountInString(t) > wikiMaxTag || !utf8.ValidString(t) {
		return ""
	}
	for _, c := range t {
		if !(unicode.IsLetter(c) || unicode.IsDigit(c) || c == '-' || c == '_' || c == '.') {
			return ""
		}
	}
	return t
}

// wikiParseTags normalizes, dedupes and sorts tags (each may itself be a
// comma-separated list).
func wikiParseTags(in []string) ([]string, error) {
	seen := map[string]bool{}
	out := []string{}
	for _, s := range in {
		for _, t := range strings.Split(s, ",") {
			if strings.TrimSpace(t) == "" {
				continue
			}
			n := wikiNormTag(t)
			if n == "" {
				return nil, fmt.Errorf("Tag “%s” is not valid: use up to %d letters, digits, '-', '_' or '.'", clip(strings.TrimSpace(t), 50), wikiMaxTag)
			}
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	if len(out) > wikiMaxTags {
		return nil, fmt.Errorf("A page may have at most %d tags", wikiMaxTags)
	}
	sort.Strings(out)
	return out, nil
}

func wikiTagsEqual(a, b []string) bool {
	return strings.Join(a, ",") == strings.Join(b, ",")
}

// byTitle finds a page by title, any case.
func (a *wikiApp) byTitle(title string) *wikiPage {
	if a.titles == nil {
		a.titles = make(map[string]*wikiPage, len(a.pages))
		for _, p := range a.pages {
			a.titles[strings.ToLower(p.Title)] = p
		}
	}
	return a.titles[strings.ToLower(title)]
}

// resolve finds a link target: a slug, a title, or a title's slug.
func (a *wikiApp) resolve(target string) *wikiPage {
	target = strings.TrimSpace(target)
	if p := a.pages[target]; p != nil {
		return p
	}
	if p := a.byTitle(target); p != nil {
		return p
	}
	return a.pages[wikiSlugify(target)]
}

func (a *wikiApp) sorted() []*wikiPage {
	out := make([]*wikiPage, 0, len(a.pages))
	for _, p := range a.pages {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Slug < out[j].Slug })
	return out
}

// revise appends a revision of p's current content, made by log entry seq.
func (a *wikiApp) revise(p *wikiPage, summary string) {
	p.Revisions++
	p.Updated = todayDate
	p.Author = a.user
	p.History = append(p.History, wikiRev{Rev: p.Revisions, Seq: len(a.Log), Date: todayDate, Author: a.user,
		Summary: summary, Title: p.Title, Body: p.Body, Tags: append([]string{}, p.Tags...)})
	if len(p.History) > wikiMaxRevs {
		p.History = append([]wikiRev(nil), p.History[len(p.History)-wikiMaxRevs:]...)
	}
}

func wikiPath(prefix, slug string) string { return prefix + url.PathEscape(slug) }

// --- markup ---

var wikiHeadings = []struct {
	prefix, tag string
}{{"### ", "h4"}, {"## ", "h3"}, {"# ", "h2"}}

// markup renders a body as HTML; every piece of text is escaped.
func (a *wikiApp) markup(body string) template.HTML {
	var b strings.Builder
	var para []string
	inList := false
	flush := func() {
		if len(para) > 0 {
			b.WriteString("<p>")
			b.WriteString(a.inline(strings.Join(para, " ")))
			b.WriteString("</p>\n")
			para = nil
		}
	}
	closeList := func() {
		if inList {
			b.WriteString("</ul>\n")
			inList = false
		}
	}
	for _, ln := range strings.Split(wikiNormBody(body), "\n") {
		t := strings.TrimRight(ln, " \t")
		trim := strings.TrimSpace(t)
		if trim == "" {
			flush()
			closeList()
			continue
		}
		heading := false
		for _, h := range wikiHeadings {
			if strings.HasPrefix(trim, h.prefix) {
				flush()
				closeList()
				fmt.Fprintf(&b, "<%s>%s</%s>\n", h.tag, a.inline(strings.TrimSpace(trim[len(h.prefix):])), h.tag)
				heading = true
				break
			}
		}
		if heading {
			continue
		}
		if strings.HasPrefix(trim, "- ") || strings.HasPrefix(trim, "* ") {
			flush()
			if !inList {
				b.WriteString("<ul>\n")
				inList = true
			}
			b.WriteString("<li>")
			b.WriteString(a.inline(strings.TrimSpace(trim[2:])))
			b.WriteString("</li>\n")
			continue
		}
		closeList()
		para = append(para, trim)
	}
	flush()
	closeList()
	return template.HTML(b.String())
}

// inline renders links and bold in one line of text, escaping the rest.
func (a *wikiApp) inline(s string) string {
	var b strings.Builder
	for s != "" {
		i := strings.Index(s, "[[")
		if i < 0 {
			b.WriteString(wikiBold(s))
			break
		}
		j := strings.Index(s[i+2:], "]]")
		if j < 0 {
			b.WriteString(wikiBold(s))
			break
		}
		b.WriteString(wikiBold(s[:i]))
		inner := s[i+2 : i+2+j]
		s = s[i+2+j+2:]
		target, label, ok := strings.Cut(inner, "|")
		target = strings.TrimSpace(target)
		if !ok || strings.TrimSpace(label) == "" {
			label = target
		}
		label = strings.TrimSpace(label)
		if target == "" {
			b.WriteString(template.HTMLEscapeString("[[" + inner + "]]"))
			continue
		}
		if p := a.resolve(target); p != nil {
			fmt.Fprintf(&b, `<a class="wikilink" href="%s">%s</a>`, template.HTMLEscapeString(wikiPath("/page/", p.Slug)), template.HTMLEscapeString(label))
		} else {
			fmt.Fprintf(&b, `<a class="wikilink missing" href="/new?title=%s" title="Page does not exist yet">%s</a>`,
				template.HTMLEscapeString(url.QueryEscape(target)), template.HTMLEscapeString(label))
		}
	}
	return b.String()
}

// wikiBold renders **bold** pairs in s, escaping the rest.
func wikiBold(s string) string {
	parts := strings.Split(s, "**")
	var b strings.Builder
	for i, p := range parts {
		switch {
		case i%2 == 1 && i < len(parts)-1:
			b.WriteString("<strong>")
			b.WriteString(template.HTMLEscapeString(p))
			b.WriteString("</strong>")
		case i%2 == 1:
			b.WriteString("**")
			b.WriteString(template.HTMLEscapeString(p))
		default:
			b.WriteString(template.HTMLEscapeString(p))
		}
	}
	return b.String()
}

// links lists the slugs of existing pages body links to.
func (a *wikiApp) links(body string) map[string]bool {
	out := map[string]bool{}
	for s := body; ; {
		i := strings.Index(s, "[[")
		if i < 0 {
			break
		}
		j := strings.Index(s[i+2:], "]]")
		if j < 0 {
			break
		}
		target, _, _ := strings.Cut(s[i+2:i+2+j], "|")
		s = s[i+2+j+2:]
		if strings.TrimSpace(target) == "" {
			continue
		}
		if p := a.resolve(target); p != nil {
			out[p.Slug] = true
		}
	}
	return out
}
