// The wiki's page views and HTTP handlers: listing, viewing, searching,
// creating, editing, renaming, tagging and deleting pages.

package webapp

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// --- views ---

type wikiView struct {
	Title  string
	Site   string
	User   string
	Q      string
	Nav    string
	Crumbs []crumb
	Flash  string
	Tags   []wikiTagCount
	P      any
}

type wikiTagCount struct {
	Tag   string
	Count int
}

type wikiRow struct {
	Slug, Title, Updated, Author string
	Tags                         []string
	Pre, Hit, Post               string // a search snippet around the hit
}

var wikiFlashes = map[string]string{
	"created":    "Page created.",
	"saved":      "Your changes have been saved.",
	"nochange":   "No changes to save.",
	"renamed":    "Page renamed.",
	"tagadded":   "Tag added.",
	"tagremoved": "Tag removed.",
	"deleted":    "Page deleted.",
}

func (a *wikiApp) view0(r *http.Request, title, nav string, crumbs []crumb, p any) wikiView {
	v := wikiView{Title: title, Site: a.name, User: a.user, Nav: nav, Crumbs: crumbs, P: p,
		Flash: wikiFlashes[r.URL.Query().Get("flash")]}
	counts := map[string]int{}
	for _, pg := range a.pages {
		for _, t := range pg.Tags {
			counts[t]++
		}
	}
	for t, n := range counts {
		v.Tags = append(v.Tags, wikiTagCount{t, n})
	}
	sort.Slice(v.Tags, func(i, j int) bool { return v.Tags[i].Tag < v.Tags[j].Tag })
	return v
}

func (a *wikiApp) show(r *http.Request, status int, page, title, nav string, crumbs []crumb, p any) answer {
	return render(wikiTmpl[page], status, a.view0(r, title, nav, crumbs, p))
}

func (a *wikiApp) fail(status int, msg string) answer {
	v := wikiView{Title: http.StatusText(status), Site: a.name, User: a.user,
		P: failData(status, msg)}
	return render(wikiTmpl["error"], status, v)
}

func (a *wikiApp) page(r *http.Request) *wikiPage { return a.pages[r.PathValue("slug")] }

var wikiHome = crumb{"Home", "/"}

func (a *wikiApp) crumbs(p *wikiPage, last string) []crumb {
	c := []crumb{wikiHome, {p.Title, wikiPath("/page/", p.Slug)}}
	if last != "" {
		c = append(c, crumb{last, ""})
	}
	return c
}

func (a *wikiApp) row(p *wikiPage) wikiRow {
	return wikiRow{Slug: p.Slug, Title: p.Title, Updated: p.Updated, Author: p.Author, Tags: p.Tags}
}

func (a *wikiApp) home(r *http.Request) answer {
	tag := wikiNormTag(r.URL.Query().Get("tag"))
	var rows []wikiRow
	for _, p := range a.pages {
		if tag != "" && !wikiHas(p.Tags, tag) {
			continue
		}
		rows = append(rows, a.row(p))
	}
	sort.Slice(rows, func(i, j int) bool {
		if li, lj := strings.ToLower(rows[i].Title), strings.ToLower(rows[j].Title); li != lj {
			return li < lj
		}
		return rows[i].Slug < rows[j].Slug
	})
	title := "All pages"
	crumbs := []crumb{wikiHome, {"All pages", ""}}
	if tag != "" {
		title = "Pages tagged “" + tag + "”"
		crumbs = []crumb{wikiHome, {"Tag: " + tag, ""}}
	}
	return a.show(r, http.StatusOK, "home", title, "home", crumbs, map[string]any{"Rows": rows, "Tag": tag, "Total": len(a.pages)})
}

func wikiHas(tags []string, t string) bool {
	for _, x := range tags {
		if x == t {
			return true
		}
	}
	return false
}

func (a *wikiApp) view(r *http.Request) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	shown := wikiRev{Rev: p.Revisions, Title: p.Title, Body: p.Body, Tags: p.Tags, Date: p.Updated, Author: p.Author}
	old := false
	if rs := r.URL.Query().Get("rev"); rs != "" {
		n, err := strconv.Atoi(rs)
		found := false
		for _, h := range p.History {
			if err == nil && h.Rev == n {
				shown, found, old = h, true, n != p.Revisions
			}
		}
		if !found {
			return a.fail(http.StatusNotFound, "That revision does not exist (or is too old to be kept).")
		}
	}
	var back []wikiRow
	for _, o := range a.pages {
		if o != p && a.links(o.Body)[p.Slug] {
			back = append(back, a.row(o))
		}
	}
	sort.Slice(back, func(i, j int) bool { return back[i].Slug < back[j].Slug })
	return a.show(r, http.StatusOK, "page", shown.Title, "", []crumb{wikiHome, {p.Title, ""}}, map[string]any{
		"Slug": p.Slug, "Rev": shown, "Old": old, "Latest": p.Revisions, "HTML": a.markup(shown.Body), "Backlinks": back,
	})
}

// missing is the 404 for an unknown page, offering to create it.
func (a *wikiApp) missing(r *http.Request) answer {
	slug := r.PathValue("slug")
	v := a.view0(r, "Page not found", "", []crumb{wikiHome, {"Not found", ""}}, map[string]any{
		"Status": http.StatusNotFound, "Text": "Page not found",
		"Msg": "There is no page here yet.", "Create": "/new?title=" + url.QueryEscape(clip(slug, 100)),
	})
	return render(wikiTmpl["error"], http.StatusNotFound, v)
}

func (a *wikiApp) history(r *http.Request) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	revs := make([]wikiRev, len(p.History))
	for i, h := range p.History {
		revs[len(revs)-1-i] = h
	}
	return a.show(r, http.StatusOK, "history", "History of "+p.Title, "", a.crumbs(p, "History"), map[string]any{
		"Slug": p.Slug, "Title": p.Title, "Revs": revs, "Latest": p.Revisions, "Dropped": p.Revisions - len(p.History)})
}

func (a *wikiApp) recent(r *http.Request) answer {
	type change struct {
		wikiRev
		Slug string
	}
	var all []change
	for _, p := range a.pages {
		for _, h := range p.History {
			all = append(all, change{h, p.Slug})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		x, y := all[i], all[j]
		if x.Date != y.Date {
			return x.Date > y.Date
		}
		if x.Seq != y.Seq {
			return x.Seq > y.Seq
		}
		if x.Slug != y.Slug {
			return x.Slug < y.Slug
		}
		return x.Rev > y.Rev
	})
	if len(all) > 100 {
		all = all[:100]
	}
	return a.show(r, http.StatusOK, "recent", "Recent changes", "recent", []crumb{wikiHome, {"Recent changes", ""}}, map[string]any{"Changes": all})
}

func (a *wikiApp) search(r *http.Request) answer {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if !utf8.ValidString(q) {
		q = strings.ToValidUTF8(q, "")
	}
	q = clip(q, 200)
	var titleHits, bodyHits []wikiRow
	if tag, ok := strings.CutPrefix(q, "tag:"); ok {
		tag = wikiNormTag(tag)
		for _, p := range a.pages {
			if tag != "" && wikiHas(p.Tags, tag) {
				titleHits = append(titleHits, a.row(p))
			}
		}
	} else if q != "" {
		lq := strings.ToLower(q)
		for _, p := range a.pages {
			row := a.row(p)
			inTitle := strings.Contains(strings.ToLower(p.Title), lq)
			if i := wikiIndexFold(p.Body, q); i >= 0 {
				row.Pre, row.Hit, row.Post = wikiSnippet(p.Body, i, len(q))
			} else if !inTitle {
				continue
			} else {
				row.Pre = clip(strings.Join(strings.Fields(p.Body), " "), 160)
			}
			if inTitle {
				titleHits = append(titleHits, row)
			} else {
				bodyHits = append(bodyHits, row)
			}
		}
	}
	byTitle := func(rs []wikiRow) {
		sort.Slice(rs, func(i, j int) bool { return strings.ToLower(rs[i].Title) < strings.ToLower(rs[j].Title) })
	}
	byTitle(titleHits)
	byTitle(bodyHits)
	rows := append(titleHits, bodyHits...)
	v := a.view0(r, "Search", "", []crumb{wikiHome, {"Search", ""}}, map[string]any{"Q": q, "Rows": rows, "Exact": a.resolve(q)})
	v.Q = q
	return render(wikiTmpl["search"], http.StatusOK, v)
}

// wikiIndexFold is the byte index of q in s, ignoring case; -1 if absent.
func wikiIndexFold(s, q string) int {
	if q == "" {
		return -1
	}
	ls, lq := strings.ToLower(s), strings.ToLower(q)
	if len(ls) != len(s) || len(lq) != len(q) {
		return strings.Index(s, q) // case folding changed lengths: exact only
	}
	return strings.Index(ls, lq)
}

// wikiSnippet cuts the text around s[i:i+n], on rune boundaries.
func wikiSnippet(s string, i, n int) (pre, hit, post string) {
	start := i - 70
	if start < 0 {
		start = 0
	}
	for start > 0 && !utf8.RuneStart(s[start]) {
		start--
	}
	end := i + n + 90
	if end > len(s) {
		end = len(s)
	}
	for end < len(s) && !utf8.RuneStart(s[end]) {
		end++
	}
	pre, hit, post = s[start:i], s[i:i+n], s[i+n:end]
	if start > 0 {
		pre = "…" + pre
	}
	if end < len(s) {
		post += "…"
	}
	return
}

// --- forms ---

type wikiForm struct {
	Mode, Action, Slug, Title, Body, Tags, Summary string
	Errs                                           map[string]string
	Focus                                          string
}

func (a *wikiApp) newForm(r *http.Request) answer {
	q := r.URL.Query()
	f := wikiForm{Mode: "new", Action: "/new", Title: clip(q.Get("title"), wikiMaxTitle),
		Body: clip(q.Get("body"), MaxField), Tags: clip(q.Get("tags"), 1000), Focus: "title"}
	return a.show(r, http.StatusOK, "edit", "New page", "new", []crumb{wikiHome, {"New page", ""}}, f)
}

func (a *wikiApp) editForm(r *http.Request) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	f := wikiForm{Mode: "edit", Action: wikiPath("/edit/", p.Slug), Slug: p.Slug, Title: p.Title, Body: p.Body,
		Tags: strings.Join(p.Tags, ", "), Focus: "body"}
	return a.show(r, http.StatusOK, "edit", "Editing "+p.Title, "", a.crumbs(p, "Edit"), f)
}

// readForm validates the page form; errs is empty when it is good.
func (a *wikiApp) readForm(f url.Values, self *wikiPage) (title, body string, tags []string, summary string, errs map[string]string) {
	errs = map[string]string{}
	title = strings.Join(strings.Fields(f.Get("title")), " ")
	body = wikiNormBody(f.Get("body"))
	summary = strings.TrimSpace(f.Get("summary"))
	switch {
	case title == "":
		errs["title"] = "Enter a title."
	case !lineOK(title, wikiMaxTitle):
		errs["title"] = fmt.Sprintf("A title is one line of at most %d characters.", wikiMaxTitle)
	case wikiSlugify(title) == "":
		errs["title"] = "A title needs at least one letter or digit."
	default:
		if o := a.byTitle(title); o != nil && o != self {
			errs["title"] = "Another page already has this title."
		}
	}
	if !textOK(body) {
		errs["body"] = "The text contains characters that are not allowed."
	}
	if !lineOK(summary, 200) {
		errs["summary"] = "A summary is one line of at most 200 characters."
	}
	var err error
	if tags, err = wikiParseTags([]string{f.Get("tags")}); err != nil {
		errs["tags"] = err.Error() + "."
	}
	return
}

func (a *wikiApp) formAgain(r *http.Request, fm wikiForm, f url.Values, errs map[string]string, p *wikiPage) answer {
	fm.Title, fm.Body, fm.Tags, fm.Summary = clip(f.Get("title"), 1000), f.Get("body"), clip(f.Get("tags"), 1000), clip(f.Get("summary"), 1000)
	fm.Errs = errs
	if k := firstErr(errs, "title", "body", "tags", "summary"); k != "" {
		fm.Focus = k
	}
	title, crumbs := "New page", []crumb{wikiHome, {"New page", ""}}
	if p != nil {
		title, crumbs = "Editing "+p.Title, a.crumbs(p, "Edit")
	}
	return a.show(r, http.StatusUnprocessableEntity, "edit", title, fm.Mode, crumbs, fm)
}

func (a *wikiApp) create(r *http.Request, f url.Values) answer {
	title, body, tags, _, errs := a.readForm(f, nil)
	slug := wikiSlugify(title)
	if len(errs) == 0 {
		if o := a.pages[slug]; o != nil {
			errs["title"] = "A page with this name already exists: “" + o.Title + "”."
		} else if len(a.pages) >= wikiMaxPages {
			errs["title"] = fmt.Sprintf("This wiki holds at most %d pages; delete one first.", wikiMaxPages)
		}
	}
	if len(errs) > 0 {
		return a.formAgain(r, wikiForm{Mode: "new", Action: "/new"}, f, errs, nil)
	}
	a.add("create_page", map[string]string{"slug": slug, "title": title, "body": body, "tags": strings.Join(tags, ",")})
	p := &wikiPage{Slug: slug, Title: title, Body: body, Tags: tags}
	a.revise(p, "Created page")
	a.pages[slug] = p
	return redirect(wikiPath("/page/", slug) + "?flash=created")
}

func (a *wikiApp) edit(r *http.Request, f url.Values) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	title, body, tags, summary, errs := a.readForm(f, p)
	if len(errs) > 0 {
		return a.formAgain(r, wikiForm{Mode: "edit", Action: wikiPath("/edit/", p.Slug), Slug: p.Slug}, f, errs, p)
	}
	if title == p.Title && body == p.Body && wikiTagsEqual(tags, p.Tags) {
		return redirect(wikiPath("/page/", p.Slug) + "?flash=nochange")
	}
	a.add("edit_page", map[string]string{"slug": p.Slug, "title": title, "body": body, "tags": strings.Join(tags, ","), "summary": summary})
	p.Title, p.Body, p.Tags = title, body, tags
	if summary == "" {
		summary = "Edited page"
	}
	a.revise(p, summary)
	return redirect(wikiPath("/page/", p.Slug) + "?flash=saved")
}

func (a *wikiApp) renameForm(r *http.Request) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	t := r.URL.Query().Get("title")
	if t == "" {
		t = p.Title
	}
	return a.show(r, http.StatusOK, "rename", "Rename "+p.Title, "", a.crumbs(p, "Rename"),
		map[string]any{"Slug": p.Slug, "Old": p.Title, "Title": clip(t, wikiMaxTitle), "Err": ""})
}

func (a *wikiApp) rename(r *http.Request, f url.Values) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	title := strings.Join(strings.Fields(f.Get("title")), " ")
	slug := wikiSlugify(title)
	var msg string
	switch {
	case title == "":
		msg = "Enter the new title."
	case !lineOK(title, wikiMaxTitle):
		msg = fmt.Sprintf("A title is one line of at most %d characters.", wikiMaxTitle)
	case slug == "":
		msg = "A title needs at least one letter or digit."
	case title == p.Title && slug == p.Slug:
		msg = "The new title is the same as the current one."
	default:
		if o := a.pages[slug]; o != nil && o != p {
			msg = "A page with this name already exists: “" + o.Title + "”."
		} else if o := a.byTitle(title); o != nil && o != p {
			msg = "Another page already has this title."
		}
	}
	if msg != "" {
		return a.show(r, http.StatusUnprocessableEntity, "rename", "Rename "+p.Title, "", a.crumbs(p, "Rename"),
			map[string]any{"Slug": p.Slug, "Old": p.Title, "Title": clip(f.Get("title"), 1000), "Err": msg})
	}
	a.add("rename_page", map[string]string{"from": p.Slug, "slug": slug, "from_title": p.Title, "title": title})
	old := p.Title
	delete(a.pages, p.Slug)
	p.Slug, p.Title = slug, title
	a.pages[slug] = p
	a.revise(p, "Renamed from “"+old+"”")
	return redirect(wikiPath("/page/", slug) + "?flash=renamed")
}

func (a *wikiApp) tagsPage(r *http.Request, status int, p *wikiPage, add, errMsg string) answer {
	return a.show(r, status, "tags", "Tags of "+p.Title, "", a.crumbs(p, "Tags"),
		map[string]any{"Slug": p.Slug, "Title": p.Title, "Tags": p.Tags, "Add": add, "Err": errMsg})
}

func (a *wikiApp) tagsForm(r *http.Request) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	return a.tagsPage(r, http.StatusOK, p, clip(r.URL.Query().Get("add"), 200), "")
}

func (a *wikiApp) addTag(r *http.Request, f url.Values) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	in := f.Get("tag")
	tags, err := wikiParseTags([]string{in})
	var fresh []string
	for _, t := range tags {
		if !wikiHas(p.Tags, t) {
			fresh = append(fresh, t)
		}
	}
	msg := ""
	switch {
	case err != nil:
		msg = err.Error() + "."
	case len(tags) == 0:
		msg = "Enter a tag."
	case len(fresh) == 0:
		msg = "The page already has this tag."
	case len(p.Tags)+len(fresh) > wikiMaxTags:
		msg = fmt.Sprintf("A page may have at most %d tags.", wikiMaxTags)
	}
	if msg != "" {
		return a.tagsPage(r, http.StatusUnprocessableEntity, p, clip(in, 1000), msg)
	}
	if len(a.Log)+len(fresh) > MaxLog {
		return a.fail(http.StatusTooManyRequests, "Too many changes: this site accepts no more.")
	}
	for _, t := range fresh {
		a.add("add_tag", map[string]string{"slug": p.Slug, "tag": t})
	}
	all, _ := wikiParseTags(append(append([]string{}, p.Tags...), fresh...))
	p.Tags = all
	a.revise(p, "Added tag "+strings.Join(fresh, ", "))
	return redirect(wikiPath("/tags/", p.Slug) + "?flash=tagadded")
}

func (a *wikiApp) confirm(r *http.Request, status int, p *wikiPage, kind, tag string) answer {
	d := map[string]any{"Slug": p.Slug, "Title": p.Title, "Kind": kind, "Tag": tag}
	if kind == "tag" {
		return a.show(r, status, "confirm", "Remove tag", "", a.crumbs(p, "Remove tag"), d)
	}
	return a.show(r, status, "confirm", "Delete "+p.Title, "", a.crumbs(p, "Delete"), d)
}

func (a *wikiApp) removeTagForm(r *http.Request) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	tag := wikiNormTag(r.URL.Query().Get("tag"))
	if !wikiHas(p.Tags, tag) {
		return a.tagsPage(r, http.StatusNotFound, p, "", "This page has no such tag.")
	}
	return a.confirm(r, http.StatusOK, p, "tag", tag)
}

func (a *wikiApp) removeTag(r *http.Request, f url.Values) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	tag := wikiNormTag(f.Get("tag"))
	if !wikiHas(p.Tags, tag) {
		return a.tagsPage(r, http.StatusUnprocessableEntity, p, "", "This page has no such tag.")
	}
	a.add("remove_tag", map[string]string{"slug": p.Slug, "tag": tag})
	var keep []string
	for _, t := range p.Tags {
		if t != tag {
			keep = append(keep, t)
		}
	}
	p.Tags = append([]string{}, keep...)
	a.revise(p, "Removed tag "+tag)
	return redirect(wikiPath("/tags/", p.Slug) + "?flash=tagremoved")
}

func (a *wikiApp) deleteForm(r *http.Request) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	return a.confirm(r, http.StatusOK, p, "delete", "")
}

func (a *wikiApp) delete(r *http.Request, f url.Values) answer {
	p := a.page(r)
	if p == nil {
		return a.missing(r)
	}
	if f.Get("confirm") != "yes" {
		return a.confirm(r, http.StatusUnprocessableEntity, p, "delete", "")
	}
	a.add("delete_page", map[string]string{"slug": p.Slug, "title": p.Title})
	delete(a.pages, p.Slug)
	return redirect("/?flash=deleted")
}
