package webapp

// Keyboard paths (the oracle's recipes). Every change starts with ctrl+l,
// typing the URL (with "http://"), and Enter; the page then has focus on
// the field named. Enter in a text field submits its form; on the room
// select it does not (type the room's name to pick it, or prefill it from
// the URL). Dates are typed as YYYY-MM-DD and times as HH:MM (24-hour) in
// plain text fields; forms do no browser-side validation: the server
// answers with inline errors.
//
//	create event: /new?date=2026-03-05&title=T&start=10:00&end=11:00&room=ROOMID
//	              &attendees=a@x.com,b@y.com (every field may be prefilled;
//	              date alone is what the "New event" links carry): focus in
//	              Title; Enter. By hand: Tab order Title → Date → Start → End
//	              → Room (select) → Attendees → "Create event".
//	edit / move:  /event/ID/edit?date=2026-03-06&start=14:00&end=15:00 (any
//	              field may be prefilled, as above): focus in Title; Enter.
//	              Same Tab order; the button is "Save changes".
//	cancel:       /event/ID/cancel: a confirmation page, focus on its
//	              "Cancel event" button; Enter. (The post needs confirm=yes,
//	              which the page's form carries.)
//
// Read-only pages: / (redirects to this month), /month/YYYY-MM,
// /week/YYYY-MM-DD (the week holding that day, Monday first),
// /day/YYYY-MM-DD, /event/ID, /rooms, /search?q= (title, attendee, room).

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// The calendar ("Calendar") books meetings in rooms: a month, week and day
// view, events with attendees, and rooms with a capacity.
//
// Data (all fields optional unless said):
//
//	{
//	  "site": "Calendar",                                   // the name in the header
//	  "user": {"name": "Dana Reyes", "email": "dana@acme.example"}, // the organizer of new events
//	  "rooms": [{"id": "atlas", "name": "Atlas", "capacity": 8}],
//	        // id: 1-64 letters, digits, '-', '_' (a number is taken as its digits); unique;
//	        // made from the name when absent. capacity: 1..1000, required
//	  "events": [{
//	    "id": 1,                      // a whole number (or digits in a string); assigned when absent; unique
//	    "title": "Weekly sync",       // required
//	    "date": "2026-03-03",         // YYYY-MM-DD, required
//	    "start": "10:00", "end": "10:30", // HH:MM (H:MM accepted), end after start, required
//	    "room": "atlas",              // a room's id or name (any case); "" for none
//	    "attendees": ["sam@acme.example"], // emails
//	    "organizer": "sam@acme.example",   // default: the user's email (or name)
//	    "cancelled": false
//	  }]
//	}
//
// Data events may overlap; the agent's may not: a create or edit is
// refused, with an inline error, when its room is booked by another
// (not cancelled) event that overlaps it on that date (touching ends do
// not overlap), when its end is not after its start, or when its room
// cannot seat everyone (the attendees plus the organizer, unless listed).
// At most 1000 events (cancelled ones count), 50 attendees an event,
// titles of 200 characters.
//
// State: {"events": [{id, title, date, start, end, room, attendees,
// organizer, cancelled}] (by id), "log": [...]}. Log actions and their
// fields: create_event {id, title, date, start, end, room, attendees};
// edit_event {id, title, and each changed field of title, date, start,
// end, room, attendees}; cancel_event {id, title}. Attendees in fields
// are comma-separated.

func init() { register("calendar", newCalendar) }

//go:embed pages/calendar/*.html
var calFS embed.FS

var calTmpl = parsePages(calFS, "pages/calendar", calFuncs())

func calFuncs() template.FuncMap {
	f := officeFuncs()
	f["color"] = calColor
	return f
}

// calColor is the CSS class of the i'th room's events.
func calColor(i int) string { return "c" + strconv.Itoa(1+i%6) }

const (
	calMaxEvents    = 1000
	calMaxAttendees = 50
	calMaxRooms     = 100
	calMaxTitle     = 200
)

type calRoom struct {
	ID       string
	Name     string
	Capacity int
}

type calEvent struct {
	ID        int      `json:"id"`
	Title     string   `json:"title"`
	Date      string   `json:"date"`
	Start     string   `json:"start"`
	End       string   `json:"end"`
	Room      string   `json:"room"`
	Attendees []string `json:"attendees"`
	Organizer string   `json:"organizer"`
	Cancelled bool     `json:"cancelled"`
}

type calState struct {
	Events []*calEvent `json:"events"`
	Log    []Event     `json:"log"`
}

type calApp struct {
	journal
	web      router
	name     string
	me, mail string
	rooms    []calRoom
	events   []*calEvent // by id
}

func newCalendar(data, saved []byte) (App, error) {
	var d struct {
		Site  string `json:"site"`
		User  person `json:"user"`
		Rooms []struct {
			ID       jsonStr `json:"id"`
			Name     string  `json:"name"`
			Capacity int     `json:"capacity"`
		} `json:"rooms"`
		Events []struct {
			ID        jsonID   `json:"id"`
			Title     string   `json:"title"`
			Date      string   `json:"date"`
			Start     string   `json:"start"`
			End       string   `json:"end"`
			Room      jsonStr  `json:"room"`
			Attendees []string `json:"attendees"`
			Organizer string   `json:"organizer"`
			Cancelled bool     `json:"cancelled"`
		} `json:"events"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("calendar: data: %v", err)
	}
	a := &calApp{name: strings.TrimSpace(d.Site), me: strings.TrimSpace(d.User.Name), mail: strings.TrimSpace(d.User.Email)}
	if a.name == "" {
		a.name = "Calendar"
	}
	if a.me == "" {
		a.me = "You"
	}
	if !lineOK(a.name, 60) || !lineOK(a.me, 100) || (a.mail != "" && !emailOK(a.mail)) {
		return nil, fmt.Errorf("calendar: bad site or user")
	}
	if len(d.Rooms) > calMaxRooms || len(d.Events) > calMaxEvents {
		return nil, fmt.Errorf("calendar: over %d rooms or %d events", calMaxRooms, calMaxEvents)
	}
	for i, dr := range d.Rooms {
		r := calRoom{ID: strings.TrimSpace(string(dr.ID)), Name: strings.TrimSpace(dr.Name), Capacity: dr.Capacity}
		if r.Name == "" {
			r.Name = r.ID
		}
		if r.ID == "" {
			r.ID = wikiSlugify(r.Name)
		}
		if !idOK(r.ID) || r.Name == "" || !lineOK(r.Name, 60) {
			return nil, fmt.Errorf("calendar: room %d: want an id (letters, digits, '-', '_') and a name of 1-60 characters", i)
		}
		if r.Capacity < 1 || r.Capacity > 1000 {
			return nil, fmt.Errorf("calendar: room %q: capacity %d is not 1..1000", r.ID, r.Capacity)
		}
		for _, o := range a.rooms {
			if strings.EqualFold(o.ID, r.ID) || strings.EqualFold(o.Name, r.Name) {
				return nil, fmt.Errorf("calendar: duplicate room %q", r.ID)
			}
		}
		a.rooms = append(a.rooms, r)
	}
	ids := map[int]bool{}
	for _, de := range d.Events {
		if de.ID > 0 {
			if ids[int(de.ID)] {
				return nil, fmt.Errorf("calendar: duplicate event id %d", de.ID)
			}
			ids[int(de.ID)] = true
		}
	}
	for i, de := range d.Events {
		e := &calEvent{ID: int(de.ID), Title: strings.TrimSpace(de.Title), Date: strings.TrimSpace(de.Date),
			Organizer: strings.TrimSpace(de.Organizer), Cancelled: de.Cancelled}
		var ok bool
		if e.Start, ok = calTime(de.Start); !ok {
			return nil, fmt.Errorf("calendar: event %d: start %q is not HH:MM", i, de.Start)
		}
		if e.End, ok = calTime(de.End); !ok {
			return nil, fmt.Errorf("calendar: event %d: end %q is not HH:MM", i, de.End)
		}
		if strings.TrimSpace(string(de.Room)) != "" {
			r := a.room(string(de.Room))
			if r == nil {
				return nil, fmt.Errorf("calendar: event %d: no room %q", i, de.Room)
			}
			e.Room = r.ID
		}
		att, err := calAttendees(strings.Join(de.Attendees, ","))
		if err != "" {
			return nil, fmt.Errorf("calendar: event %d: %s", i, err)
		}
		e.Attendees = att
		if e.Organizer == "" {
			e.Organizer = a.organizer()
		}
		if e.ID == 0 {
			e.ID = a.nextID(ids)
			ids[e.ID] = true
		}
		if err := a.check(e); err != nil {
			return nil, fmt.Errorf("calendar: event %d: %v", i, err)
		}
		a.events = append(a.events, e)
	}
	sort.Slice(a.events, func(i, j int) bool { return a.events[i].ID < a.events[j].ID })
	if saved != nil {
		var s calState
		if err := json.Unmarshal(saved, &s); err != nil {
			return nil, fmt.Errorf("calendar: saved state: %v", err)
		}
		if len(s.Events) > calMaxEvents || len(s.Log) > MaxLog {
			return nil, fmt.Errorf("calendar: saved state: over the limits")
		}
		a.events = nil
		ids := map[int]bool{}
		for _, e := range s.Events {
			if e == nil || e.ID <= 0 || ids[e.ID] {
				return nil, fmt.Errorf("calendar: saved state: an event is null or has a bad or duplicate id")
			}
			ids[e.ID] = true
			if e.Attendees == nil {
				e.Attendees = []string{}
			}
			if st, ok := calTime(e.Start); !ok || st != e.Start {
				return nil, fmt.Errorf("calendar: saved state: event %d: bad start", e.ID)
			}
			if en, ok := calTime(e.End); !ok || en != e.End {
				return nil, fmt.Errorf("calendar: saved state: event %d: bad end", e.ID)
			}
			if e.Room != "" && (a.room(e.Room) == nil || a.room(e.Room).ID != e.Room) {
				return nil, fmt.Errorf("calendar: saved state: event %d: no room %q", e.ID, e.Room)
			}
			if err := a.check(e); err != nil {
				return nil, fmt.Errorf("calendar: saved state: event %d: %v", e.ID, err)
			}
			a.events = append(a.events, e)
		}
		sort.Slice(a.events, func(i, j int) bool { return a.events[i].ID < a.events[j].ID })
		a.Log = s.Log
	}
	a.routes()
	return a, nil
}

// check validates an event's own fields.
func (a *calApp) check(e *calEvent) error {
	if e.Title == "" || !lineOK(e.Title, calMaxTitle) {
		return fmt.Errorf("title must be one line of 1-%d characters", calMaxTitle)
	}
	if _, ok := parseDate(e.Date); !ok {
		return fmt.Errorf("date %q is not YYYY-MM-DD", e.Date)
	}
	if calMinutes(e.End) <= calMinutes(e.Start) {
		return fmt.Errorf("end %s is not after start %s", e.End, e.Start)
	}
	if len(e.Attendees) > calMaxAttendees {
		return fmt.Errorf("over %d attendees", calMaxAttendees)
	}
	for _, m := range e.Attendees {
		if !emailOK(m) {
			return fmt.Errorf("attendee %q is not an email", m)
		}
	}
	if !lineOK(e.Organizer, 254) {
		return fmt.Errorf("organizer is not one line")
	}
	return nil
}

func (a *calApp) organizer() string {
	if a.mail != "" {
		return a.mail
	}
	return a.me
}

func (a *calApp) nextID(taken map[int]bool) int {
	return freeID(a.events, func(e *calEvent) int { return e.ID }, taken)
}

// room finds a room by id or name, any case.
func (a *calApp) room(s string) *calRoom {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil
	}
	for i := range a.rooms {
		if strings.EqualFold(a.rooms[i].ID, s) {
			return &a.rooms[i]
		}
	}
	for i := range a.rooms {
		if strings.EqualFold(a.rooms[i].Name, s) {
			return &a.rooms[i]
		}
	}
	return nil
}

func (a *calApp) roomName(id string) string {
	if r := a.room(id); r != nil {
		return r.Name
	}
	return ""
}

func (a *calApp) event(r *http.Request) *calEvent {
	return pathItem(r, a.events, func(e *calEvent) int { return e.ID })
}

// calTime normalizes H:MM or HH:MM (00:00 to 23:59).
func calTime(s string) (string, bool) {
	s = strings.TrimSpace(s)
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 {
		return "", false
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || hh > 23 || mm < 0 || mm > 59 || h[0] == '+' || h[0] == '-' || m[0] == '+' || m[0] == '-' {
		return "", false
	}
	return fmt.Sprintf("%02d:%02d", hh, mm), true
}

func calMinutes(hhmm string) int {
	if len(hhmm) != 5 {
		return -1
	}
	h, _ := strconv.Atoi(hhmm[:2])
	m, _ := strconv.Atoi(hhmm[3:])
	return h*60 + m
}

// calAttendees parses a list of emails separated by commas, semicolons or
// spaces; the error is a message for the form.
func calAttendees(s string) ([]string, string) {
	out := []string{}
	seen := map[string]bool{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\n' || r == '\t' || r == '\r' }) {
		f = strings.Trim(f, "<>")
		if !emailOK(f) {
			return nil, "“" + clip(f, 60) + "” is not an email address."
		}
		if k := strings.ToLower(f); !seen[k] {
			seen[k] = true
			out = append(out, f)
		}
	}
	if len(out) > calMaxAttendees {
		return nil, fmt.Sprintf("An event can have at most %d attendees.", calMaxAttendees)
	}
	return out, ""
}

func (a *calApp) State() ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := calState{Events: orEmpty(a.events), Log: orEmpty(a.Log)}
	return json.Marshal(s)
}

func (a *calApp) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.web.ServeHTTP(w, r) }

func (a *calApp) routes() {
	a.web = a.journal.logRouter(a.fail)
	s := &a.web
	s.get("/{$}", func(r *http.Request) answer { return redirect("/month/" + todayDate[:7]) })
	s.get("/month/{ym}", a.month)
	s.get("/week/{date}", a.week)
	s.get("/day/{date}", a.day)
	s.get("/event/{id}", a.show)
	s.get("/rooms", a.roomsPage)
	s.get("/search", a.search)
	s.get("/new", a.newForm)
	s.post("/new", a.create)
	s.get("/event/{id}/edit", a.editForm)
	s.post("/event/{id}/edit", a.edit)
	s.get("/event/{id}/cancel", a.cancelForm)
	s.post("/event/{id}/cancel", a.cancel)
	s.notFound()
}
