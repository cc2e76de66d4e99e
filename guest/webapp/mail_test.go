package webapp

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
)

func mailStateOf(t *testing.T, a App) mailState {
	t.Helper()
	var st mailState
	appState(t, a, &st)
	return st
}

func mailMsg(st mailState, id string) mailMessage {
	for _, m := range st.Messages {
		if m.ID == id {
			return m
		}
	}
	return mailMessage{}
}

func mailManyAddrs(n int) string {
	var l []string
	for i := range n {
		l = append(l, fmt.Sprintf("x%d@y.zz", i))
	}
	return strings.Join(l, ", ")
}

func TestMailPages(t *testing.T) {
	a, _ := loadApp(t, "mail")
	for path, want := range map[string][]string{
		"/":                             {"Mailbox", "Inbox", "Q1 budget review — numbers due Friday", "1–25 of 27", `href="/?page=2"`, "08:14", "Mar 1", `href="/folder/Receipts"`, `<span class="n">3</span>`},
		"/?page=2":                      {"26–27 of 27", "Parking permit"},
		"/folder/Receipts":              {"Your receipt from CoffeeCo", "Order confirmation NM-398114"},
		"/folder/receipts":              {"Your receipt from CoffeeCo"},
		"/folder/Sent":                  {"To: dan.okafor@acme-corp.test", "Re: API rate limits"},
		"/folder/Travel":                {"No conversations in Travel."},
		"/folder/Trash":                 {"FINAL HOURS"},
		"/starred":                      {"Offsite agenda (draft)", "Design review notes", "Migration plan v2"},
		"/search?q=marcus":              {"Search results for “marcus”", "Offsite agenda (draft)", "Travel approval needed", "Offsite dates"},
		"/search?q=globex&folder=Inbox": {"Customer escalation: Globex", "1–1 of 1"},
		"/search?q=zzzz":                {"No messages matched your search."},
		"/message/m3":                   {"Offsite agenda (draft)", "marcus.bell@acme-corp.test", "offsite-agenda.pdf", "cc priya.nair@acme-corp.test", `action="/message/m3/move"`, "Remove star", "Mark as unread"},
		"/message/m1":                   {"Mark as read", "Add star"},
		"/message/m3/reply":             {`value="marcus.bell@acme-corp.test"`, `value="Re: Offsite agenda (draft)"`, `name="in_reply_to" value="m3"`, "Marcus Bell &lt;marcus.bell@acme-corp.test&gt; wrote:", "autofocus>"},
		"/message/m3/reply?all=1":       {`id="cc" name="cc" value="priya.nair@acme-corp.test, dan.okafor@acme-corp.test"`},
		"/message/m7/reply":             {`value="Re: API rate limits"`},
		"/message/m34/reply":            {`value="dan.okafor@acme-corp.test"`},
		"/message/m3/forward":           {`value="Fwd: Offsite agenda (draft)"`, `name="forwarded_from" value="m3"`, "Forwarded message", "offsite-agenda.pdf"},
		"/compose?to=li.wei%40acme-corp.test&subject=Budget&body=Line+1%0ALine+2&attach=q1-budget.xlsx": {`value="li.wei@acme-corp.test"`, `value="Budget"`, "Line 1\nLine 2</textarea>", `<option value="q1-budget.xlsx" selected>`},
		"/compose?attach=nope.exe":         {`<option value="" selected>No attachment`},
		"/message/m3/move?folder=projects": {`<option value="Projects" selected>`, "autofocus"},
		"/message/m3/move":                 {`<option value="Archive" selected>`},
		"/message/m3/delete":               {"Move to Trash", "autofocus"},
		"/message/m36/delete":              {"Delete forever"},
		"/message/m3/star":                 {"Remove star", `name="starred" value="0"`},
		"/message/m1/star":                 {"Add star", `name="starred" value="1"`},
		"/message/m1/mark":                 {"Mark as read", `name="unread" value="0"`},
		"/message/m3/mark":                 {"Mark as unread", `name="unread" value="1"`},
	} {
		page := kitGet(t, a, path, 200)
		kitOffline(t, path, page)
		for _, w := range want {
			if !strings.Contains(page, w) {
				t.Errorf("GET %s: no %q in\n%s", path, w, kitText1(page))
			}
		}
		if n := strings.Count(page, "autofocus"); n > 1 {
			t.Errorf("GET %s: %d autofocus", path, n)
		}
	}
	for _, path := range []string{"/message/nope", "/message/nope/reply", "/message/m1/explode", "/folder/Nope", "/nothing", "/message/%3Cb%3E"} {
		kitGet(t, a, path, 404)
	}
	page := kitGet(t, a, "/search?q=%3Cscript%3E", 200)
	if strings.Contains(page, "<script>") {
		t.Error("search reflects markup")
	}
	// Reading a message does not mark it read.
	if !mailMsg(mailStateOf(t, a), "m1").Unread {
		t.Error("a GET marked a message read")
	}
}

func TestMailFlow(t *testing.T) {
	a, _ := loadApp(t, "mail")
	// Reply with an attachment.
	loc := kitPost(t, a, "/compose", url.Values{"to": {"marcus.bell@acme-corp.test"}, "cc": {""}, "subject": {"Re: Offsite agenda (draft)"},
		"body": {"Looks good to me.\r\nAda"}, "attach": {"offsite-notes.docx"}, "in_reply_to": {"m3"}})
	if loc != "/?msg=sent" {
		t.Fatalf("send redirects to %q", loc)
	}
	if page := kitGet(t, a, loc, 200); !strings.Contains(page, "Your message has been sent.") {
		t.Error("no sent flash")
	}
	// Forward (carries the original's attachments) to two people.
	kitPost(t, a, "/compose", url.Values{"to": {"Sofia <Sofia.Reyes@brightline.test>; tom.h@familymail.test"}, "subject": {"Fwd: Offsite agenda (draft)"},
		"body": {""}, "attach": {""}, "forwarded_from": {"m3"}})
	// A new message.
	kitPost(t, a, "/compose", url.Values{"to": {"li.wei@acme-corp.test"}, "cc": {"dan.okafor@acme-corp.test"}, "subject": {"Q1 budget"},
		"body": {"Attached."}, "attach": {"q1-budget.xlsx"}})
	// Move, delete, star, mark.
	if loc := kitPost(t, a, "/message/m9/move", url.Values{"folder": {"projects"}}); loc != "/?msg=moved&id=m9" {
		t.Fatalf("move redirects to %q", loc)
	}
	if page := kitGet(t, a, "/?msg=moved&id=m9", 200); !strings.Contains(page, "Conversation moved to Projects.") {
		t.Error("no moved flash")
	}
	kitPost(t, a, "/message/m30/move", url.Values{"folder": {"Archive"}})
	if loc := kitPost(t, a, "/message/m30/move", url.Values{"folder": {"Travel"}}); loc != "/folder/Archive?msg=moved&id=m30" {
		t.Fatalf("move from Archive redirects to %q", loc)
	}
	kitPost(t, a, "/message/m8/delete", nil)
	kitPost(t, a, "/message/m36/delete", nil) // in Trash: forever
	kitPost(t, a, "/message/m5/star", url.Values{"starred": {"1"}})
	kitPost(t, a, "/message/m3/star", url.Values{"starred": {"0"}})
	kitPost(t, a, "/message/m3/star", url.Values{"starred": {"0"}}) // no change, no event
	kitPost(t, a, "/message/m1/mark", url.Values{"unread": {"0"}})
	kitPost(t, a, "/message/m4/mark", url.Values{"unread": {"1"}})

	st := mailStateOf(t, a)
	if len(st.Sent) != 3 {
		t.Fatalf("sent %v", st.Sent)
	}
	s0, s1, s2 := st.Sent[0], st.Sent[1], st.Sent[2]
	if s0.ID != "sent-1" || fmt.Sprint(s0.To) != "[marcus.bell@acme-corp.test]" || s0.InReplyTo != "m3" || s0.Body != "Looks good to me.\nAda" || fmt.Sprint(s0.Attachments) != "[offsite-notes.docx]" || s0.Subject != "Re: Offsite agenda (draft)" {
		t.Fatalf("reply %+v", s0)
	}
	if fmt.Sprint(s1.To) != "[sofia.reyes@brightline.test tom.h@familymail.test]" || s1.ForwardedFrom != "m3" || fmt.Sprint(s1.Attachments) != "[offsite-agenda.pdf]" || s1.InReplyTo != "" {
		t.Fatalf("forward %+v", s1)
	}
	if fmt.Sprint(s2.Cc) != "[dan.okafor@acme-corp.test]" || fmt.Sprint(s2.Attachments) != "[q1-budget.xlsx]" || s2.Date != "2026-03-02 09:03" {
		t.Fatalf("new %+v", s2)
	}
	if m := mailMsg(st, "sent-3"); m.Folder != "Sent" || m.From != "ada.park@example.com" || m.To != "li.wei@acme-corp.test" || m.Unread {
		t.Fatalf("sent copy %+v", m)
	}
	for id, want := range map[string]string{"m9": "Projects", "m30": "Travel", "m8": "Trash", "m36": "Trash", "m1": "Inbox"} {
		if got := mailMsg(st, id).Folder; got != want {
			t.Errorf("%s in %q, want %q", id, got, want)
		}
	}
	if !mailMsg(st, "m36").Deleted || mailMsg(st, "m8").Deleted {
		t.Error("deleted flags wrong")
	}
	if !mailMsg(st, "m5").Starred || mailMsg(st, "m3").Starred || mailMsg(st, "m1").Unread || !mailMsg(st, "m4").Unread {
		t.Error("marks wrong")
	}
	var acts []string
	for _, e := range st.Log {
		acts = append(acts, e.Action)
	}
	if strings.Join(acts, " ") != "send send send move move move delete delete_forever star star mark mark" {
		t.Fatalf("log %v", acts)
	}
	if f := st.Log[3].Fields; f["id"] != "m9" || f["from"] != "Inbox" || f["to"] != "Projects" {
		t.Fatalf("move event %v", f)
	}
	// Pages follow: the Sent folder lists the new ones, Trash hides the purged.
	if page := kitGet(t, a, "/folder/Sent", 200); !strings.Contains(page, "Q1 budget") || !strings.Contains(page, "To: li.wei@acme-corp.test") {
		t.Error("Sent lacks the new message")
	}
	if page := kitGet(t, a, "/folder/Trash", 200); strings.Contains(page, "FINAL HOURS") || !strings.Contains(page, "March training schedule") {
		t.Error("Trash wrong")
	}
	kitGet(t, a, "/message/m36", 404)
	roundTrip(t, "mail", testdata(t, "mail"), a)
}

func TestMailValidation(t *testing.T) {
	a, _ := loadApp(t, "mail")
	before := appState(t, a, nil)
	for _, c := range []struct {
		path string
		f    url.Values
		code int
		want string
	}{
		{"/compose", url.Values{"to": {""}, "subject": {"x"}}, 422, "Add at least one recipient."},
		{"/compose", url.Values{"to": {" , ;"}, "subject": {"x"}}, 422, "Add at least one recipient."},
		{"/compose", url.Values{"to": {"li.wei"}, "subject": {"x"}}, 422, "“li.wei” is not a valid email address."},
		{"/compose", url.Values{"to": {"a@b.co"}, "cc": {"nope@"}}, 422, "“nope@” is not a valid email address."},
		{"/compose", url.Values{"to": {"a@b.co"}, "subject": {strings.Repeat("s", 201)}}, 422, "too long"},
		{"/compose", url.Values{"to": {"a@b.co"}, "attach": {"../../etc/passwd"}}, 422, "Choose a file from the list."},
		{"/compose", url.Values{"to": {mailManyAddrs(21)}}, 422, "At most 20 addresses."},
		{"/compose", url.Values{"to": {"a@b.co"}, "body": {"a\x00b"}}, 422, "characters we can’t accept"},
		{"/compose", url.Values{"to": {"a@b.co"}, "in_reply_to": {"nope"}}, 404, "Message not found"},
		{"/compose", url.Values{"to": {"a@b.co"}, "forwarded_from": {"m1"}, "in_reply_to": {"m1"}}, 400, "not both"},
		{"/message/m1/move", url.Values{"folder": {"Inbox"}}, 422, "The message is already in Inbox."},
		{"/message/m1/move", url.Values{"folder": {"Nowhere"}}, 422, "Choose a folder"},
		{"/message/m1/move", url.Values{}, 422, "Choose a folder"},
		{"/message/nope/move", url.Values{"folder": {"Archive"}}, 404, "Message not found"},
		{"/message/m1/star", url.Values{"starred": {"maybe"}}, 400, "incomplete"},
		{"/message/m1/mark", url.Values{}, 400, "incomplete"},
		{"/message/m1/reply", url.Values{"to": {"a@b.co"}}, 404, "Not found"},
	} {
		w := kitDo(a, "POST", c.path, c.f)
		if w.Code != c.code || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("POST %s %v: %d, want %d with %q\n%s", c.path, c.f, w.Code, c.code, c.want, kitText1(w.Body.String()))
		}
	}
	if string(appState(t, a, nil)) != string(before) {
		t.Fatal("validation errors changed the state")
	}
	w0 := kitDo(a, "POST", "/compose", url.Values{"to": {"a@b.co"}, "subject": {strings.Repeat("s", 201)}, "in_reply_to": {"m3"}})
	if n := strings.Count(w0.Body.String(), "autofocus"); n != 1 || !regexp.MustCompile(`id="subject"[^>]*autofocus`).MatchString(w0.Body.String()) {
		t.Errorf("errored subject not focused (%d autofocus)", n)
	}
	// A re-rendered reply keeps what was typed, escaped, and the reply's context.
	w := kitDo(a, "POST", "/compose", url.Values{"to": {"bad"}, "subject": {"Re: x"}, "body": {"<b>hi</b>"}, "in_reply_to": {"m3"}, "attach": {"team-photo.jpg"}})
	for _, want := range []string{"&lt;b&gt;hi&lt;/b&gt;</textarea>", `name="in_reply_to" value="m3"`, `<option value="team-photo.jpg" selected>`, "correct the 1 field", `aria-invalid="true" autofocus>`} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("re-rendered reply: no %q", want)
		}
	}
}

func TestMailData(t *testing.T) {
	for _, bad := range []string{
		`{"messages":[{"id":"a"},{"id":"a"}]}`,
		`{"messages":[{"id":1},{"id":"1"}]}`,
		`{"messages":[{"id":"a b"}]}`,
		`{"messages":[{"id":"a","date":"yesterday"}]}`,
		`{"messages":[{"id":"a","to":7}]}`,
		`{"messages":[{"id":"a","folder":"x/y"}]}`,
		`{"folders":["a/b"]}`,
		`{"folders":[""]}`,
		`{"files":[""]}`,
		`{"messages":[{"id":{"x":1}}]}`,
	} {
		if _, err := New("mail", []byte(bad), nil); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	a, err := New("mail", []byte(`{"folders":["inbox","Work","work"],"messages":[{"id":7,"folder":"Clients","to":["a@b.co","c@d.co"],"date":"2026-01-05"},{"subject":"no id"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	st := mailStateOf(t, a)
	if fmt.Sprint(st.Folders) != "[Inbox Sent Archive Trash Work Clients]" {
		t.Errorf("folders %v", st.Folders)
	}
	if m := mailMsg(st, "7"); m.Folder != "Clients" || m.To != "a@b.co, c@d.co" || m.Date != "2026-01-05 00:00" {
		t.Errorf("message 7 %+v", m)
	}
	if m := mailMsg(st, "m2"); m.Folder != "Inbox" || m.Date != "2026-03-02 09:00" || m.To != "me@mailbox.test" {
		t.Errorf("message m2 %+v", m)
	}
	kitGet(t, a, "/", 200)
	// Folder names with URL-special characters round-trip through links.
	b, err := New("mail", []byte(`{"folders":["Q&A #1?"],"messages":[{"id":"q","folder":"Q&A #1?","subject":"In Q&A"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if page := kitGet(t, b, "/", 200); !strings.Contains(page, `href="/folder/Q&amp;A%20%231%3F"`) {
		t.Errorf("folder link not escaped:\n%s", page)
	}
	if page := kitGet(t, b, "/folder/Q&A%20%231%3F", 200); !strings.Contains(page, "In Q&amp;A") {
		t.Errorf("folder page:\n%s", kitText1(page))
	}
	if loc := kitPost(t, b, "/message/q/move", url.Values{"folder": {"Archive"}}); loc != "/folder/Q&A%20%231%3F?msg=moved&id=q" {
		t.Errorf("move redirects to %q", loc)
	}
	if _, err := New("mail", nil, []byte(`{"sent":[{"id":"ghost"}]}`)); err == nil {
		t.Error("resumed a sent message that is not a message")
	}
}

func TestMailHostile(t *testing.T) {
	a, _ := loadApp(t, "mail")
	garbage := []url.Values{
		{},
		{"folder": {"../Inbox"}},
		{"folder": {"Archive", "Trash"}},
		{"starred": {"2"}, "unread": {"yes"}},
		{"to": {"a@b.co"}, "subject": {"x"}, "in_reply_to": {"../../m1"}},
		{"to": {"a@b.co"}, "attach": {"a", "b", "c", "d", "e", "f"}},
		{"to": {"a@b.co"}, "to2": {"x"}, "subject": {"\xff\xfe"}},
		{"to": {"a@b.co\r\nBcc: evil@x.y"}},
		{"to": {"<script>@x.y"}},
	}
	kitHostile(t, a, []string{"/compose", "/message/m1/star", "/message/m1/mark", "/message/nope/delete", "/message/m1/move", "/message/m1/reply", "/message/m1", "/", "/search"}, garbage,
		map[string]bool{"/compose": true, "/message/m1/star": true, "/message/m1/mark": true, "/message/m1/move": true, "/message/m1/reply": true, "/message/m1": true, "/": true, "/search": true})
	// Wrong methods on real actions.
	for _, m := range []string{"PUT", "DELETE", "PATCH"} {
		if w := kitDo(a, m, "/message/m1/delete", nil); w.Code < 400 || w.Code > 499 {
			t.Errorf("%s delete: %d", m, w.Code)
		}
	}
	before := appState(t, a, nil)
	for _, p := range []string{"/message/m1/delete", "/message/m1/star?starred=1", "/compose?to=a@b.co&subject=x", "/search?q=" + strings.Repeat("%FF", 3000), "/?page=99999999999999999999", "/message/m1/move?folder=" + strings.Repeat("x", 5000)} {
		if w := kitDo(a, "GET", p, nil); w.Code != 200 {
			t.Errorf("GET %s: %d", p, w.Code)
		}
	}
	if string(appState(t, a, nil)) != string(before) {
		t.Fatal("a GET changed the state")
	}
}

func TestMailLimits(t *testing.T) {
	a, err := New("mail", []byte(`{"messages":[{"id":"x"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	for range mailMaxSent {
		kitPost(t, a, "/compose", url.Values{"to": {"a@b.co"}, "subject": {"s"}})
	}
	before := appState(t, a, nil)
	if w := kitDo(a, "POST", "/compose", url.Values{"to": {"a@b.co"}}); w.Code != http.StatusTooManyRequests {
		t.Fatalf("501st send: %d", w.Code)
	}
	if string(appState(t, a, nil)) != string(before) {
		t.Fatal("a refused send changed the state")
	}
	fillLog(&a.(*mail).journal)
	before = appState(t, a, nil)
	if w := kitDo(a, "POST", "/message/x/star", url.Values{"starred": {"1"}}); w.Code != http.StatusTooManyRequests {
		t.Fatalf("full log: %d", w.Code)
	}
	if string(appState(t, a, nil)) != string(before) {
		t.Fatal("a refused change changed the state")
	}
}

func TestMailConcurrent(t *testing.T) {
	a, _ := loadApp(t, "mail")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 5 {
				kitDo(a, "POST", "/compose", url.Values{"to": {"a@b.co"}, "subject": {fmt.Sprint(i, j)}})
				kitDo(a, "POST", fmt.Sprintf("/message/m%d/star", i+1), url.Values{"starred": {fmt.Sprint(j % 2)}})
				kitDo(a, "GET", "/folder/Sent", nil)
				a.State()
			}
		}()
	}
	wg.Wait()
	if st := mailStateOf(t, a); len(st.Sent) != 40 {
		t.Fatalf("%d sent", len(st.Sent))
	}
	roundTrip(t, "mail", testdata(t, "mail"), a)
}
