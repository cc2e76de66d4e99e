package webapp

// Keyboard paths (the oracle's recipes). Every change starts with ctrl+l,
// typing the URL (with "http://"), and Enter; the page then has focus on
// the field named. Enter in a text or number field (or on a checkbox)
// submits its form; on a select it does not (type the option's first
// letters to pick it, then Tab on, or prefill it from the URL). Forms do
// no browser-side validation: the server answers with inline errors.
//
//	invite user:   /users/new?name=N&email=E&role=R: focus in Name; Enter.
//	               By hand: type name; Tab → Email (type); Tab → Role
//	               (select: type the role's name); Tab → "Send invite"; Enter.
//	edit user:     /users/ID/edit?status=suspended (any of name, email, role,
//	               status prefill the form): focus in Name; Enter. By hand:
//	               Tab order Name → Email → Role (select) → Status (select)
//	               → "Save changes" (e.g. role by hand: Tab Tab, type
//	               "viewer", Tab Tab, Enter).
//	   suspend:    /users/ID/edit?status=suspended, Enter.
//	   reactivate: /users/ID/edit?status=active, Enter.
//	   change role:/users/ID/edit?role=editor, Enter.
//	settings:      /settings?maintenance_mode=on&session_timeout_minutes=30
//	               (any setting prefills; toggles take on/off, 1/0,
//	               true/false): focus in "Site name"; Enter. By hand: Tab
//	               order Site name → Session timeout → Max upload →
//	               two_factor_required → allow_signups → maintenance_mode →
//	               email_notifications (checkboxes: Space toggles) → "Save
//	               settings"; Enter in a text field or on a checkbox saves
//	               (e.g. maintenance on by hand: Tab×5, Space, Enter).
//	create key:    /keys?label=L: focus in "Key name" (prefilled); Enter.
//	revoke key:    /keys/ID/revoke: a confirmation page, focus on its
//	               "Revoke key" button; Enter. (The post needs confirm=yes,
//	               which the page's form carries.)
//
// Read-only pages: / (dashboard), /users (?q= name or email, role=,
// status=, sort=name|email|role|status|last_login, dir=asc|desc),
// /users/ID, /audit.

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// The admin panel ("Acme Admin") manages an organisation's users, its
// settings and API keys, and shows an audit log.
//
// Data (all fields optional unless said):
//
//	{
//	  "site": "Acme Admin",                        // the name in the header
//	  "user": {"name": "Jordan Blake", "email": "jordan@acme.example"}, // the signed-in admin
//	  "roles": ["admin", "editor", "viewer"],      // the role select's options, in order;
//	                                               // when absent: the users' roles, or these three
//	  "users": [{
//	    "id": 1,                                   // a whole number (or digits in a string);
//	                                               // assigned when absent; unique
//	    "name": "Sam Lee",                         // required
//	    "email": "sam@acme.example",               // required, valid, unique (any case)
//	    "role": "editor",                          // one of roles (any case); the first when absent
//	    "status": "active",                        // active | suspended | invited (default active)
//	    "last_login": "2026-02-27 16:40"           // YYYY-MM-DD[ HH:MM]; "" for never
//	  }],
//	  "settings": {
//	    "site_name": "Acme Corp",                  // 1-60 characters (default "Acme")
//	    "session_timeout_minutes": 60,             // 5..1440 (default 60)
//	    "max_upload_mb": 25,                       // 1..1024 (default 25)
//	    "two_factor_required": false, "allow_signups": true,
//	    "maintenance_mode": false, "email_notifications": true
//	  },
//	  "keys": [{"id": "key_1", "label": "CI deploy", "created": "2026-01-10", "revoked": false}],
//	  "audit": [{"date": "2026-02-28 14:02", "actor": "Jordan Blake",
//	             "action": "Changed role", "target": "sam@acme.example"}] // earlier history, shown on /audit
//	}
//
// Rules: a user's email is unique (any case); status is active or
// suspended (an invited user may stay invited); an invited user starts
// "invited" with no last login; active key labels are unique (any case)
// and made of letters, digits, spaces and - _ . : ( ) / (64 at most);
// at most 1000 users and 100 keys (revoked ones count).
//
// State: {"users": [{id, name, email, role, status, last_login}] (by id),
// "settings": {...}, "keys": [{id, label, created, revoked, revoked_on}],
// "log": [...]}. Log actions and their fields: invite_user {id, name,
// email, role}; update_user {id, email, and each changed field of name,
// email, role, status}; update_settings {each changed setting: numbers as
// digits, toggles as "true"/"false"}; create_key {id, label}; revoke_key
// {id, label}.

func init() { register("admin", newAdmin) }

//go:embed pages/admin/*.html
var adminFS embed.FS

var adminTmpl = parsePages(adminFS, "pages/admin", officeFuncs())

const (
	adminMaxUsers = 1000
	adminMaxKeys  = 100
	adminMaxRoles = 20
)

var adminStatuses = []string{"active", "suspended", "invited"}

type adminUser struct {
	ID        int    `json:"id"`
	Name      string `json:"name"`
	Email     string `json:"email"`
	Role      string `json:"role"`
	Status    string `json:"status"`
	LastLogin string `json:"last_login"`
}

type adminSettings struct {
	SiteName              string `json:"site_name"`
	SessionTimeoutMinutes int    `json:"session_timeout_minutes"`
	MaxUploadMB           int    `json:"max_upload_mb"`
	TwoFactorRequired     bool   `json:"two_factor_required"`
	AllowSignups          bool   `json:"allow_signups"`
	MaintenanceMode       bool   `json:"maintenance_mode"`
	EmailNotifications    bool   `json:"email_notifications"`
}

type adminKey struct {
	ID        string `json:"id"`
	Label     string `json:"label"`
	Created   string `json:"created"`
	Revoked   bool   `json:"revoked"`
	RevokedOn string `json:"revoked_on,omitempty"`
}

type adminAudit struct {
	Date   string `json:"date"`
	Actor  string `json:"actor"`
	Action string `json:"action"`
	Target string `json:"target"`
}

type adminState struct {
	Users    []*adminUser  `json:"users"`
	Settings adminSettings `json:"settings"`
	Keys     []*adminKey   `json:"keys"`
	Log      []Event       `json:"log"`
}

type adminApp struct {
	journal
	web      router
	name     string
	me, mail string
	roles    []string
	audit    []adminAudit
	users    []*adminUser // by id
	settings adminSettings
	keys     []*adminKey // in creation order
}

func newAdmin(data, saved []byte) (App, error) {
	var d struct {
		Site  string   `json:"site"`
		User  person   `json:"user"`
		Roles []string `json:"roles"`
		Users []struct {
			ID        jsonID `json:"id"`
			Name      string `json:"name"`
			Email     string `json:"email"`
			Role      string `json:"role"`
			Status    string `json:"status"`
			LastLogin string `json:"last_login"`
		} `json:"users"`
		Settings struct {
			SiteName              *string `json:"site_name"`
			SessionTimeoutMinutes *int    `json:"session_timeout_minutes"`
			MaxUploadMB           *int    `json:"max_upload_mb"`
			TwoFactorRequired     bool    `json:"two_factor_required"`
			AllowSignups          bool    `json:"allow_signups"`
			MaintenanceMode       bool    `json:"maintenance_mode"`
			EmailNotifications    bool    `json:"email_notifications"`
		} `json:"settings"`
		Keys []struct {
			ID        jsonStr `json:"id"`
			Label     string  `json:"label"`
			Created   string  `json:"created"`
			Revoked   bool    `json:"revoked"`
			RevokedOn string  `json:"revoked_on"`
		} `json:"keys"`
		Audit []adminAudit `json:"audit"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("admin: data: %v", err)
	}
	a := &adminApp{name: strings.TrimSpace(d.Site), me: strings.TrimSpace(d.User.Name), mail: strings.TrimSpace(d.User.Email)}
	if a.name == "" {
		a.name = "Acme Admin"
	}
	if a.me == "" {
		a.me = "Admin"
	}
	if !lineOK(a.name, 60) || !lineOK(a.me, 100) || !lineOK(a.mail, 254) {
		return nil, fmt.Errorf("admin: site or user is not one line")
	}
	if len(d.Users) > adminMaxUsers || len(d.Keys) > adminMaxKeys || len(d.Roles) > adminMaxRoles || len(d.Audit) > MaxLog {
		return nil, fmt.Errorf("admin: data over the limits (%d users, %d keys, %d roles, %d audit entries)", adminMaxUsers, adminMaxKeys, adminMaxRoles, MaxLog)
	}
	// Roles.
	roles := d.Roles
	if len(roles) == 0 {
		seen := map[string]bool{}
		for _, u := range d.Users {
			r := strings.ToLower(strings.TrimSpace(u.Role))
			if r != "" && !seen[r] {
				seen[r] = true
				roles = append(roles, r)
			}
		}
		if len(roles) == 0 {
			roles = []string{"admin", "editor", "viewer"}
		}
	}
	for _, r := range roles {
		r = strings.TrimSpace(r)
		if r == "" || !lineOK(r, 40) {
			return nil, fmt.Errorf("admin: role %q: want one line of 1-40 characters", r)
		}
		if a.role(r) != "" {
			return nil, fmt.Errorf("admin: duplicate role %q", r)
		}
		a.roles = append(a.roles, r)
	}
	if len(a.roles) > adminMaxRoles {
		return nil, fmt.Errorf("admin: over %d roles", adminMaxRoles)
	}
	// Users.
	ids := map[int]bool{}
	for _, du := range d.Users {
		if du.ID > 0 {
			if ids[int(du.ID)] {
				return nil, fmt.Errorf("admin: duplicate user id %d", du.ID)
			}
			ids[int(du.ID)] = true
		}
	}
	for i, du := range d.Users {
		u := &adminUser{ID: int(du.ID), Name: strings.TrimSpace(du.Name), Email: strings.TrimSpace(du.Email),
			Role: a.role(du.Role), Status: strings.ToLower(strings.TrimSpace(du.Status)), LastLogin: strings.TrimSpace(du.LastLogin)}
		if strings.TrimSpace(du.Role) == "" {
			u.Role = a.roles[0]
		} else if u.Role == "" {
			return nil, fmt.Errorf("admin: user %d: role %q is not one of %v", i, du.Role, a.roles)
		}
		if u.Status == "" {
			u.Status = "active"
		}
		if u.ID == 0 {
			u.ID = a.nextID(ids)
			ids[u.ID] = true
		}
		if err := a.checkUser(u); err != nil {
			return nil, fmt.Errorf("admin: user %d: %v", i, err)
		}
		a.users = append(a.users, u)
	}
	sort.Slice(a.users, func(i, j int) bool { return a.users[i].ID < a.users[j].ID })
	// Settings.
	s := adminSettings{SiteName: "Acme", SessionTimeoutMinutes: 60, MaxUploadMB: 25,
		TwoFactorRequired: d.Settings.TwoFactorRequired, AllowSignups: d.Settings.AllowSignups,
		MaintenanceMode: d.Settings.MaintenanceMode, EmailNotifications: d.Settings.EmailNotifications}
	if d.Settings.SiteName != nil {
		s.SiteName = strings.TrimSpace(*d.Settings.SiteName)
	}
	if d.Settings.SessionTimeoutMinutes != nil {
		s.SessionTimeoutMinutes = *d.Settings.SessionTimeoutMinutes
	}
	if d.Settings.MaxUploadMB != nil {
		s.MaxUploadMB = *d.Settings.MaxUploadMB
	}
	if errs := adminCheckSettings(s); len(errs) > 0 {
		return nil, fmt.Errorf("admin: settings: %v", errs)
	}
	a.settings = s
	// Keys.
	for i, dk := range d.Keys {
		k := &adminKey{ID: strings.TrimSpace(string(dk.ID)), Label: strings.TrimSpace(dk.Label), Created: strings.TrimSpace(dk.Created),
			Revoked: dk.Revoked, RevokedOn: strings.TrimSpace(dk.RevokedOn)}
		if k.Created == "" {
			k.Created = todayDate
		}
		if k.ID == "" {
			k.ID = a.nextKeyID()
		}
		if err := a.checkKey(k); err != nil {
			return nil, fmt.Errorf("admin: key %d: %v", i, err)
		}
		a.keys = append(a.keys, k)
	}
	// Audit.
	for i, e := range d.Audit {
		if !lineOK(e.Date, 40) || !lineOK(e.Actor, 100) || !lineOK(e.Action, 200) || !lineOK(e.Target, 300) {
			return nil, fmt.Errorf("admin: audit entry %d: fields must be single lines", i)
		}
		a.audit = append(a.audit, e)
	}
	sort.SliceStable(a.audit, func(i, j int) bool { return a.audit[i].Date > a.audit[j].Date })
	if saved != nil {
		var st adminState
		if err := json.Unmarshal(saved, &st); err != nil {
			return nil, fmt.Errorf("admin: saved state: %v", err)
		}
		if len(st.Users) > adminMaxUsers || len(st.Keys) > adminMaxKeys || len(st.Log) > MaxLog {
			return nil, fmt.Errorf("admin: saved state: over the limits")
		}
		a.users, a.keys = nil, nil
		ids := map[int]bool{}
		for _, u := range st.Users {
			if u == nil || u.ID <= 0 || ids[u.ID] {
				return nil, fmt.Errorf("admin: saved state: a user is null or has a bad or duplicate id")
			}
			ids[u.ID] = true
			if a.role(u.Role) != u.Role {
				return nil, fmt.Errorf("admin: saved state: user %d: unknown role %q", u.ID, u.Role)
			}
			if err := a.checkUser(u); err != nil {
				return nil, fmt.Errorf("admin: saved state: user %d: %v", u.ID, err)
			}
			a.users = append(a.users, u)
		}
		sort.Slice(a.users, func(i, j int) bool { return a.users[i].ID < a.users[j].ID })
		if errs := adminCheckSettings(st.Settings); len(errs) > 0 {
			return nil, fmt.Errorf("admin: saved state: settings: %v", errs)
		}
		a.settings = st.Settings
		for _, k := range st.Keys {
			if k == nil {
				return nil, fmt.Errorf("admin: saved state: a key is null")
			}
			if err := a.checkKey(k); err != nil {
				return nil, fmt.Errorf("admin: saved state: %v", err)
			}
			a.keys = append(a.keys, k)
		}
		a.Log = st.Log
	}
	a.routes()
	return a, nil
}

// role is the role named r (any case), or "".
func (a *adminApp) role(r string) string {
	r = strings.TrimSpace(r)
	for _, x := range a.roles {
		if strings.EqualFold(x, r) {
			return x
		}
	}
	return ""
}

func (a *adminApp) nextID(taken map[int]bool) int {
	return freeID(a.users, func(u *adminUser) int { return u.ID }, taken)
}

func (a *adminApp) nextKeyID() string {
	for n := len(a.keys) + 1; ; n++ {
		id := "key_" + strconv.Itoa(n)
		if a.key(id) == nil {
			return id
		}
	}
}

// checkUser validates u against the users already in a.
func (a *adminApp) checkUser(u *adminUser) error {
	if u.Name == "" || !lineOK(u.Name, 100) {
		return fmt.Errorf("name must be one line of 1-100 characters")
	}
	if !emailOK(u.Email) {
		return fmt.Errorf("email %q is not valid", u.Email)
	}
	if o := a.byEmail(u.Email); o != nil && o != u {
		return fmt.Errorf("email %q is also user %d's", u.Email, o.ID)
	}
	if !adminIn(adminStatuses, u.Status) {
		return fmt.Errorf("status %q is not one of %v", u.Status, adminStatuses)
	}
	if u.LastLogin != "" {
		if _, ok := parseDate(u.LastLogin[:min(10, len(u.LastLogin))]); !ok || !lineOK(u.LastLogin, 25) {
			return fmt.Errorf("last_login %q is not YYYY-MM-DD[ HH:MM]", u.LastLogin)
		}
	}
	return nil
}

func (a *adminApp) checkKey(k *adminKey) error {
	if !idOK(k.ID) {
		return fmt.Errorf("key id %q: want 1-64 letters, digits, '-' or '_'", k.ID)
	}
	for _, o := range a.keys {
		if o.ID == k.ID && o != k {
			return fmt.Errorf("duplicate key id %q", k.ID)
		}
	}
	if k.Label == "" || !lineOK(k.Label, 64) {
		return fmt.Errorf("key %q: label must be one line of 1-64 characters", k.ID)
	}
	if _, ok := parseDate(k.Created); !ok {
		return fmt.Errorf("key %q: created %q is not YYYY-MM-DD", k.ID, k.Created)
	}
	if !lineOK(k.RevokedOn, 25) {
		return fmt.Errorf("key %q: bad revoked_on", k.ID)
	}
	return nil
}

// adminCheckSettings validates settings; the map is field → message.
func adminCheckSettings(s adminSettings) map[string]string {
	errs := map[string]string{}
	if s.SiteName == "" || !lineOK(s.SiteName, 60) {
		errs["site_name"] = "Enter a site name of at most 60 characters."
	}
	if s.SessionTimeoutMinutes < 5 || s.SessionTimeoutMinutes > 1440 {
		errs["session_timeout_minutes"] = "Session timeout must be between 5 and 1440 minutes."
	}
	if s.MaxUploadMB < 1 || s.MaxUploadMB > 1024 {
		errs["max_upload_mb"] = "Maximum upload size must be between 1 and 1024 MB."
	}
	return errs
}

func adminIn(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (a *adminApp) byEmail(e string) *adminUser {
	for _, u := range a.users {
		if strings.EqualFold(u.Email, e) {
			return u
		}
	}
	return nil
}

func (a *adminApp) user(r *http.Request) *adminUser {
	return pathItem(r, a.users, func(u *adminUser) int { return u.ID })
}

func (a *adminApp) key(id string) *adminKey {
	for _, k := range a.keys {
		if k.ID == id {
			return k
		}
	}
	return nil
}

func (a *adminApp) State() ([]byte, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := adminState{Users: orEmpty(a.users), Settings: a.settings, Keys: orEmpty(a.keys), Log: orEmpty(a.Log)}
	return json.Marshal(s)
}

func (a *adminApp) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.web.ServeHTTP(w, r) }

func (a *adminApp) routes() {
	a.web = a.journal.logRouter(a.fail)
	s := &a.web
	s.get("/{$}", a.dashboard)
	s.get("/users", a.list)
	s.get("/users/new", a.inviteForm)
	s.post("/users/new", a.invite)
	s.get("/users/{id}", a.profile)
	s.get("/users/{id}/edit", a.editForm)
	s.post("/users/{id}/edit", a.edit)
	s.get("/settings", a.settingsForm)
	s.post("/settings", a.saveSettings)
	s.get("/keys", a.keysPage)
	s.post("/keys", a.createKey)
	s.get("/keys/{id}/revoke", a.revokeForm)
	s.post("/keys/{id}/revoke", a.revoke)
	s.get("/audit", a.auditPage)
	s.notFound()
}

// --- views ---

type adminView struct {
	Title       string
	Site        string
	Org         string
	Me, Mail    string
	Nav         string
	Crumbs      []crumb
	Flash       string
	Q           string
	Maintenance bool
	P           any
}

var adminFlashes = map[string]string{
	"invited":  "Invitation sent.",
	"saved":    "User updated.",
	"nochange": "No changes to save.",
	"settings": "Settings saved.",
	"created":  "API key created.",
	"revoked":  "API key revoked.",
}

func (a *adminApp) show(r *http.Request, status int, page, title, nav string, crumbs []crumb, p any) answer {
	v := adminView{Title: title, Site: a.name, Org: a.settings.SiteName, Me: a.me, Mail: a.mail, Nav: nav,
		Crumbs: crumbs, Flash: adminFlashes[r.URL.Query().Get("flash")], Maintenance: a.settings.MaintenanceMode, P: p}
	return render(adminTmpl[page], status, v)
}

func (a *adminApp) fail(status int, msg string) answer {
	v := adminView{Title: http.StatusText(status), Site: a.name, Org: a.settings.SiteName, Me: a.me, Mail: a.mail,
		P: failData(status, msg)}
	return render(adminTmpl["error"], status, v)
}

var adminHome = crumb{"Dashboard", "/"}

func (a *adminApp) dashboard(r *http.Request) answer {
	counts := map[string]int{}
	for _, u := range a.users {
		counts[u.Status]++
	}
	active := 0
	for _, k := range a.keys {
		if !k.Revoked {
			active++
		}
	}
	recent := a.auditRows()
	if len(recent) > 6 {
		recent = recent[:6]
	}
	return a.show(r, http.StatusOK, "dashboard", "Dashboard", "dash", nil, map[string]any{
		"Users": len(a.users), "Counts": counts, "Keys": active, "Settings": a.settings, "Recent": recent})
}

type adminRow struct {
	*adminUser
	Ago string
}

func (a *adminApp) list(r *http.Request) answer {
	q := r.URL.Query()
	needle := clip(strings.TrimSpace(q.Get("q")), 200)
	role := a.role(q.Get("role"))
	status := q.Get("status")
	if !adminIn(adminStatuses, status) {
		status = ""
	}
	sortBy := q.Get("sort")
	if !adminIn([]string{"name", "email", "role", "status", "last_login"}, sortBy) {
		sortBy = "name"
	}
	desc := q.Get("dir") == "desc"
	var rows []adminRow
	for _, u := range a.users {
		if role != "" && u.Role != role || status != "" && u.Status != status {
			continue
		}
		if needle != "" && !strings.Contains(strings.ToLower(u.Name+" "+u.Email), strings.ToLower(needle)) {
			continue
		}
		ago := "Never"
		if u.LastLogin != "" {
			ago = relDate(u.LastLogin)
		}
		rows = append(rows, adminRow{u, ago})
	}
	key := func(u *adminUser) string {
		switch sortBy {
		case "email":
			return strings.ToLower(u.Email)
		case "role":
			return u.Role
		case "status":
			return u.Status
		case "last_login":
			return u.LastLogin
		}
		return strings.ToLower(u.Name)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		ki, kj := key(rows[i].adminUser), key(rows[j].adminUser)
		if ki == kj {
			return rows[i].ID < rows[j].ID
		}
		return (ki < kj) != desc
	})
	// Column headers link to the same filter, sorted by them (a second
	// click reverses).
	cols := []struct{ Key, Name string }{{"name", "Name"}, {"email", "Email"}, {"role", "Role"}, {"status", "Status"}, {"last_login", "Last login"}}
	type colLink struct {
		Name, URL, Arrow string
	}
	var heads []colLink
	for _, c := range cols {
		v := url.Values{}
		if needle != "" {
			v.Set("q", needle)
		}
		if role != "" {
			v.Set("role", role)
		}
		if status != "" {
			v.Set("status", status)
		}
		v.Set("sort", c.Key)
		arrow := ""
		if c.Key == sortBy {
			if desc {
				arrow = "▼"
			} else {
				arrow = "▲"
				v.Set("dir", "desc")
			}
		}
		heads = append(heads, colLink{c.Name, "/users?" + v.Encode(), arrow})
	}
	return a.show(r, http.StatusOK, "users", "Users", "users", []crumb{adminHome, {"Users", ""}}, map[string]any{
		"Rows": rows, "Total": len(a.users), "Q": needle, "Role": role, "Status": status, "Roles": a.roles,
		"Statuses": adminStatuses, "Heads": heads, "Filtered": needle != "" || role != "" || status != ""})
}

func (a *adminApp) profile(r *http.Request) answer {
	u := a.user(r)
	if u == nil {
		return a.fail(http.StatusNotFound, "There is no such user.")
	}
	var acts []adminAuditRow
	for _, e := range a.auditRows() {
		if strings.EqualFold(e.Target, u.Email) || e.UserID == u.ID {
			acts = append(acts, e)
		}
	}
	ago := "Never"
	if u.LastLogin != "" {
		ago = relDate(u.LastLogin)
	}
	return a.show(r, http.StatusOK, "profile", u.Name, "users", []crumb{adminHome, {"Users", "/users"}, {u.Name, ""}},
		map[string]any{"U": u, "Ago": ago, "Activity": acts})
}

// --- users ---

type adminUserForm struct {
	ID                               int
	Name, Email, Role, Status, Title string
	Roles, Statuses                  []string
	Errs                             map[string]string
	Focus                            string
}

func (a *adminApp) inviteForm(r *http.Request) answer {
	q := r.URL.Query()
	f := adminUserForm{Name: clip(q.Get("name"), 200), Email: clip(q.Get("email"), 300), Role: a.role(q.Get("role")),
		Roles: a.roles, Focus: "name"}
	if f.Role == "" {
		f.Role = a.defaultRole()
	}
	return a.show(r, http.StatusOK, "invite", "Invite user", "users", []crumb{adminHome, {"Users", "/users"}, {"Invite", ""}}, f)
}

// defaultRole is the least privileged-looking role: viewer or member when
// there is one, else the last.
func (a *adminApp) defaultRole() string {
	for _, r := range []string{"viewer", "member", "user", "read-only"} {
		if x := a.role(r); x != "" {
			return x
		}
	}
	return a.roles[len(a.roles)-1]
}

func (a *adminApp) invite(r *http.Request, f url.Values) answer {
	name := strings.Join(strings.Fields(f.Get("name")), " ")
	email := strings.TrimSpace(f.Get("email"))
	role := a.role(f.Get("role"))
	errs := map[string]string{}
	if name == "" || !lineOK(name, 100) {
		errs["name"] = "Enter the person's name (at most 100 characters)."
	}
	switch {
	case email == "":
		errs["email"] = "Enter an email address."
	case !emailOK(email):
		errs["email"] = "Enter a valid email address, like name@example.com."
	case a.byEmail(email) != nil:
		errs["email"] = "A user with this email already exists."
	}
	if role == "" {
		errs["role"] = "Choose a role."
	}
	if len(errs) == 0 && len(a.users) >= adminMaxUsers {
		errs["email"] = fmt.Sprintf("This organisation has reached its limit of %d users.", adminMaxUsers)
	}
	if len(errs) > 0 {
		fm := adminUserForm{Name: clip(f.Get("name"), 200), Email: clip(f.Get("email"), 300), Role: role, Roles: a.roles, Errs: errs}
		if fm.Role == "" {
			fm.Role = a.defaultRole()
		}
		fm.Focus = firstErr(errs, "name", "email", "role")
		return a.show(r, http.StatusUnprocessableEntity, "invite", "Invite user", "users", []crumb{adminHome, {"Users", "/users"}, {"Invite", ""}}, fm)
	}
	u := &adminUser{ID: a.nextID(nil), Name: name, Email: email, Role: role, Status: "invited"}
	a.add("invite_user", map[string]string{"id": strconv.Itoa(u.ID), "name": name, "email": email, "role": role})
	a.users = append(a.users, u)
	return redirect("/users?flash=invited")
}

// statuses are the statuses u may be given.
func adminStatusesFor(u *adminUser) []string {
	if u.Status == "invited" {
		return adminStatuses
	}
	return adminStatuses[:2]
}

func (a *adminApp) editForm(r *http.Request) answer {
	u := a.user(r)
	if u == nil {
		return a.fail(http.StatusNotFound, "There is no such user.")
	}
	q := r.URL.Query()
	f := adminUserForm{ID: u.ID, Title: u.Name, Name: u.Name, Email: u.Email, Role: u.Role, Status: u.Status,
		Roles: a.roles, Statuses: adminStatusesFor(u), Focus: "name"}
	if v := q.Get("name"); v != "" {
		f.Name = clip(v, 200)
	}
	if v := q.Get("email"); v != "" {
		f.Email = clip(v, 300)
	}
	if v := a.role(q.Get("role")); v != "" {
		f.Role = v
	}
	if v := strings.ToLower(q.Get("status")); adminIn(f.Statuses, v) {
		f.Status = v
	}
	return a.show(r, http.StatusOK, "edit", "Edit "+u.Name, "users", []crumb{adminHome, {"Users", "/users"}, {u.Name, "/users/" + strconv.Itoa(u.ID)}, {"Edit", ""}}, f)
}

func (a *adminApp) edit(r *http.Request, f url.Values) answer {
	u := a.user(r)
	if u == nil {
		return a.fail(http.StatusNotFound, "There is no such user.")
	}
	name := strings.Join(strings.Fields(f.Get("name")), " ")
	email := strings.TrimSpace(f.Get("email"))
	role := a.role(f.Get("role"))
	status := strings.ToLower(strings.TrimSpace(f.Get("status")))
	errs := map[string]string{}
	if name == "" || !lineOK(name, 100) {
		errs["name"] = "Enter a name (at most 100 characters)."
	}
	switch {
	case email == "":
		errs["email"] = "Enter an email address."
	case !emailOK(email):
		errs["email"] = "Enter a valid email address, like name@example.com."
	default:
		if o := a.byEmail(email); o != nil && o != u {
			errs["email"] = "Another user already has this email."
		}
	}
	if role == "" {
		errs["role"] = "Choose one of the roles."
	}
	if !adminIn(adminStatusesFor(u), status) {
		errs["status"] = "Choose a status: active or suspended."
	}
	if len(errs) > 0 {
		fm := adminUserForm{ID: u.ID, Title: u.Name, Name: clip(f.Get("name"), 200), Email: clip(f.Get("email"), 300),
			Role: role, Status: status, Roles: a.roles, Statuses: adminStatusesFor(u), Errs: errs}
		if fm.Role == "" {
			fm.Role = u.Role
		}
		if errs["status"] != "" {
			fm.Status = u.Status
		}
		fm.Focus = firstErr(errs, "name", "email", "role", "status")
		return a.show(r, http.StatusUnprocessableEntity, "edit", "Edit "+u.Name, "users",
			[]crumb{adminHome, {"Users", "/users"}, {u.Name, "/users/" + strconv.Itoa(u.ID)}, {"Edit", ""}}, fm)
	}
	fields := map[string]string{}
	if name != u.Name {
		fields["name"] = name
	}
	if email != u.Email {
		fields["email"] = email
	}
	if role != u.Role {
		fields["role"] = role
	}
	if status != u.Status {
		fields["status"] = status
	}
	to := "/users/" + strconv.Itoa(u.ID)
	if len(fields) == 0 {
		return redirect(to + "?flash=nochange")
	}
	fields["id"] = strconv.Itoa(u.ID)
	fields["email"] = email
	a.add("update_user", fields)
	u.Name, u.Email, u.Role, u.Status = name, email, role, status
	return redirect(to + "?flash=saved")
}

// --- settings ---

type adminSettingsForm struct {
	SiteName, Timeout, Upload string
	Toggles                   []adminToggle
	Errs                      map[string]string
	Focus                     string
}

type adminToggle struct {
	Key, Name, Help string
	On              bool
}

func adminToggles(s adminSettings) []adminToggle {
	return []adminToggle{
		{"two_factor_required", "Require two-factor authentication", "Every member must set up 2FA at next sign-in.", s.TwoFactorRequired},
		{"allow_signups", "Allow sign-ups", "Anyone with an email at your domain can create an account.", s.AllowSignups},
		{"maintenance_mode", "Maintenance mode", "Only admins can sign in; everyone else sees a maintenance page.", s.MaintenanceMode},
		{"email_notifications", "Email notifications", "Send members emails about activity that concerns them.", s.EmailNotifications},
	}
}

func (a *adminApp) settingsForm(r *http.Request) answer {
	q := r.URL.Query()
	s := a.settings
	f := adminSettingsForm{SiteName: s.SiteName, Timeout: strconv.Itoa(s.SessionTimeoutMinutes), Upload: strconv.Itoa(s.MaxUploadMB), Focus: "site_name"}
	if v := q.Get("site_name"); v != "" {
		f.SiteName = clip(v, 200)
	}
	if v := q.Get("session_timeout_minutes"); v != "" {
		f.Timeout = clip(v, 20)
	}
	if v := q.Get("max_upload_mb"); v != "" {
		f.Upload = clip(v, 20)
	}
	f.Toggles = adminToggles(s)
	for i, t := range f.Toggles {
		if q.Has(t.Key) {
			if on, ok := parseFlag(q.Get(t.Key)); ok {
				f.Toggles[i].On = on
			}
		}
	}
	return a.show(r, http.StatusOK, "settings", "Settings", "settings", []crumb{adminHome, {"Settings", ""}}, f)
}

func (a *adminApp) saveSettings(r *http.Request, f url.Values) answer {
	s := adminSettings{SiteName: strings.Join(strings.Fields(f.Get("site_name")), " ")}
	errs := map[string]string{}
	var err error
	if s.SessionTimeoutMinutes, err = strconv.Atoi(strings.TrimSpace(f.Get("session_timeout_minutes"))); err != nil {
		errs["session_timeout_minutes"] = "Session timeout must be a whole number of minutes between 5 and 1440."
	}
	if s.MaxUploadMB, err = strconv.Atoi(strings.TrimSpace(f.Get("max_upload_mb"))); err != nil {
		errs["max_upload_mb"] = "Maximum upload size must be a whole number between 1 and 1024."
	}
	bad := false
	for _, t := range []struct {
		key string
		v   *bool
	}{{"two_factor_required", &s.TwoFactorRequired}, {"allow_signups", &s.AllowSignups},
		{"maintenance_mode", &s.MaintenanceMode}, {"email_notifications", &s.EmailNotifications}} {
		on, ok := parseFlag(f.Get(t.key))
		*t.v = on
		bad = bad || !ok
	}
	for k, v := range adminCheckSettings(s) {
		if errs[k] == "" {
			errs[k] = v
		}
	}
	if bad && len(errs) == 0 {
		errs["site_name"] = "The form was not understood; please try again."
	}
	if len(errs) > 0 {
		fm := adminSettingsForm{SiteName: clip(f.Get("site_name"), 200), Timeout: clip(f.Get("session_timeout_minutes"), 20),
			Upload: clip(f.Get("max_upload_mb"), 20), Toggles: adminToggles(s), Errs: errs}
		fm.Focus = firstErr(errs, "site_name", "session_timeout_minutes", "max_upload_mb")
		return a.show(r, http.StatusUnprocessableEntity, "settings", "Settings", "settings", []crumb{adminHome, {"Settings", ""}}, fm)
	}
	old := a.settings
	fields := map[string]string{}
	if s.SiteName != old.SiteName {
		fields["site_name"] = s.SiteName
	}
	if s.SessionTimeoutMinutes != old.SessionTimeoutMinutes {
		fields["session_timeout_minutes"] = strconv.Itoa(s.SessionTimeoutMinutes)
	}
	if s.MaxUploadMB != old.MaxUploadMB {
		fields["max_upload_mb"] = strconv.Itoa(s.MaxUploadMB)
	}
	for _, t := range []struct {
		key      string
		old, new bool
	}{{"two_factor_required", old.TwoFactorRequired, s.TwoFactorRequired}, {"allow_signups", old.AllowSignups, s.AllowSignups},
		{"maintenance_mode", old.MaintenanceMode, s.MaintenanceMode}, {"email_notifications", old.EmailNotifications, s.EmailNotifications}} {
		if t.old != t.new {
			fields[t.key] = strconv.FormatBool(t.new)
		}
	}
	if len(fields) == 0 {
		return redirect("/settings?flash=nochange")
	}
	a.add("update_settings", fields)
	a.settings = s
	return redirect("/settings?flash=settings")
}

// --- keys ---

// adminSecret is key k's secret: derived from its id and label, so every
// run shows the same.
func adminSecret(k *adminKey) string {
	h := sha256.Sum256([]byte("acme-admin-key\x00" + k.ID + "\x00" + k.Label + "\x00" + k.Created))
	return "ak_live_" + hex.EncodeToString(h[:])[:32]
}

type adminKeyRow struct {
	*adminKey
	Prefix string
}

func (a *adminApp) keysView(r *http.Request, status int, label, errMsg string) answer {
	var rows []adminKeyRow
	active := 0
	for i := len(a.keys) - 1; i >= 0; i-- {
		k := a.keys[i]
		rows = append(rows, adminKeyRow{k, adminSecret(k)[:12] + "…"})
		if !k.Revoked {
			active++
		}
	}
	var fresh map[string]string
	if k := a.key(r.URL.Query().Get("new")); k != nil && !k.Revoked && status == http.StatusOK {
		fresh = map[string]string{"Label": k.Label, "Secret": adminSecret(k)}
	}
	return a.show(r, status, "keys", "API keys", "keys", []crumb{adminHome, {"API keys", ""}}, map[string]any{
		"Rows": rows, "Active": active, "Label": label, "Err": errMsg, "New": fresh, "Max": adminMaxKeys})
}

func (a *adminApp) keysPage(r *http.Request) answer {
	return a.keysView(r, http.StatusOK, clip(r.URL.Query().Get("label"), 100), "")
}

func (a *adminApp) createKey(r *http.Request, f url.Values) answer {
	label := strings.Join(strings.Fields(f.Get("label")), " ")
	msg := ""
	switch {
	case label == "":
		msg = "Give the key a name, so you can tell it apart later."
	case !adminLabelOK(label):
		msg = "A key name has at most 64 letters, digits, spaces and - _ . : ( ) /."
	case len(a.keys) >= adminMaxKeys:
		msg = fmt.Sprintf("This organisation has reached its limit of %d API keys.", adminMaxKeys)
	default:
		for _, k := range a.keys {
			if !k.Revoked && strings.EqualFold(k.Label, label) {
				msg = "An active key already has this name."
			}
		}
	}
	if msg != "" {
		return a.keysView(r, http.StatusUnprocessableEntity, clip(f.Get("label"), 200), msg)
	}
	k := &adminKey{ID: a.nextKeyID(), Label: label, Created: todayDate}
	a.add("create_key", map[string]string{"id": k.ID, "label": label})
	a.keys = append(a.keys, k)
	return redirect("/keys?flash=created&new=" + url.QueryEscape(k.ID))
}

func (a *adminApp) revokeForm(r *http.Request) answer {
	k := a.key(r.PathValue("id"))
	if k == nil {
		return a.fail(http.StatusNotFound, "There is no such API key.")
	}
	return a.show(r, http.StatusOK, "revoke", "Revoke key", "keys", []crumb{adminHome, {"API keys", "/keys"}, {"Revoke", ""}},
		map[string]any{"K": k, "Prefix": adminSecret(k)[:12] + "…", "Err": ""})
}

func (a *adminApp) revoke(r *http.Request, f url.Values) answer {
	k := a.key(r.PathValue("id"))
	if k == nil {
		return a.fail(http.StatusNotFound, "There is no such API key.")
	}
	msg := ""
	if k.Revoked {
		msg = "This key has already been revoked."
	} else if f.Get("confirm") != "yes" {
		msg = "Confirm that you want to revoke this key."
	}
	if msg != "" {
		return a.show(r, http.StatusUnprocessableEntity, "revoke", "Revoke key", "keys", []crumb{adminHome, {"API keys", "/keys"}, {"Revoke", ""}},
			map[string]any{"K": k, "Prefix": adminSecret(k)[:12] + "…", "Err": msg})
	}
	a.add("revoke_key", map[string]string{"id": k.ID, "label": k.Label})
	k.Revoked, k.RevokedOn = true, todayDate
	return redirect("/keys?flash=revoked")
}

// adminLabelOK reports whether a new key's label is made of the
// characters key names allow.
func adminLabelOK(s string) bool {
	if !lineOK(s, 64) {
		return false
	}
	for _, c := range s {
		if !(unicode.IsLetter(c) || unicode.IsDigit(c) || strings.ContainsRune(" -_.:()/", c)) {
			return false
		}
	}
	return true
}

// --- audit ---

type adminAuditRow struct {
	adminAudit
	Detail string
	UserID int
	Today  bool
}

// auditRows is the audit log, newest first: the agent's changes, then
// the data's history.
func (a *adminApp) auditRows() []adminAuditRow {
	var out []adminAuditRow
	for i := len(a.Log) - 1; i >= 0; i-- {
		e := a.Log[i]
		row := adminAuditRow{adminAudit: adminAudit{Date: todayDate, Actor: a.me}, Today: true}
		f := e.Fields
		switch e.Action {
		case "invite_user":
			row.Action, row.Target, row.Detail = "Invited user", f["email"], "role: "+f["role"]
			row.UserID, _ = strconv.Atoi(f["id"])
		case "update_user":
			row.Action, row.Target = "Updated user", f["email"]
			row.UserID, _ = strconv.Atoi(f["id"])
			var parts []string
			for _, k := range []string{"name", "role", "status"} {
				if v, ok := f[k]; ok {
					parts = append(parts, k+" → "+v)
				}
			}
			row.Detail = strings.Join(parts, ", ")
		case "update_settings":
			row.Action, row.Target = "Changed settings", "Organisation"
			keys := make([]string, 0, len(f))
			for k := range f {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, k+" → "+f[k])
			}
			row.Detail = strings.Join(parts, ", ")
		case "create_key":
			row.Action, row.Target = "Created API key", f["label"]
		case "revoke_key":
			row.Action, row.Target = "Revoked API key", f["label"]
		default:
			row.Action = e.Action
		}
		out = append(out, row)
	}
	for _, e := range a.audit {
		out = append(out, adminAuditRow{adminAudit: e})
	}
	return out
}

func (a *adminApp) auditPage(r *http.Request) answer {
	rows := a.auditRows()
	total := len(rows)
	if len(rows) > 500 {
		rows = rows[:500]
	}
	return a.show(r, http.StatusOK, "audit", "Audit log", "audit", []crumb{adminHome, {"Audit log", ""}}, map[string]any{"Rows": rows, "Total": total})
}
