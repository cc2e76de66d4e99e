package webapp

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

type calTestState struct {
	Events []calEvent `json:"events"`
	Log    []Event    `json:"log"`
}

func calTestEvent(t *testing.T, a App, id int) *calEvent {
	t.Helper()
	var s calTestState
	appState(t, a, &s)
	for i := range s.Events {
		if s.Events[i].ID == id {
			return &s.Events[i]
		}
	}
	return nil
}

func TestCalendarPagesRender(t *testing.T) {
	a, _ := loadApp(t, "calendar")
	if w := wacDo(a, http.MethodGet, "/", ""); w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/month/2026-03" {
		t.Errorf("/: %d to %q", w.Code, w.Header().Get("Location"))
	}
	for _, p := range []string{"/month/2026-03", "/month/2026-02", "/month/1999-12", "/week/2026-03-04", "/day/2026-03-02", "/event/1", "/event/6",
		"/rooms", "/search?q=sync", "/search?q=sam.lee", "/search", "/new", "/new?date=2026-03-05", "/event/1/edit", "/event/1/cancel", "/event/6/cancel"} {
		body := wacGet(t, a, p, http.StatusOK)
		if !strings.Contains(body, "Calendar") || !strings.Contains(body, `action="/search"`) {
			t.Errorf("%s: no header", p)
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("%s: refers to an external resource", p)
		}
	}
	for _, p := range []string{"/month/2026-13", "/month/x", "/week/2026-02-30", "/day/tomorrow", "/event/99", "/event/x", "/event/99/edit", "/event/99/cancel", "/nope"} {
		wacGet(t, a, p, http.StatusNotFound)
	}
	wacGet(t, a, "/event/6/edit", http.StatusConflict)
	focus := map[string]string{
		"/new?date=2026-03-05":  `name="title" value="" placeholder="Add title" maxlength="200" autocomplete="off" autofocus`,
		"/event/1/edit":         `name="title" value="Weekly sync" placeholder="Add title" maxlength="200" autocomplete="off" autofocus`,
		"/event/1/cancel":       `type="submit" autofocus>Cancel event`,
		"/search?q=x":           `aria-label="Search terms" autofocus`,
		"/new?title=Standup&x=": `value="Standup"`,
	}
	for p, want := range focus {
		if body := wacGet(t, a, p, http.StatusOK); !strings.Contains(body, want) || strings.Count(body, "autofocus") != 1 {
			t.Errorf("%s: want one autofocus and %s", p, want)
		}
	}
	body := wacGet(t, a, "/new?date=2026-03-06&title=Standup&start=9:15&end=09:30&room=Borealis&attendees=a%40x.io", http.StatusOK)
	for _, want := range []string{`value="2026-03-06"`, `value="9:15"`, `value="09:30"`, `<option value="borealis" selected>`, `value="a@x.io"`} {
		if !strings.Contains(body, want) {
			t.Errorf("prefill lacks %s", want)
		}
	}
	body = wacGet(t, a, "/month/2026-03", http.StatusOK)
	if !strings.Contains(body, "Weekly sync") || strings.Contains(body, "Vendor call") || !strings.Contains(body, "March 2026") {
		t.Error("month view: wrong events")
	}
	body = wacGet(t, a, "/day/2026-03-02", http.StatusOK)
	if !strings.Contains(body, "Vendor call") || !strings.Contains(body, "Cancelled") || !strings.Contains(body, "Free all day") {
		t.Error("day view")
	}
	body = wacGet(t, a, "/week/2026-03-04", http.StatusOK)
	if !strings.Contains(body, "Weekly sync") || !strings.Contains(body, "Design review") || strings.Contains(body, "Quarterly planning") {
		t.Error("week view")
	}
	if body := wacGet(t, a, "/search?q=PRIYA", http.StatusOK); !strings.Contains(body, "Quarterly planning") || strings.Contains(body, "Design review") {
		t.Error("search by attendee")
	}
}

func TestCalendarCreate(t *testing.T) {
	a, data := loadApp(t, "calendar")
	good := url.Values{"title": {"Hiring sync"}, "date": {"2026-03-02"}, "start": {"10:30"}, "end": {"11:00"}, "room": {"atlas"},
		"attendees": {"sam.lee@acme.example; PRIYA@acme.example, sam.lee@acme.example"}}
	with := func(kv ...string) url.Values {
		f := url.Values{}
		for k, v := range good {
			f[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	before := appState(t, a, nil)
	for _, c := range []struct {
		f    url.Values
		want string
	}{
		{with("title", ""), "Add a title."},
		{with("date", "2026-02-30"), "real date"},
		{with("date", "03/05/2026"), "real date"},
		{with("start", "25:00"), "start time"},
		{with("end", "9"), "end time"},
		{with("start", "11:00", "end", "10:00"), "end after it starts"},
		{with("start", "11:00", "end", "11:00"), "end after it starts"},
		{with("room", "nowhere"), "Choose one of the rooms."},
		{with("attendees", "sam, bob@x.io"), "is not an email address"},
		{with("start", "10:15", "end", "10:45"), "Atlas is already booked from 10:00 to 10:30 (“Weekly sync”)"},
		{with("start", "09:00", "end", "12:00"), "already booked"},
		{with("room", "focus-1"), "Focus Booth 1 seats 1; this event has 3 people"},
		{with("room", "borealis", "attendees", "a@x.io,b@x.io,c@x.io,d@x.io"), "Borealis seats 4; this event has 5 people"},
	} {
		w := wacPost(t, a, "/new", c.f, http.StatusUnprocessableEntity)
		if b := w.Body.String(); !strings.Contains(b, c.want) || !strings.Contains(b, `class="err"`) {
			t.Errorf("%v: no inline %q", c.f, c.want)
		}
	}
	wacSame(t, a, before, "refused bookings")

	// Touching ends do not overlap; a cancelled booking frees its slot; the
	// organizer listed among the attendees counts once.
	w := wacPost(t, a, "/new", good, http.StatusSeeOther)
	if loc := w.Header().Get("Location"); loc != "/event/8?flash=created" {
		t.Errorf("redirect %q", loc)
	}
	e := calTestEvent(t, a, 8)
	if e == nil || e.Title != "Hiring sync" || e.Room != "atlas" || strings.Join(e.Attendees, ",") != "sam.lee@acme.example,PRIYA@acme.example" ||
		e.Organizer != "dana@acme.example" || e.Cancelled {
		t.Fatalf("created %+v", e)
	}
	if ev := wacLastLog(t, a); ev.Action != "create_event" || ev.Fields["id"] != "8" || ev.Fields["start"] != "10:30" || ev.Fields["room"] != "atlas" {
		t.Errorf("log %+v", ev)
	}
	wacPost(t, a, "/new", with("title", "Over the cancelled one", "start", "15:00", "end", "15:45"), http.StatusSeeOther)
	wacPost(t, a, "/new", with("title", "Alone", "room", "focus-1", "attendees", "DANA@acme.example", "start", "7:05", "end", "7:35"), http.StatusSeeOther)
	if e := calTestEvent(t, a, 10); e == nil || e.Start != "07:05" || e.Room != "focus-1" {
		t.Errorf("booth booking %+v", e)
	}
	// Another day, no room: no conflict check.
	wacPost(t, a, "/new", with("room", "", "start", "10:00", "end", "10:30"), http.StatusSeeOther)
	if body := wacGet(t, a, "/event/8?flash=created", http.StatusOK); !strings.Contains(body, "Event created.") || !strings.Contains(body, "Hiring sync") {
		t.Error("event page after create")
	}
	if body := wacGet(t, a, "/day/2026-03-02", http.StatusOK); !strings.Contains(body, "Hiring sync") {
		t.Error("day view lacks the new event")
	}
	roundTrip(t, "calendar", data, a)
}

func TestCalendarEditCancel(t *testing.T) {
	a, data := loadApp(t, "calendar")
	cur := url.Values{"title": {"1:1 Dana / Sam"}, "date": {"2026-03-04"}, "start": {"09:30"}, "end": {"10:00"}, "room": {"borealis"}, "attendees": {"sam.lee@acme.example"}}
	with := func(kv ...string) url.Values {
		f := url.Values{}
		for k, v := range cur {
			f[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			f.Set(kv[i], kv[i+1])
		}
		return f
	}
	before := appState(t, a, nil)
	// No change: no log; editing in place does not conflict with itself.
	if w := wacPost(t, a, "/event/3/edit", cur, http.StatusSeeOther); w.Header().Get("Location") != "/event/3?flash=nochange" {
		t.Errorf("no-op edit to %q", w.Header().Get("Location"))
	}
	wacPost(t, a, "/event/3/edit", with("date", "2026-03-03", "start", "14:30", "end", "15:00", "room", "cosmos"), http.StatusUnprocessableEntity)
	wacPost(t, a, "/event/3/edit", with("end", "09:00"), http.StatusUnprocessableEntity)
	wacPost(t, a, "/event/6/edit", cur, http.StatusConflict)
	wacPost(t, a, "/event/99/edit", cur, http.StatusNotFound)
	wacSame(t, a, before, "refused edits")

	// Move.
	wacPost(t, a, "/event/3/edit", with("date", "2026-03-03", "start", "15:30", "end", "16:00", "room", "Cosmos"), http.StatusSeeOther)
	e := calTestEvent(t, a, 3)
	if e.Date != "2026-03-03" || e.Start != "15:30" || e.End != "16:00" || e.Room != "cosmos" || e.Organizer != "dana@acme.example" {
		t.Errorf("moved %+v", e)
	}
	ev := wacLastLog(t, a)
	if ev.Action != "edit_event" || ev.Fields["id"] != "3" || ev.Fields["date"] != "2026-03-03" || ev.Fields["room"] != "cosmos" || ev.Fields["attendees"] != "" || len(ev.Fields) != 6 {
		t.Errorf("log %+v", ev)
	}
	// Cancel.
	before = appState(t, a, nil)
	wacPost(t, a, "/event/2/cancel", url.Values{}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/event/6/cancel", url.Values{"confirm": {"yes"}}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/event/99/cancel", url.Values{"confirm": {"yes"}}, http.StatusNotFound)
	wacSame(t, a, before, "refused cancels")
	wacPost(t, a, "/event/2/cancel", url.Values{"confirm": {"yes"}}, http.StatusSeeOther)
	if e := calTestEvent(t, a, 2); !e.Cancelled {
		t.Error("not cancelled")
	}
	if ev := wacLastLog(t, a); ev.Action != "cancel_event" || ev.Fields["id"] != "2" || ev.Fields["title"] != "Design review" {
		t.Errorf("log %+v", ev)
	}
	if body := wacGet(t, a, "/event/2?flash=cancelled", http.StatusOK); !strings.Contains(body, "Event cancelled.") || strings.Contains(body, "/event/2/edit") {
		t.Error("event page after cancel")
	}
	// The slot is free now.
	wacPost(t, a, "/event/3/edit", with("date", "2026-03-03", "start", "14:00", "end", "15:00", "room", "cosmos"), http.StatusSeeOther)
	roundTrip(t, "calendar", data, a)
}

func TestCalendarData(t *testing.T) {
	for _, bad := range []string{
		`{"events":[{"id":1,"title":"A","date":"2026-03-01","start":"10:00","end":"11:00"},{"id":1,"title":"B","date":"2026-03-01","start":"10:00","end":"11:00"}]}`,
		`{"events":[{"title":"A","date":"2026-03-01","start":"11:00","end":"10:00"}]}`,
		`{"events":[{"title":"A","date":"2026-03-01","start":"10:00","end":"25:00"}]}`,
		`{"events":[{"title":"A","date":"March 1","start":"10:00","end":"11:00"}]}`,
		`{"events":[{"title":"","date":"2026-03-01","start":"10:00","end":"11:00"}]}`,
		`{"events":[{"title":"A","date":"2026-03-01","start":"10:00","end":"11:00","room":"nowhere"}]}`,
		`{"events":[{"title":"A","date":"2026-03-01","start":"10:00","end":"11:00","attendees":["nope"]}]}`,
		`{"rooms":[{"id":"a","name":"A","capacity":2},{"id":"a","name":"B","capacity":2}]}`,
		`{"rooms":[{"id":"a","name":"A","capacity":0}]}`,
		`{"rooms":[{"id":"a b","name":"A","capacity":3}]}`,
		`{"user":{"email":"x"}}`,
	} {
		if _, err := New("calendar", []byte(bad), nil); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	// Lenient: ids as strings or absent, rooms by name, room ids as numbers.
	a, err := New("calendar", []byte(`{"rooms":[{"id":101,"name":"Big","capacity":30},{"name":"Small Room","capacity":2}],
		"events":[{"id":"4","title":"A","date":"2026-03-01","start":"9:00","end":"10:00","room":"small room"},{"title":"B","date":"2026-03-01","start":"9:00","end":"10:00","room":101}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	var s calTestState
	appState(t, a, &s)
	if len(s.Events) != 2 || s.Events[0].ID != 4 || s.Events[0].Room != "small-room" || s.Events[0].Start != "09:00" || s.Events[1].ID != 5 || s.Events[1].Room != "101" {
		t.Errorf("lenient data: %+v", s.Events)
	}
	roundTrip(t, "calendar", []byte(`{"rooms":[{"id":101,"name":"Big","capacity":30},{"name":"Small Room","capacity":2}]}`), mustCal(t, `{"rooms":[{"id":101,"name":"Big","capacity":30},{"name":"Small Room","capacity":2}]}`))
	if _, err := New("calendar", nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{`, `{"events":[null]}`, `{"events":[{"id":1,"title":"A","date":"2026-03-01","start":"9:00","end":"10:00"}]}`,
		`{"events":[{"id":1,"title":"A","date":"2026-03-01","start":"09:00","end":"10:00","room":"ghost"}]}`} {
		if _, err := New("calendar", nil, []byte(bad)); err == nil {
			t.Errorf("saved %s: no error", bad)
		}
	}
}

func mustCal(t *testing.T, data string) App {
	a, err := New("calendar", []byte(data), nil)
	if err != nil {
		t.Fatal(err)
	}
	wacPost(t, a, "/new", url.Values{"title": {"X"}, "date": {"2026-03-09"}, "start": {"08:00"}, "end": {"09:00"}, "room": {"101"}}, http.StatusSeeOther)
	return a
}

func TestCalendarLimits(t *testing.T) {
	var evs []string
	for i := 0; i < calMaxEvents; i++ {
		evs = append(evs, fmt.Sprintf(`{"title":"E%d","date":"2026-03-01","start":"10:00","end":"11:00"}`, i))
	}
	a, err := New("calendar", []byte(`{"events":[`+strings.Join(evs, ",")+`]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	wacGet(t, a, "/day/2026-03-01", http.StatusOK)
	body := wacGet(t, a, "/month/2026-03", http.StatusOK)
	if !strings.Contains(body, "997 more") {
		t.Error("month view does not fold a full day")
	}
	before := appState(t, a, nil)
	if w := wacPost(t, a, "/new", url.Values{"title": {"X"}, "date": {"2026-03-02"}, "start": {"10:00"}, "end": {"11:00"}}, http.StatusUnprocessableEntity); !strings.Contains(w.Body.String(), "at most 1000 events") {
		t.Error("no limit message")
	}
	wacSame(t, a, before, "an event over the limit")
	var many []string
	for i := 0; i <= calMaxAttendees; i++ {
		many = append(many, fmt.Sprintf("p%d@x.io", i))
	}
	b, _ := loadApp(t, "calendar")
	wacPost(t, b, "/new", url.Values{"title": {"X"}, "date": {"2026-03-02"}, "start": {"10:00"}, "end": {"11:00"}, "attendees": {strings.Join(many, ",")}}, http.StatusUnprocessableEntity)
}

func TestCalendarHostile(t *testing.T) {
	a, _ := loadApp(t, "calendar")
	posts := []string{"/new", "/event/1/edit", "/event/6/edit", "/event/99/edit", "/event/x/edit", "/event/1/cancel", "/event/6/cancel",
		"/event/99/cancel", "/event/1", "/month/2026-03", "/day/2026-03-02", "/", "/nope"}
	gets := []string{"/", "/month/2026-03", "/month/0000-00", "/week/2026-03-02", "/day/2026-03-02", "/day/9999-99-99", "/event/1", "/event/-1",
		"/rooms", "/search", "/new", "/event/1/edit", "/event/1/cancel", "/event/%ff/edit"}
	wacHostile(t, a, posts, gets)
	// Escaping in titles and attendees.
	wacPost(t, a, "/new", url.Values{"title": {"<script>alert(1)</script>"}, "date": {"2026-03-09"}, "start": {"10:00"}, "end": {"11:00"}}, http.StatusSeeOther)
	for _, p := range []string{"/month/2026-03", "/week/2026-03-09", "/day/2026-03-09", "/event/8", "/event/8/edit", "/event/8/cancel", "/search?q=script"} {
		if strings.Contains(wacGet(t, a, p, http.StatusOK), "<script>alert") {
			t.Errorf("%s shows the title unescaped", p)
		}
	}
}

func TestCalendarConcurrent(t *testing.T) {
	a, data := loadApp(t, "calendar")
	wacConcurrent(t, a, []string{"/month/2026-03", "/week/2026-03-02", "/day/2026-03-02", "/event/1", "/rooms"}, func(i int) {
		// The same room and slot from everyone: exactly one booking wins.
		wacDo(a, http.MethodPost, "/new", url.Values{"title": {fmt.Sprint("Race ", i)}, "date": {"2026-03-20"}, "start": {"10:00"}, "end": {"11:00"}, "room": {"atlas"}}.Encode())
		wacDo(a, http.MethodPost, "/new", url.Values{"title": {fmt.Sprint("Free ", i)}, "date": {"2026-03-21"}, "start": {"10:00"}, "end": {"11:00"}}.Encode())
	})
	var s calTestState
	appState(t, a, &s)
	won := 0
	for _, e := range s.Events {
		if e.Date == "2026-03-20" {
			won++
		}
	}
	if won != 1 || len(s.Events) != 7+1+80 {
		t.Errorf("%d bookings won the slot, %d events", won, len(s.Events))
	}
	roundTrip(t, "calendar", data, a)
}
