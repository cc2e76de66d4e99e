// The calendar's page views and HTTP handlers: the month, week and day
// views, events, rooms, search, and the event forms.

package webapp

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// --- views ---

type calView struct {
	Title  string
	Site   string
	Me     string
	Mail   string
	Nav    string
	Q      string
	Crumbs []crumb
	Flash  string
	Today  string
	Mini   calMonth // the sidebar's month
	Rooms  []calRoom
	P      any
}

var calFlashes = map[string]string{
	"created":   "Event created.",
	"saved":     "Event updated.",
	"nochange":  "No changes to save.",
	"cancelled": "Event cancelled. Attendees have been notified.",
}

type calItem struct {
	*calEvent
	RoomName string
	Weekday  string // e.g. "Thu, Mar 5"
	Color    string // a CSS class by room
}

type calDay struct {
	Date    string
	Num     int
	In      bool // in the month shown
	Today   bool
	Items   []calItem
	More    int
	Weekday string
}

type calMonth struct {
	YM, Name, Prev, Next string
	Weeks                [][]calDay
}

func (a *calApp) item(e *calEvent) calItem {
	wd := e.Date
	if t, ok := parseDate(e.Date); ok {
		wd = t.Format("Mon, Jan 2")
	}
	color := "c0"
	for i, rm := range a.rooms {
		if rm.ID == e.Room {
			color = calColor(i)
		}
	}
	return calItem{e, a.roomName(e.Room), wd, color}
}

// on lists the day's events by start time; cancelled ones only when asked.
func (a *calApp) on(date string, cancelled bool) []calItem {
	var out []calItem
	for _, e := range a.events {
		if e.Date == date && (cancelled || !e.Cancelled) {
			out = append(out, a.item(e))
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Start != out[j].Start {
			return out[i].Start < out[j].Start
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// monthGrid lays out month first's weeks, Monday first; each day carries
// at most max events (max 0: none).
func (a *calApp) monthGrid(first time.Time, max int) calMonth {
	m := calMonth{YM: first.Format("2006-01"), Name: first.Format("January 2006"),
		Prev: first.AddDate(0, -1, 0).Format("2006-01"), Next: first.AddDate(0, 1, 0).Format("2006-01")}
	start := first.AddDate(0, 0, -((int(first.Weekday()) + 6) % 7))
	for d := start; d.Before(first.AddDate(0, 1, 0)) || len(m.Weeks) == 0 || len(m.Weeks[len(m.Weeks)-1]) < 7; d = d.AddDate(0, 0, 1) {
		if len(m.Weeks) == 0 || len(m.Weeks[len(m.Weeks)-1]) == 7 {
			m.Weeks = append(m.Weeks, nil)
		}
		ds := d.Format(dateLayout)
		day := calDay{Date: ds, Num: d.Day(), In: d.Month() == first.Month(), Today: ds == todayDate}
		if max > 0 {
			items := a.on(ds, false)
			if len(items) > max {
				day.More = len(items) - max
				items = items[:max]
			}
			day.Items = items
		}
		w := &m.Weeks[len(m.Weeks)-1]
		*w = append(*w, day)
	}
	return m
}

func (a *calApp) page(r *http.Request, status int, page, title, nav string, crumbs []crumb, p any) answer {
	first, _ := time.Parse("2006-01", todayDate[:7])
	v := calView{Title: title, Site: a.name, Me: a.me, Mail: a.mail, Nav: nav, Crumbs: crumbs, Today: todayDate,
		Flash: calFlashes[r.URL.Query().Get("flash")], Mini: a.monthGrid(first, 0), Rooms: a.rooms, P: p}
	return render(calTmpl[page], status, v)
}

func (a *calApp) fail(status int, msg string) answer {
	first, _ := time.Parse("2006-01", todayDate[:7])
	v := calView{Title: http.StatusText(status), Site: a.name, Me: a.me, Mail: a.mail, Today: todayDate,
		Mini: a.monthGrid(first, 0), Rooms: a.rooms,
		P: failData(status, msg)}
	return render(calTmpl["error"], status, v)
}

var calHome = crumb{"Calendar", "/"}

func (a *calApp) month(r *http.Request) answer {
	first, err := time.Parse("2006-01", r.PathValue("ym"))
	if err != nil || first.Year() < 1970 || first.Year() > 2199 {
		return a.fail(http.StatusNotFound, "That is not a month this calendar shows (use YYYY-MM).")
	}
	m := a.monthGrid(first, 3)
	newDate := first.Format(dateLayout)
	if todayDate[:7] == m.YM {
		newDate = todayDate
	}
	return a.page(r, http.StatusOK, "month", m.Name, "month", nil, map[string]any{"M": m, "New": newDate})
}

func (a *calApp) dayParam(r *http.Request) (time.Time, bool) {
	return parseDate(r.PathValue("date"))
}

func (a *calApp) week(r *http.Request) answer {
	d, ok := a.dayParam(r)
	if !ok {
		return a.fail(http.StatusNotFound, "That is not a date (use YYYY-MM-DD).")
	}
	mon := d.AddDate(0, 0, -((int(d.Weekday()) + 6) % 7))
	var days []calDay
	for i := 0; i < 7; i++ {
		x := mon.AddDate(0, 0, i)
		ds := x.Format(dateLayout)
		days = append(days, calDay{Date: ds, Num: x.Day(), In: true, Today: ds == todayDate, Items: a.on(ds, false), Weekday: x.Format("Mon Jan 2")})
	}
	sun := mon.AddDate(0, 0, 6)
	title := mon.Format("Jan 2") + " – " + sun.Format("Jan 2, 2006")
	return a.page(r, http.StatusOK, "week", "Week of "+mon.Format("Jan 2, 2006"), "week", nil, map[string]any{
		"Days": days, "Name": title, "Prev": mon.AddDate(0, 0, -7).Format(dateLayout), "Next": mon.AddDate(0, 0, 7).Format(dateLayout),
		"Month": mon.Format("2006-01")})
}

type calRoomDay struct {
	calRoom
	Items []calItem
}

func (a *calApp) day(r *http.Request) answer {
	d, ok := a.dayParam(r)
	if !ok {
		return a.fail(http.StatusNotFound, "That is not a date (use YYYY-MM-DD).")
	}
	ds := d.Format(dateLayout)
	items := a.on(ds, true)
	var rooms []calRoomDay
	for _, rm := range a.rooms {
		rd := calRoomDay{calRoom: rm}
		for _, it := range items {
			if it.Room == rm.ID && !it.Cancelled {
				rd.Items = append(rd.Items, it)
			}
		}
		rooms = append(rooms, rd)
	}
	return a.page(r, http.StatusOK, "day", d.Format("Monday, January 2, 2006"), "day",
		[]crumb{calHome, {d.Format("January 2006"), "/month/" + d.Format("2006-01")}, {d.Format("Mon, Jan 2"), ""}},
		map[string]any{"Date": ds, "Name": d.Format("Monday, January 2, 2006"), "Items": items, "RoomDays": rooms,
			"Prev": d.AddDate(0, 0, -1).Format(dateLayout), "Next": d.AddDate(0, 0, 1).Format(dateLayout), "IsToday": ds == todayDate})
}

func (a *calApp) crumbs(e *calEvent, last string) []crumb {
	c := []crumb{calHome}
	if t, ok := parseDate(e.Date); ok {
		c = append(c, crumb{t.Format("Mon, Jan 2"), "/day/" + e.Date})
	}
	c = append(c, crumb{e.Title, "/event/" + strconv.Itoa(e.ID)})
	if last != "" {
		c = append(c, crumb{last, ""})
	} else {
		c[len(c)-1].URL = ""
	}
	return c
}

func (a *calApp) show(r *http.Request) answer {
	e := a.event(r)
	if e == nil {
		return a.fail(http.StatusNotFound, "There is no such event.")
	}
	long := e.Date
	if t, ok := parseDate(e.Date); ok {
		long = t.Format("Monday, January 2, 2006")
	}
	var rm *calRoom
	if e.Room != "" {
		rm = a.room(e.Room)
	}
	return a.page(r, http.StatusOK, "event", e.Title, "", a.crumbs(e, ""), map[string]any{"E": e, "Long": long, "Room": rm, "Color": a.item(e).Color})
}

func (a *calApp) roomsPage(r *http.Request) answer {
	type row struct {
		calRoom
		Today    int
		Upcoming int
	}
	var rows []row
	for _, rm := range a.rooms {
		x := row{calRoom: rm}
		for _, e := range a.events {
			if e.Room == rm.ID && !e.Cancelled {
				if e.Date == todayDate {
					x.Today++
				}
				if e.Date >= todayDate {
					x.Upcoming++
				}
			}
		}
		rows = append(rows, x)
	}
	return a.page(r, http.StatusOK, "rooms", "Rooms", "rooms", []crumb{calHome, {"Rooms", ""}}, map[string]any{"Rows": rows})
}

func (a *calApp) search(r *http.Request) answer {
	q := clip(strings.TrimSpace(strings.ToValidUTF8(r.URL.Query().Get("q"), "")), 200)
	var items []calItem
	if q != "" {
		lq := strings.ToLower(q)
		for _, e := range a.events {
			hay := strings.ToLower(e.Title + " " + strings.Join(e.Attendees, " ") + " " + a.roomName(e.Room) + " " + e.Organizer)
			if strings.Contains(hay, lq) {
				items = append(items, a.item(e))
			}
		}
	}
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].Date != items[j].Date {
			return items[i].Date < items[j].Date
		}
		return items[i].Start < items[j].Start
	})
	return a.page(r, http.StatusOK, "search", "Search", "", []crumb{calHome, {"Search", ""}}, map[string]any{"Q": q, "Items": items})
}

// --- forms ---

type calForm struct {
	ID                                                int
	Mode, Action                                      string
	Title, Date, Start, End, Room, Attendees, Heading string
	Rooms                                             []calRoom
	Errs                                              map[string]string
	Focus                                             string
}

func calPrefill(f *calForm, q url.Values, a *calApp) {
	for _, p := range []struct {
		key string
		dst *string
		max int
	}{{"title", &f.Title, 300}, {"date", &f.Date, 20}, {"start", &f.Start, 10}, {"end", &f.End, 10}, {"attendees", &f.Attendees, 3000}} {
		if v := q.Get(p.key); v != "" {
			*p.dst = clip(v, p.max)
		}
	}
	if q.Has("room") {
		if rm := a.room(q.Get("room")); rm != nil {
			f.Room = rm.ID
		} else if q.Get("room") == "" {
			f.Room = ""
		}
	}
}

func (a *calApp) newForm(r *http.Request) answer {
	f := calForm{Mode: "new", Action: "/new", Heading: "New event", Rooms: a.rooms, Focus: "title", Date: todayDate, Start: "09:00", End: "10:00"}
	calPrefill(&f, r.URL.Query(), a)
	return a.page(r, http.StatusOK, "form", "New event", "new", []crumb{calHome, {"New event", ""}}, f)
}

// read validates the event form against the other events (self is the
// event being edited, nil for a new one).
func (a *calApp) read(f url.Values, self *calEvent) (*calEvent, map[string]string) {
	e := &calEvent{Title: strings.Join(strings.Fields(f.Get("title")), " "), Date: strings.TrimSpace(f.Get("date"))}
	errs := map[string]string{}
	if e.Title == "" {
		errs["title"] = "Add a title."
	} else if !lineOK(e.Title, calMaxTitle) {
		errs["title"] = fmt.Sprintf("A title is one line of at most %d characters.", calMaxTitle)
	}
	if e.Date == "" {
		errs["date"] = "Enter a date."
	} else if _, ok := parseDate(e.Date); !ok {
		errs["date"] = "Enter a real date as YYYY-MM-DD, e.g. 2026-03-05."
	}
	var ok bool
	if e.Start, ok = calTime(f.Get("start")); !ok {
		errs["start"] = "Enter a start time as HH:MM (24-hour), e.g. 09:30."
	}
	if e.End, ok = calTime(f.Get("end")); !ok {
		errs["end"] = "Enter an end time as HH:MM (24-hour), e.g. 10:30."
	}
	if errs["start"] == "" && errs["end"] == "" && calMinutes(e.End) <= calMinutes(e.Start) {
		errs["end"] = "The event must end after it starts."
	}
	var rm *calRoom
	if v := strings.TrimSpace(f.Get("room")); v != "" {
		if rm = a.room(v); rm == nil {
			errs["room"] = "Choose one of the rooms."
		} else {
			e.Room = rm.ID
		}
	}
	att, msg := calAttendees(f.Get("attendees"))
	if msg != "" {
		errs["attendees"] = msg
	}
	e.Attendees = att
	e.Organizer = a.organizer()
	if self != nil {
		e.ID, e.Organizer = self.ID, self.Organizer
	}
	if rm != nil && errs["attendees"] == "" {
		people := len(att)
		listed := false
		for _, m := range att {
			listed = listed || strings.EqualFold(m, e.Organizer)
		}
		if !listed {
			people++
		}
		if people > rm.Capacity {
			errs["room"] = fmt.Sprintf("%s seats %d; this event has %d people (you and %d attendees).", rm.Name, rm.Capacity, people, len(att))
			if listed {
				errs["room"] = fmt.Sprintf("%s seats %d; this event has %d people.", rm.Name, rm.Capacity, people)
			}
		}
	}
	if len(errs) == 0 && rm != nil {
		s, en := calMinutes(e.Start), calMinutes(e.End)
		for _, o := range a.events {
			if o == self || o.Cancelled || o.Room != rm.ID || o.Date != e.Date {
				continue
			}
			if s < calMinutes(o.End) && calMinutes(o.Start) < en {
				errs["room"] = fmt.Sprintf("%s is already booked from %s to %s (“%s”). Choose another time or room.", rm.Name, o.Start, o.End, o.Title)
				break
			}
		}
	}
	return e, errs
}

func (a *calApp) again(r *http.Request, fm calForm, f url.Values, errs map[string]string, crumbs []crumb) answer {
	fm.Title, fm.Date, fm.Start, fm.End = clip(f.Get("title"), 300), clip(f.Get("date"), 20), clip(f.Get("start"), 10), clip(f.Get("end"), 10)
	fm.Attendees = clip(f.Get("attendees"), 3000)
	if rm := a.room(f.Get("room")); rm != nil {
		fm.Room = rm.ID
	}
	fm.Rooms, fm.Errs = a.rooms, errs
	fm.Focus = firstErr(errs, "title", "date", "start", "end", "room", "attendees")
	return a.page(r, http.StatusUnprocessableEntity, "form", fm.Heading, fm.Mode, crumbs, fm)
}

func (a *calApp) create(r *http.Request, f url.Values) answer {
	e, errs := a.read(f, nil)
	if len(errs) == 0 && len(a.events) >= calMaxEvents {
		errs["title"] = fmt.Sprintf("This calendar holds at most %d events.", calMaxEvents)
	}
	if len(errs) > 0 {
		return a.again(r, calForm{Mode: "new", Action: "/new", Heading: "New event"}, f, errs, []crumb{calHome, {"New event", ""}})
	}
	e.ID = a.nextID(nil)
	a.add("create_event", map[string]string{"id": strconv.Itoa(e.ID), "title": e.Title, "date": e.Date, "start": e.Start,
		"end": e.End, "room": e.Room, "attendees": strings.Join(e.Attendees, ",")})
	a.events = append(a.events, e)
	return redirect("/event/" + strconv.Itoa(e.ID) + "?flash=created")
}

func (a *calApp) editForm(r *http.Request) answer {
	e := a.event(r)
	if e == nil {
		return a.fail(http.StatusNotFound, "There is no such event.")
	}
	if e.Cancelled {
		return a.fail(http.StatusConflict, "This event was cancelled and can no longer be changed.")
	}
	f := calForm{ID: e.ID, Mode: "edit", Action: "/event/" + strconv.Itoa(e.ID) + "/edit", Heading: "Edit event", Rooms: a.rooms, Focus: "title",
		Title: e.Title, Date: e.Date, Start: e.Start, End: e.End, Room: e.Room, Attendees: strings.Join(e.Attendees, ", ")}
	calPrefill(&f, r.URL.Query(), a)
	return a.page(r, http.StatusOK, "form", "Edit "+e.Title, "", a.crumbs(e, "Edit"), f)
}

func (a *calApp) edit(r *http.Request, f url.Values) answer {
	old := a.event(r)
	if old == nil {
		return a.fail(http.StatusNotFound, "There is no such event.")
	}
	if old.Cancelled {
		return a.fail(http.StatusConflict, "This event was cancelled and can no longer be changed.")
	}
	e, errs := a.read(f, old)
	if len(errs) > 0 {
		return a.again(r, calForm{ID: old.ID, Mode: "edit", Action: "/event/" + strconv.Itoa(old.ID) + "/edit", Heading: "Edit event"}, f, errs, a.crumbs(old, "Edit"))
	}
	fields := map[string]string{}
	for _, c := range []struct{ k, o, n string }{{"title", old.Title, e.Title}, {"date", old.Date, e.Date}, {"start", old.Start, e.Start},
		{"end", old.End, e.End}, {"room", old.Room, e.Room}, {"attendees", strings.Join(old.Attendees, ","), strings.Join(e.Attendees, ",")}} {
		if c.o != c.n {
			fields[c.k] = c.n
		}
	}
	to := "/event/" + strconv.Itoa(old.ID)
	if len(fields) == 0 {
		return redirect(to + "?flash=nochange")
	}
	fields["id"], fields["title"] = strconv.Itoa(old.ID), e.Title
	a.add("edit_event", fields)
	old.Title, old.Date, old.Start, old.End, old.Room, old.Attendees = e.Title, e.Date, e.Start, e.End, e.Room, e.Attendees
	return redirect(to + "?flash=saved")
}

func (a *calApp) cancelForm(r *http.Request) answer {
	e := a.event(r)
	if e == nil {
		return a.fail(http.StatusNotFound, "There is no such event.")
	}
	return a.page(r, http.StatusOK, "cancel", "Cancel "+e.Title, "", a.crumbs(e, "Cancel"), map[string]any{"E": a.item(e), "Err": ""})
}

func (a *calApp) cancel(r *http.Request, f url.Values) answer {
	e := a.event(r)
	if e == nil {
		return a.fail(http.StatusNotFound, "There is no such event.")
	}
	msg := ""
	if e.Cancelled {
		msg = "This event is already cancelled."
	} else if f.Get("confirm") != "yes" {
		msg = "Confirm that you want to cancel this event."
	}
	if msg != "" {
		return a.page(r, http.StatusUnprocessableEntity, "cancel", "Cancel "+e.Title, "", a.crumbs(e, "Cancel"), map[string]any{"E": a.item(e), "Err": msg})
	}
	a.add("cancel_event", map[string]string{"id": strconv.Itoa(e.ID), "title": e.Title})
	e.Cancelled = true
	return redirect("/event/" + strconv.Itoa(e.ID) + "?flash=cancelled")
}
