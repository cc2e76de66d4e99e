// The mail app's page views and HTTP handlers: folder listings, reading a
// message, composing and sending, moving and the confirmed actions, and
// the page templates.

package webapp

import (
	"embed"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

type mailView struct {
	Title   string
	User    person
	Folders []mailFolderLink
	Q       string
	Flash   string
	Crumbs  []crumb
	Message string // error page

	// lists
	Heading    string
	Rows       []mailRow
	Pager      pager
	ToColumn   bool
	FolderCol  bool
	Empty      string
	SearchOpts []mailOpt

	// a message
	M        *mailMsgView
	MoveOpts []mailOpt

	// compose
	C        mailCompose
	Errs     map[string]string
	ErrCount int
	Files    []mailOpt
	Orig     *mailMsgView
	Carried  []string

	// confirm pages
	Prompt, Action, Button, Field, Value string
	Danger                               bool
}

type mailFolderLink struct {
	Name, URL, Icon string
	Unread          int
	Current         bool
}

type mailOpt struct {
	Value, Label string
	Selected     bool
}

type mailRow struct {
	ID, URL, Who, Subject, Snippet, Date, Folder string
	Unread, Starred, Attach                      bool
}

type mailMsgView struct {
	mailMessage
	URL, FolderURL, DateLong, Who string
	InTrash                       bool
}

type mailCompose struct {
	Kind, To, Cc, Subject, Body, Attach, InReplyTo, ForwardedFrom string
	FocusBody                                                     bool
	Focus                                                         string // after errors: the first field with one
}

func mailFolderURL(name string) string {
	if name == "Inbox" {
		return "/"
	}
	return "/folder/" + url.PathEscape(name)
}

func mailClip(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return s
}

// view starts a page's data: chrome, folder list and the flash the
// redirect named (?msg=: fixed texts only).
func (m *mail) view(r *http.Request, title, current string) *mailView {
	q := r.URL.Query()
	v := &mailView{Title: title, User: m.user}
	v.Q, _ = cleanLine(mailClip(q.Get("q"), 200), 200)
	unread := map[string]int{}
	for _, msg := range m.msgs {
		if !msg.Deleted && msg.Unread {
			unread[msg.Folder]++
		}
	}
	icons := map[string]string{"Inbox": "▣", "Sent": "➤", "Archive": "▤", "Trash": "✕"}
	add := func(name, url, icon string, n int) {
		v.Folders = append(v.Folders, mailFolderLink{Name: name, URL: url, Icon: icon, Unread: n, Current: name == current})
	}
	add("Inbox", "/", icons["Inbox"], unread["Inbox"])
	add("Starred", "/starred", "★", 0)
	for _, f := range m.folders[1:] {
		if f != "Trash" {
			icon := icons[f]
			if icon == "" {
				icon = "▸"
			}
			add(f, mailFolderURL(f), icon, unread[f])
		}
	}
	add("Trash", mailFolderURL("Trash"), icons["Trash"], 0)
	if current == "*starred" {
		v.Folders[1].Current = true
	}
	msg := m.byID[q.Get("id")]
	switch q.Get("msg") {
	case "sent":
		v.Flash = "✓ Your message has been sent."
	case "moved":
		if msg != nil {
			v.Flash = "✓ Conversation moved to " + msg.Folder + "."
		}
	case "deleted":
		v.Flash = "✓ Conversation moved to Trash."
	case "purged":
		v.Flash = "✓ Message deleted forever."
	case "starred":
		v.Flash = "✓ Star added."
	case "unstarred":
		v.Flash = "✓ Star removed."
	case "read":
		v.Flash = "✓ Marked as read."
	case "unread":
		v.Flash = "✓ Marked as unread."
	}
	return v
}

func (m *mail) errorPage(r *http.Request, code int, title, msg string) answer {
	v := m.view(r, title, "")
	v.Flash = ""
	v.Message = msg
	return render(mailPages["error"], code, v)
}

func (m *mail) tooMany(r *http.Request, what string) answer {
	return m.errorPage(r, http.StatusTooManyRequests, "Limit reached", what)
}

func (m *mail) notFound(r *http.Request) answer {
	return m.errorPage(r, http.StatusNotFound, "Message not found", "This message doesn’t exist or has been deleted.")
}

// short is a list's date: the time today, "Mar 1" this year, else the date.
func mailShort(t time.Time) string {
	switch {
	case t.Year() == epoch.Year() && t.YearDay() == epoch.YearDay():
		return t.Format("15:04")
	case t.Year() == epoch.Year():
		return t.Format("Jan 2")
	}
	return t.Format("Jan 2, 2006")
}

func (m *mail) who(msg *mailMessage) string {
	if msg.FromName != "" {
		return msg.FromName
	}
	return msg.From
}

func (m *mail) msgView(msg *mailMessage) *mailMsgView {
	return &mailMsgView{mailMessage: *msg, URL: "/message/" + msg.ID, FolderURL: mailFolderURL(msg.Folder),
		DateLong: msg.when.Format("Mon, Jan 2, 2006 at 15:04"), Who: m.who(msg), InTrash: msg.Folder == "Trash"}
}

// sorted is the messages newest first (data order among equals).
func (m *mail) sorted(keep func(*mailMessage) bool) []*mailMessage {
	var out []*mailMessage
	for _, msg := range m.msgs {
		if !msg.Deleted && keep(msg) {
			out = append(out, msg)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].when.Equal(out[j].when) {
			return out[i].when.After(out[j].when)
		}
		return out[i].seq < out[j].seq
	})
	return out
}

// list is a folder's page; "*starred" and "*search" are the virtual ones.
func (m *mail) list(r *http.Request, which string) answer {
	q := r.URL.Query()
	var keep func(*mailMessage) bool
	var v *mailView
	base := ""
	pq := url.Values{}
	switch which {
	case "*starred":
		v = m.view(r, "Starred", which)
		v.Heading, base, v.FolderCol = "Starred", "/starred", true
		v.Empty = "No starred messages. Stars let you give messages a special status to make them easier to find."
		keep = func(msg *mailMessage) bool { return msg.Starred && msg.Folder != "Trash" }
	case "*search":
		v = m.view(r, "Search", "")
		base, v.FolderCol = "/search", true
		in := m.folder(q.Get("folder"))
		v.SearchOpts = append(v.SearchOpts, mailOpt{"", "All mail", in == ""})
		for _, f := range m.folders {
			v.SearchOpts = append(v.SearchOpts, mailOpt{f, f, f == in})
		}
		terms := strings.Fields(strings.ToLower(v.Q))
		if len(terms) > 10 {
			terms = terms[:10]
		}
		pq.Set("q", v.Q)
		if in != "" {
			pq.Set("folder", in)
		}
		v.Heading = "Search results"
		if v.Q != "" {
			v.Heading = "Search results for “" + v.Q + "”"
		}
		v.Empty = "No messages matched your search."
		keep = func(msg *mailMessage) bool {
			if in != "" && msg.Folder != in {
				return false
			}
			hay := strings.ToLower(msg.From + " " + msg.FromName + " " + msg.To + " " + msg.Cc + " " + msg.Subject + " " + msg.Body + " " + strings.Join(msg.Attachments, " "))
			for _, t := range terms {
				if !strings.Contains(hay, t) {
					return false
				}
			}
			return true
		}
	default:
		f := m.folder(which)
		if f == "" {
			return m.errorPage(r, http.StatusNotFound, "Folder not found", "There is no folder by that name.")
		}
		v = m.view(r, f, f)
		v.Heading, base, v.ToColumn = f, mailFolderURL(f), f == "Sent"
		v.Empty = "No conversations in " + f + "."
		keep = func(msg *mailMessage) bool { return msg.Folder == f }
	}
	msgs := m.sorted(keep)
	var lo, hi int
	v.Pager, lo, hi = paginate(len(msgs), mailPerPage, q.Get("page"), base, pq)
	for _, msg := range msgs[lo:hi] {
		who := m.who(msg)
		if msg.Folder == "Sent" {
			who = "To: " + msg.To
		}
		snip := strings.Join(strings.Fields(msg.Body), " ")
		if r := []rune(snip); len(r) > 90 {
			snip = string(r[:90]) + "…"
		}
		subj := msg.Subject
		if strings.TrimSpace(subj) == "" {
			subj = "(no subject)"
		}
		v.Rows = append(v.Rows, mailRow{ID: msg.ID, URL: "/message/" + msg.ID, Who: who, Subject: subj, Snippet: snip,
			Date: mailShort(msg.when), Folder: msg.Folder, Unread: msg.Unread, Starred: msg.Starred, Attach: len(msg.Attachments) > 0})
	}
	return render(mailPages["list"], 200, v)
}

func (m *mail) live(id string) *mailMessage {
	if msg := m.byID[id]; msg != nil && !msg.Deleted {
		return msg
	}
	return nil
}

func (m *mail) moveOpts(msg *mailMessage, want string) []mailOpt {
	var out []mailOpt
	want = m.folder(want)
	for _, f := range m.folders {
		if f != msg.Folder {
			out = append(out, mailOpt{f, f, f == want})
		}
	}
	return out
}

func (m *mail) messagePage(r *http.Request) answer {
	msg := m.live(r.PathValue("id"))
	if msg == nil {
		return m.notFound(r)
	}
	v := m.view(r, msg.Subject, msg.Folder)
	v.M = m.msgView(msg)
	v.MoveOpts = m.moveOpts(msg, "")
	v.Crumbs = []crumb{{"Mailbox", "/"}, {msg.Folder, v.M.FolderURL}, {mailSubject(msg.Subject), ""}}
	return render(mailPages["message"], 200, v)
}

func mailSubject(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no subject)"
	}
	return s
}

// prefix puts "Re: " or "Fwd: " before a subject that lacks it.
func mailPrefix(p, subject string, also ...string) string {
	l := strings.ToLower(strings.TrimSpace(subject))
	for _, a := range append(also, p) {
		if strings.HasPrefix(l, strings.ToLower(a)) {
			return strings.TrimSpace(subject)
		}
	}
	return p + " " + strings.TrimSpace(subject)
}

// splitAddrs reads a To or Cc field: addresses separated by commas or
// semicolons, each plain or "Name <addr>"; lower-cased, deduplicated.
func mailSplitAddrs(s string) ([]string, string) {
	out := []string{}
	seen := map[string]bool{}
	for _, part := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' }) {
		a := strings.TrimSpace(part)
		if a == "" {
			continue
		}
		if i := strings.LastIndexByte(a, '<'); i >= 0 && strings.HasSuffix(a, ">") {
			a = strings.TrimSpace(a[i+1 : len(a)-1])
		}
		if !mailboxOK(a) {
			return nil, "“" + mailClip(strings.TrimSpace(part), 80) + "” is not a valid email address."
		}
		a = strings.ToLower(a)
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	if len(out) > mailMaxRcpt {
		return nil, fmt.Sprintf("At most %d addresses.", mailMaxRcpt)
	}
	return out, ""
}

func (m *mail) fileOpts(chosen string) []mailOpt {
	out := []mailOpt{{"", "No attachment", chosen == ""}}
	for _, f := range m.files {
		out = append(out, mailOpt{f, f, f == chosen})
	}
	return out
}

// composeView builds the compose page for c (kind compose, reply or forward).
func (m *mail) composeView(r *http.Request, c mailCompose) *mailView {
	title := map[string]string{"compose": "New message", "reply": "Reply", "forward": "Forward"}[c.Kind]
	v := m.view(r, title, "")
	v.Flash = ""
	v.C = c
	v.Errs = map[string]string{}
	v.Files = m.fileOpts(c.Attach)
	orig := c.InReplyTo
	if orig == "" {
		orig = c.ForwardedFrom
	}
	if msg := m.live(orig); msg != nil {
		v.Orig = m.msgView(msg)
		if c.ForwardedFrom != "" {
			v.Carried = msg.Attachments
		}
		v.Crumbs = []crumb{{"Mailbox", "/"}, {msg.Folder, mailFolderURL(msg.Folder)}, {mailSubject(msg.Subject), "/message/" + msg.ID}, {title, ""}}
	} else {
		v.Crumbs = []crumb{{"Mailbox", "/"}, {title, ""}}
	}
	return v
}

func (m *mail) composePage(r *http.Request, kind string) answer {
	q := r.URL.Query()
	get := func(k string, max int) string {
		t, _ := cleanLine(mailClip(q.Get(k), max*4), max)
		return t
	}
	body, _ := cleanText(mailClip(q.Get("body"), mailMaxBody*4), mailMaxBody)
	c := mailCompose{Kind: kind, To: get("to", 2000), Cc: get("cc", 2000), Subject: get("subject", 200), Body: body}
	if a := q.Get("attach"); a != "" {
		for _, f := range m.files {
			if f == a {
				c.Attach = f
			}
		}
	}
	if kind != "compose" {
		msg := m.live(r.PathValue("id"))
		if msg == nil {
			return m.notFound(r)
		}
		if kind == "reply" {
			c.InReplyTo, c.FocusBody = msg.ID, true
			c.Subject = mailPrefix("Re:", msg.Subject)
			to := msg.From
			if strings.EqualFold(msg.From, m.user.Email) || msg.Folder == "Sent" {
				to = msg.To
			}
			c.To = to
			if q.Get("all") != "" {
				var cc []string
				self := strings.ToLower(m.user.Email)
				for _, a := range strings.FieldsFunc(msg.To+","+msg.Cc, func(r rune) bool { return r == ',' || r == ';' }) {
					a = strings.TrimSpace(a)
					if a != "" && !strings.EqualFold(a, self) && !strings.EqualFold(a, to) {
						cc = append(cc, a)
					}
				}
				c.Cc = strings.Join(cc, ", ")
			}
		} else {
			c.ForwardedFrom = msg.ID
			c.Subject = mailPrefix("Fwd:", msg.Subject, "Fw:")
		}
	}
	return render(mailPages["compose"], 200, m.composeView(r, c))
}

func (m *mail) send(r *http.Request, f url.Values) answer {
	errs := map[string]string{}
	c := mailCompose{Kind: "compose", InReplyTo: f.Get("in_reply_to"), ForwardedFrom: f.Get("forwarded_from")}
	var msg string
	if c.To, msg = cleanLine(f.Get("to"), 2000); msg != "" {
		errs["to"] = msg
	}
	if c.Cc, msg = cleanLine(f.Get("cc"), 2000); msg != "" {
		errs["cc"] = msg
	}
	if c.Subject, msg = cleanLine(f.Get("subject"), 200); msg != "" {
		errs["subject"] = msg
	}
	if c.Body, msg = cleanText(f.Get("body"), mailMaxBody); msg != "" {
		errs["body"] = msg
	}
	to, cc := []string{}, []string{}
	if errs["to"] == "" {
		if to, msg = mailSplitAddrs(c.To); msg != "" {
			errs["to"] = msg
		} else if len(to) == 0 {
			errs["to"] = "Add at least one recipient."
		}
	}
	if errs["cc"] == "" {
		if cc, msg = mailSplitAddrs(c.Cc); msg != "" {
			errs["cc"] = msg
		}
	}
	var orig *mailMessage
	switch {
	case c.InReplyTo != "" && c.ForwardedFrom != "":
		return m.errorPage(r, http.StatusBadRequest, "Bad request", "A message is a reply or a forward, not both.")
	case c.InReplyTo != "":
		if orig = m.live(c.InReplyTo); orig == nil {
			return m.notFound(r)
		}
		c.Kind = "reply"
		c.FocusBody = true
	case c.ForwardedFrom != "":
		if orig = m.live(c.ForwardedFrom); orig == nil {
			return m.notFound(r)
		}
		c.Kind = "forward"
	}
	attach := []string{}
	if c.Kind == "forward" {
		attach = append(attach, orig.Attachments...)
	}
	for _, a := range f["attach"] {
		if a == "" {
			continue
		}
		ok := false
		for _, file := range m.files {
			ok = ok || file == a
		}
		if !ok {
			errs["attach"] = "Choose a file from the list."
			continue
		}
		c.Attach = a
		dup := false
		for _, b := range attach {
			dup = dup || a == b
		}
		if !dup {
			attach = append(attach, a)
		}
	}
	if len(errs) > 0 {
		if k := firstErr(errs, "to", "cc", "subject", "body", "attach"); k != "" {
			c.Focus = k
		}
		v := m.composeView(r, c)
		v.Errs, v.ErrCount = errs, len(errs)
		return render(mailPages["compose"], http.StatusUnprocessableEntity, v)
	}
	if len(m.sent) >= mailMaxSent {
		return m.tooMany(r, fmt.Sprintf("You have sent %d messages, the most this mailbox allows.", mailMaxSent))
	}
	n := len(m.sent) + 1
	id := "sent-" + strconv.Itoa(n)
	for m.byID[id] != nil {
		n++
		id = "sent-" + strconv.Itoa(n)
	}
	when := epoch.Add(time.Duration(len(m.sent)+1) * time.Minute)
	s := mailSent{ID: id, To: to, Cc: cc, Subject: c.Subject, Body: c.Body, InReplyTo: c.InReplyTo,
		ForwardedFrom: c.ForwardedFrom, Attachments: attach, Date: when.Format("2006-01-02 15:04")}
	if !m.add("send", map[string]string{"id": id, "to": strings.Join(to, ", "), "cc": strings.Join(cc, ", "), "subject": s.Subject,
		"body": s.Body, "in_reply_to": s.InReplyTo, "forwarded_from": s.ForwardedFrom, "attachments": strings.Join(attach, ", ")}) {
		return m.tooMany(r, "This mailbox can’t record any more changes.")
	}
	m.sent = append(m.sent, s)
	if err := m.addMessage(mailMessage{ID: id, Folder: "Sent", From: m.user.Email, FromName: m.user.Name, To: strings.Join(to, ", "),
		Cc: strings.Join(cc, ", "), Subject: s.Subject, Date: s.Date, Body: s.Body, Attachments: append([]string{}, attach...)}); err != nil {
		// Cannot happen (the id is fresh, Sent exists); keep the state whole.
		m.sent = m.sent[:len(m.sent)-1]
		m.Log = m.Log[:len(m.Log)-1]
		return m.errorPage(r, http.StatusInternalServerError, "Not sent", "The message could not be stored.")
	}
	return redirect("/?msg=sent")
}

func (m *mail) movePage(r *http.Request) answer {
	msg := m.live(r.PathValue("id"))
	if msg == nil {
		return m.notFound(r)
	}
	v := m.view(r, "Move message", msg.Folder)
	v.M = m.msgView(msg)
	want := r.URL.Query().Get("folder")
	if m.folder(want) == "" {
		want = "Archive"
	}
	v.MoveOpts = m.moveOpts(msg, want)
	v.Crumbs = []crumb{{"Mailbox", "/"}, {msg.Folder, v.M.FolderURL}, {mailSubject(msg.Subject), v.M.URL}, {"Move", ""}}
	return render(mailPages["move"], 200, v)
}

func (m *mail) move(r *http.Request, f url.Values) answer {
	msg := m.live(r.PathValue("id"))
	if msg == nil {
		return m.notFound(r)
	}
	to := m.folder(f.Get("folder"))
	if to == "" || to == msg.Folder {
		v := m.view(r, "Move message", msg.Folder)
		v.M = m.msgView(msg)
		v.MoveOpts = m.moveOpts(msg, "")
		v.Errs = map[string]string{"folder": "Choose a folder to move the message to."}
		if to != "" {
			v.Errs["folder"] = "The message is already in " + to + "."
		}
		return render(mailPages["move"], http.StatusUnprocessableEntity, v)
	}
	from := msg.Folder
	if !m.add("move", map[string]string{"id": msg.ID, "from": from, "to": to}) {
		return m.tooMany(r, "This mailbox can’t record any more changes.")
	}
	msg.Folder = to
	return redirect(mailFolderURL(from) + "?msg=moved&id=" + url.QueryEscape(msg.ID))
}

// confirmPage is the one-button page of delete, star and mark.
func (m *mail) confirmPage(r *http.Request) answer {
	msg := m.live(r.PathValue("id"))
	if msg == nil {
		return m.notFound(r)
	}
	v := m.view(r, "", msg.Folder)
	v.M = m.msgView(msg)
	v.Action = "/message/" + msg.ID + "/" + r.PathValue("act")
	switch r.PathValue("act") {
	case "delete":
		v.Title, v.Danger = "Delete message", true
		if msg.Folder == "Trash" {
			v.Prompt, v.Button = "Delete this message forever? This can’t be undone.", "Delete forever"
		} else {
			v.Prompt, v.Button = "Move this message to Trash?", "Move to Trash"
		}
	case "star":
		v.Title, v.Field = "Star message", "starred"
		if msg.Starred {
			v.Prompt, v.Button, v.Value = "This message is starred.", "Remove star", "0"
		} else {
			v.Prompt, v.Button, v.Value = "This message is not starred.", "Add star", "1"
		}
	case "mark":
		v.Title, v.Field = "Mark message", "unread"
		if msg.Unread {
			v.Prompt, v.Button, v.Value = "This message is unread.", "Mark as read", "0"
		} else {
			v.Prompt, v.Button, v.Value = "This message is read.", "Mark as unread", "1"
		}
	default:
		return m.errorPage(r, http.StatusNotFound, "Not found", "There is nothing at this address.")
	}
	v.Crumbs = []crumb{{"Mailbox", "/"}, {msg.Folder, v.M.FolderURL}, {mailSubject(msg.Subject), v.M.URL}, {v.Title, ""}}
	return render(mailPages["confirm"], 200, v)
}

// act posts delete, star (starred=1|0) and mark (unread=1|0).
func (m *mail) act(r *http.Request, f url.Values) answer {
	msg := m.live(r.PathValue("id"))
	act := r.PathValue("act")
	if act != "delete" && act != "star" && act != "mark" {
		return m.errorPage(r, http.StatusNotFound, "Not found", "There is nothing at this address.")
	}
	if msg == nil {
		return m.notFound(r)
	}
	full := func() answer { return m.tooMany(r, "This mailbox can’t record any more changes.") }
	flag := func(k string) (bool, bool) {
		switch f.Get(k) {
		case "1", "true", "on":
			return true, true
		case "0", "false", "off":
			return false, true
		}
		return false, false
	}
	back := "/message/" + msg.ID + "?msg="
	// toggle sets a mark from the form's field k, logging action (with
	// k) when it changes, and goes back to the message.
	toggle := func(k, action string, mark *bool, on, off string) answer {
		v, ok := flag(k)
		if !ok {
			return m.errorPage(r, http.StatusBadRequest, "Bad request", "The form was incomplete.")
		}
		if v != *mark {
			if !m.add(action, map[string]string{"id": msg.ID, k: strconv.FormatBool(v)}) {
				return full()
			}
			*mark = v
		}
		if v {
			return redirect(back + on)
		}
		return redirect(back + off)
	}
	switch act {
	case "delete":
		if msg.Folder == "Trash" {
			if !m.add("delete_forever", map[string]string{"id": msg.ID}) {
				return full()
			}
			msg.Deleted = true
			return redirect("/folder/Trash?msg=purged")
		}
		from := msg.Folder
		if !m.add("delete", map[string]string{"id": msg.ID, "from": from}) {
			return full()
		}
		msg.Folder = "Trash"
		return redirect(mailFolderURL(from) + "?msg=deleted")
	case "star":
		return toggle("starred", "star", &msg.Starred, "starred", "unstarred")
	default:
		return toggle("unread", "mark", &msg.Unread, "unread", "read")
	}
}

// mailFS holds the mail's page templates.
//
//go:embed pages/mail/*.html
var mailFS embed.FS

var mailPages = parsePages(mailFS, "pages/mail", plainFuncs)
