package webapp

// The mail app: a webmail ("Mailbox") with folders, a message list,
// reading, replying, forwarding, composing with an attachment picked from
// the user's files, moving, deleting (to Trash), stars, read/unread
// marks and search.
//
// Keyboard paths. Every change is a POST from a form whose page gives the
// form's first relevant field focus (autofocus); the page's own content
// comes before the site header and folder list in the DOM (CSS draws them
// around it), so Tab order starts in the form. To open a page: ctrl+l,
// type the URL (http://mail.test/...), Enter. Opening a message never
// marks it read (GETs change nothing): marking is its own action.
//
//	compose   open /compose (optionally ?to=&cc=&subject=&body=&attach=,
//	          URL-escaped; several addresses separated by commas); To has
//	          focus. Tab order: To, Cc, Subject, Body, Attach file (a
//	          select: type the file name to pick it), Send. Enter in To, Cc
//	          or Subject sends; from Body: Tab, Tab, Enter (Enter in Body
//	          is a newline). So with everything in the URL: open, Enter.
//	          Done: 303 to /?msg=sent.
//	reply     open /message/ID/reply (?all=1 replies to all; ?body= and
//	          ?attach= prefill); Body has focus (To, Cc and "Re: subject"
//	          are filled in, the original is quoted below the form, not in
//	          Body); type the reply, Tab (Attach file), Tab (Send), Enter.
//	          Done: 303 to /?msg=sent.
//	forward   open /message/ID/forward (?to=, ?body=, ?attach= prefill);
//	          To has focus (Subject is "Fwd: subject"; the original's
//	          attachments go along); type the address(es), Enter.
//	          Done: 303 to /?msg=sent.
//	move      open /message/ID/move?folder=NAME; the Folder select has
//	          focus with NAME chosen (without ?folder=, Archive is chosen:
//	          type the folder's name to pick another); Tab (Move), Enter.
//	          Done: 303 to the folder the message was in, ?msg=moved&id=ID.
//	delete    open /message/ID/delete; the "Move to Trash" button has focus
//	          (in Trash: "Delete forever"); Enter. Done: 303 to the folder
//	          it was in, ?msg=deleted (from Trash: /folder/Trash?msg=purged).
//	star      open /message/ID/star; the "Add star" button has focus (on a
//	          starred message it is "Remove star"); Enter. Done: 303 to
//	          /message/ID?msg=starred (or unstarred).
//	read mark open /message/ID/mark; the "Mark as read" button has focus (on
//	          a read message it is "Mark as unread"); Enter. Done: 303 to
//	          /message/ID?msg=read (or unread).
//
// A rejected form (no or a bad address, an unknown file, the folder the
// message is already in) answers 422 with the form shown again as typed,
// each error beside its field and the first invalid field focused; nothing
// changes. The message page (/message/ID) has the same actions in a
// toolbar, in Tab order: Reply, Reply all, Forward, Star, Mark read/unread,
// Delete, Move-to select, Move. Read-only pages: / (the Inbox),
// /folder/NAME, /starred, /search?q=&folder= (page=N on lists),
// /message/ID. Folder URLs path-escape the name (/folder/Project%20X).

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

func init() { register("mail", newMail) }

const (
	mailMaxMessages = 5000 // messages in the data (and in a saved state)
	mailMaxSent     = 500  // messages one instance sends
	mailMaxRcpt     = 20   // addresses in To (and in Cc)
	mailMaxFiles    = 500
	mailMaxAttach   = 5 // files one message attaches
	mailPerPage     = 25
	mailMaxBody     = 8000 // characters
)

var mailBuiltin = []string{"Inbox", "Sent", "Archive", "Trash"}

// mailData is the mail app's instance data:
//
//	{
//	  "user": {"name": "Ada Park", "email": "ada.park@example.com"},
//	  "folders": ["Receipts", "Projects"],              // custom folders
//	  "messages": [{"id": "m1", "folder": "Inbox", "from": "li@acme.test",
//	                "from_name": "Li Wei", "to": "ada.park@example.com",
//	                "cc": "", "subject": "Q3 report", "date": "2026-03-01 16:20",
//	                "body": "Hi Ada, ...", "unread": true, "starred": false,
//	                "attachments": ["q3.pdf"]}],
//	  "files": ["resume.pdf", "q3-budget.xlsx"]
//	}
//
// Inbox, Sent, Archive and Trash always exist; "folders" adds custom
// ones (1–40 characters, no "/", not "Starred"; a name repeating a folder,
// in any case, is dropped). A message's id is a string or a number, 1–64
// of A–Z a–z 0–9 . _ - (a duplicate is an error; a missing one becomes
// "m<N>", N its 1-based place); its folder matches a folder's name
// case-insensitively, "" is Inbox, and an unknown one is added as a custom
// folder; to and cc are strings ("a@x, b@y") or lists ("" to is the
// user); date is "YYYY-MM-DD HH:MM" (also accepted: "YYYY-MM-DD", seconds,
// a T, RFC 3339; "" is the app's today, 2026-03-02 09:00); attachments
// (optional) are file names shown on the message. "files" are the user's
// files the Attach select offers. A sent message is dated today plus one
// minute per message sent before it (09:01, 09:02, ...).
type mailData struct {
	User     person    `json:"user"`
	Folders  []string  `json:"folders"`
	Messages []mailRaw `json:"messages"`
	Files    []string  `json:"files"`
}

type mailRaw struct {
	ID          json.RawMessage `json:"id"`
	Folder      string          `json:"folder"`
	From        string          `json:"from"`
	FromName    string          `json:"from_name"`
	To          json.RawMessage `json:"to"`
	Cc          json.RawMessage `json:"cc"`
	Subject     string          `json:"subject"`
	Date        string          `json:"date"`
	Body        string          `json:"body"`
	Unread      bool            `json:"unread"`
	Starred     bool            `json:"starred"`
	Attachments []string        `json:"attachments"`
	Deleted     bool            `json:"deleted"`
}

// mailMessage is a message as State reports it (every message: the
// data's and the sent ones, each with its current folder and marks; a
// message deleted from Trash stays, with deleted true).
type mailMessage struct {
	ID          string   `json:"id"`
	Folder      string   `json:"folder"`
	From        string   `json:"from"`
	FromName    string   `json:"from_name"`
	To          string   `json:"to"`
	Cc          string   `json:"cc"`
	Subject     string   `json:"subject"`
	Date        string   `json:"date"`
	Body        string   `json:"body"`
	Unread      bool     `json:"unread"`
	Starred     bool     `json:"starred"`
	Attachments []string `json:"attachments"`
	Deleted     bool     `json:"deleted"`

	when time.Time
	seq  int // place in the data, for a stable order
}

// mailSent is one message the user sent. To and Cc are lower-cased
// addresses; body is what the user typed (the quoted original of a reply
// or forward is not in it); attachments are the files picked, after a
// forward's carried attachments.
type mailSent struct {
	ID            string   `json:"id"`
	To            []string `json:"to"`
	Cc            []string `json:"cc"`
	Subject       string   `json:"subject"`
	Body          string   `json:"body"`
	InReplyTo     string   `json:"in_reply_to"`
	ForwardedFrom string   `json:"forwarded_from"`
	Attachments   []string `json:"attachments"`
	Date          string   `json:"date"`
}

// mailState is State's JSON; a saved one resumes messages, sent and log.
type mailState struct {
	User     person        `json:"user"`
	Folders  []string      `json:"folders"`
	Files    []string      `json:"files"`
	Messages []mailMessage `json:"messages"`
	Sent     []mailSent    `json:"sent"`
	Log      []Event       `json:"log"`
}

type mail struct {
	journal
	user    person
	folders []string // built-ins then custom
	files   []string
	msgs    []*mailMessage
	byID    map[string]*mailMessage
	sent    []mailSent
	web     router
}

var mailDateForms = []string{"2006-01-02 15:04", "2006-01-02 15:04:05", "2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339, "2006-01-02"}

func mailParseDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return epoch, nil
	}
	for _, f := range mailDateForms {
		if t, err := time.Parse(f, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("date %q is not YYYY-MM-DD HH:MM", s)
}

// mailAddrs reads to/cc from data: a string or a list of strings.
func mailAddrs(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return strings.TrimSpace(s), nil
	}
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return "", fmt.Errorf("to/cc must be a string or a list of strings")
	}
	return strings.Join(l, ", "), nil
}

// folder finds a folder by name, case-insensitively.
func (m *mail) folder(name string) string {
	for _, f := range m.folders {
		if strings.EqualFold(f, name) {
			return f
		}
	}
	return ""
}

func (m *mail) addFolder(name string) error {
	name = strings.TrimSpace(name)
	if name == "" || len([]rune(name)) > 40 || strings.ContainsAny(name, "/\\") {
		return fmt.Errorf("bad folder name %q (1-40 characters, no slashes)", name)
	}
	if _, msg := cleanLine(name, 40); msg != "" || strings.EqualFold(name, "starred") {
		return fmt.Errorf("bad folder name %q", name)
	}
	if m.folder(name) == "" {
		m.folders = append(m.folders, name)
	}
	return nil
}

// addMessage checks a message and adds it.
func (m *mail) addMessage(msg mailMessage) error {
	if !tokenOK(msg.ID, 64) {
		return fmt.Errorf("message id %q: 1-64 of A-Z a-z 0-9 . _ -", msg.ID)
	}
	if m.byID[msg.ID] != nil {
		return fmt.Errorf("duplicate message id %q", msg.ID)
	}
	if len(m.msgs) >= mailMaxMessages+mailMaxSent {
		return fmt.Errorf("too many messages")
	}
	if strings.TrimSpace(msg.Folder) == "" {
		msg.Folder = "Inbox"
	}
	if m.folder(msg.Folder) == "" {
		if err := m.addFolder(msg.Folder); err != nil {
			return fmt.Errorf("message %s: %w", msg.ID, err)
		}
	}
	msg.Folder = m.folder(msg.Folder)
	t, err := mailParseDate(msg.Date)
	if err != nil {
		return fmt.Errorf("message %s: %w", msg.ID, err)
	}
	msg.when, msg.Date = t, t.Format("2006-01-02 15:04")
	msg.From = strings.TrimSpace(msg.From)
	msg.FromName = strings.TrimSpace(msg.FromName)
	if msg.Attachments == nil {
		msg.Attachments = []string{}
	}
	msg.seq = len(m.msgs)
	m.msgs = append(m.msgs, &msg)
	m.byID[msg.ID] = &msg
	return nil
}

// newMail builds the mail app from its data (see mailData) and, with
// saved set, resumes a State.
func newMail(data, saved []byte) (App, error) {
	var d mailData
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("mail: data: %w", err)
	}
	m := &mail{user: d.User, byID: map[string]*mailMessage{}, sent: []mailSent{}, files: []string{}}
	m.Log = []Event{}
	m.user.Email = strings.TrimSpace(m.user.Email)
	if m.user.Email == "" {
		m.user.Email = "me@mailbox.test"
	}
	if m.user.Name = strings.TrimSpace(m.user.Name); m.user.Name == "" {
		m.user.Name = m.user.Email
	}
	m.folders = append(m.folders, mailBuiltin...)
	for _, f := range d.Folders {
		if err := m.addFolder(f); err != nil {
			return nil, fmt.Errorf("mail: %w", err)
		}
	}
	if len(d.Files) > mailMaxFiles {
		return nil, fmt.Errorf("mail: %d files, over %d", len(d.Files), mailMaxFiles)
	}
	seenFile := map[string]bool{}
	for _, f := range d.Files {
		f = strings.TrimSpace(f)
		if t, msg := cleanLine(f, 200); msg != "" || t == "" {
			return nil, fmt.Errorf("mail: bad file name %q", f)
		}
		if !seenFile[f] {
			seenFile[f] = true
			m.files = append(m.files, f)
		}
	}
	if len(d.Messages) > mailMaxMessages {
		return nil, fmt.Errorf("mail: %d messages, over %d", len(d.Messages), mailMaxMessages)
	}
	if saved == nil {
		for i, r := range d.Messages {
			msg := mailMessage{Folder: r.Folder, From: r.From, FromName: r.FromName, Subject: r.Subject,
				Date: r.Date, Body: r.Body, Unread: r.Unread, Starred: r.Starred, Attachments: r.Attachments, Deleted: r.Deleted}
			id := strings.TrimSpace(string(r.ID))
			if len(r.ID) == 0 || id == "null" || id == `""` {
				msg.ID = "m" + strconv.Itoa(i+1)
			} else if err := json.Unmarshal(r.ID, &msg.ID); err != nil {
				var n json.Number
				if err := json.Unmarshal(r.ID, &n); err != nil {
					return nil, fmt.Errorf("mail: message %d: id is neither a string nor a number", i+1)
				}
				msg.ID = n.String()
			}
			var err error
			if msg.To, err = mailAddrs(r.To); err != nil {
				return nil, fmt.Errorf("mail: message %s: %w", msg.ID, err)
			}
			if msg.Cc, err = mailAddrs(r.Cc); err != nil {
				return nil, fmt.Errorf("mail: message %s: %w", msg.ID, err)
			}
			if msg.To == "" {
				msg.To = m.user.Email
			}
			if err := m.addMessage(msg); err != nil {
				return nil, fmt.Errorf("mail: %w", err)
			}
		}
	} else if err := m.resume(saved); err != nil {
		return nil, fmt.Errorf("mail: saved state: %w", err)
	}
	m.routes()
	return m, nil
}

func (m *mail) resume(saved []byte) error {
	var st mailState
	if err := json.Unmarshal(saved, &st); err != nil {
		return err
	}
	if len(st.Messages) > mailMaxMessages+mailMaxSent || len(st.Sent) > mailMaxSent || len(st.Log) > MaxLog {
		return fmt.Errorf("too many messages or events")
	}
	for _, msg := range st.Messages {
		if err := m.addMessage(msg); err != nil {
			return err
		}
	}
	for _, s := range st.Sent {
		if m.byID[s.ID] == nil {
			return fmt.Errorf("sent message %q has no message", s.ID)
		}
		for _, l := range []*[]string{&s.To, &s.Cc, &s.Attachments} {
			if *l == nil {
				*l = []string{}
			}
		}
		m.sent = append(m.sent, s)
	}
	m.Log = append(m.Log, st.Log...)
	return nil
}

// State reports the folders, files, every message, the sent ones and the log.
func (m *mail) State() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := mailState{User: m.user, Folders: m.folders, Files: m.files, Sent: m.sent, Log: m.Log}
	st.Messages = values(m.msgs)
	return json.Marshal(st)
}

func (m *mail) ServeHTTP(w http.ResponseWriter, r *http.Request) { m.web.ServeHTTP(w, r) }

func (m *mail) routes() {
	m.web = newRouter(&m.mu, plainStyle)
	m.web.repeatOK = func(k string, n int) bool { return k == "attach" && n <= mailMaxAttach } // only "attach" may repeat
	x := &m.web
	x.get("/{$}", func(r *http.Request) answer { return m.list(r, "Inbox") })
	x.get("/folder/{name}", func(r *http.Request) answer { return m.list(r, r.PathValue("name")) })
	x.get("/starred", func(r *http.Request) answer { return m.list(r, "*starred") })
	x.get("/search", func(r *http.Request) answer { return m.list(r, "*search") })
	x.get("/message/{id}", m.messagePage)
	x.get("/message/{id}/reply", func(r *http.Request) answer { return m.composePage(r, "reply") })
	x.get("/message/{id}/forward", func(r *http.Request) answer { return m.composePage(r, "forward") })
	x.get("/compose", func(r *http.Request) answer { return m.composePage(r, "compose") })
	x.post("/compose", m.send)
	x.get("/message/{id}/move", m.movePage)
	x.post("/message/{id}/move", m.move)
	x.get("/message/{id}/{act}", m.confirmPage)
	x.post("/message/{id}/{act}", m.act)
	x.handle("/", func(r *http.Request) answer {
		return m.errorPage(r, http.StatusNotFound, "Not found", "There is nothing at this address.")
	})
}
