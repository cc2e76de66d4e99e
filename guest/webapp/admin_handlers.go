// The admin console's page views and HTTP handlers: the dashboard, user
// list and profiles, inviting and editing users, settings, API keys and
// the audit log.

package webapp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

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
