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
	"embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
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
