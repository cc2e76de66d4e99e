package webapp

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

type adminTestState struct {
	Users    []adminUser   `json:"users"`
	Settings adminSettings `json:"settings"`
	Keys     []adminKey    `json:"keys"`
	Log      []Event       `json:"log"`
}

func adminTestGet(t *testing.T, a App) *adminTestState {
	t.Helper()
	var s adminTestState
	appState(t, a, &s)
	return &s
}

func (s *adminTestState) user(id int) *adminUser {
	for i := range s.Users {
		if s.Users[i].ID == id {
			return &s.Users[i]
		}
	}
	return nil
}

func TestAdminPagesRender(t *testing.T) {
	a, _ := loadApp(t, "admin")
	for _, p := range []string{"/", "/users", "/users?role=editor&status=active&q=sam&sort=last_login&dir=desc", "/users/2",
		"/users/new", "/users/2/edit", "/settings", "/keys", "/keys/key_1/revoke", "/keys/key_2/revoke", "/audit"} {
		body := wacGet(t, a, p, http.StatusOK)
		if !strings.Contains(body, "Acme Admin") || !strings.Contains(body, "Acme Corp") {
			t.Errorf("%s: no header", p)
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("%s: refers to an external resource", p)
		}
	}
	for _, p := range []string{"/users/99", "/users/x/edit", "/users/99/edit", "/keys/nope/revoke", "/nope"} {
		wacGet(t, a, p, http.StatusNotFound)
	}
	focus := map[string]string{
		"/users/new?name=Ann+Ray&email=ann%40acme.example&role=editor": `name="name" value="Ann Ray" autocomplete="off" autofocus`,
		"/users/2/edit?status=suspended":                               `name="name" value="Sam Lee" autocomplete="off" autofocus`,
		"/settings?maintenance_mode=on":                                `name="site_name" value="Acme Corp" autofocus`,
		"/keys?label=Backup":                                           `name="label" value="Backup" placeholder="e.g. CI deploy" autocomplete="off" autofocus`,
		"/keys/key_1/revoke":                                           `type="submit" autofocus>Revoke key`,
	}
	for p, want := range focus {
		if body := wacGet(t, a, p, http.StatusOK); !strings.Contains(body, want) || strings.Count(body, "autofocus") != 1 {
			t.Errorf("%s: want one autofocus, on %s", p, want)
		}
	}
	// Prefills.
	if body := wacGet(t, a, "/users/new?role=EDITOR&email=ann%40acme.example", http.StatusOK); !strings.Contains(body, `<option value="editor" selected>`) ||
		!strings.Contains(body, `value="ann@acme.example"`) {
		t.Error("invite prefill")
	}
	if body := wacGet(t, a, "/users/new", http.StatusOK); !strings.Contains(body, `<option value="viewer" selected>`) {
		t.Error("invite's default role is not viewer")
	}
	if body := wacGet(t, a, "/users/2/edit?status=suspended&role=admin", http.StatusOK); !strings.Contains(body, `<option value="suspended" selected>`) ||
		!strings.Contains(body, `<option value="admin" selected>`) || strings.Contains(body, `<option value="invited"`) {
		t.Error("edit prefill")
	}
	if body := wacGet(t, a, "/settings?maintenance_mode=1&allow_signups=off&session_timeout_minutes=30", http.StatusOK); !strings.Contains(body, `name="maintenance_mode" value="on" checked>`) ||
		!strings.Contains(body, `name="allow_signups" value="on">`) || !strings.Contains(body, `value="30"`) {
		t.Error("settings prefill")
	}
	// Filters and sorting.
	body := wacGet(t, a, "/users?role=editor", http.StatusOK)
	if !strings.Contains(body, "Sam Lee") || !strings.Contains(body, "Omar Haddad") || strings.Contains(body, "Priya") {
		t.Error("role filter")
	}
	body = wacGet(t, a, "/users?status=suspended", http.StatusOK)
	if !strings.Contains(body, "Omar Haddad") || strings.Contains(body, "Sam Lee") {
		t.Error("status filter")
	}
	body = wacGet(t, a, "/users?q=ACME.EXAMPLE&sort=last_login&dir=desc", http.StatusOK)
	if i, j := strings.Index(body, "Jordan Blake</strong>"), strings.Index(body, "Omar Haddad</strong>"); i < 0 || j < 0 || i > j {
		t.Error("sort by last login, newest first")
	}
	body = wacGet(t, a, "/users?sort=name", http.StatusOK)
	if i, j := strings.Index(body, "Chen Wei</strong>"), strings.Index(body, "Sam Lee</strong>"); i < 0 || j < 0 || i > j {
		t.Error("sort by name")
	}
	if !strings.Contains(wacGet(t, a, "/users/5", http.StatusOK), "Never") {
		t.Error("an invited user's last login is not Never")
	}
}

func TestAdminInvite(t *testing.T) {
	a, data := loadApp(t, "admin")
	before := appState(t, a, nil)
	for _, f := range []url.Values{
		{"name": {"Ann Ray"}, "email": {"SAM.LEE@acme.example"}, "role": {"viewer"}},
		{"name": {"Ann Ray"}, "email": {"not-an-email"}, "role": {"viewer"}},
		{"name": {""}, "email": {"ann@acme.example"}, "role": {"viewer"}},
		{"name": {"Ann Ray"}, "email": {"ann@acme.example"}, "role": {"root"}},
		{"name": {"Ann\x00Ray"}, "email": {"ann@acme.example"}, "role": {"viewer"}},
	} {
		if w := wacPost(t, a, "/users/new", f, http.StatusUnprocessableEntity); !strings.Contains(w.Body.String(), `class="err"`) {
			t.Errorf("%v: no inline error", f)
		}
	}
	wacSame(t, a, before, "refused invites")
	w := wacPost(t, a, "/users/new", url.Values{"name": {"  Ann   Ray "}, "email": {"ann@acme.example"}, "role": {"Editor"}}, http.StatusSeeOther)
	if loc := w.Header().Get("Location"); loc != "/users?flash=invited" {
		t.Errorf("redirect %q", loc)
	}
	s := adminTestGet(t, a)
	u := s.user(8)
	if u == nil || u.Name != "Ann Ray" || u.Email != "ann@acme.example" || u.Role != "editor" || u.Status != "invited" || u.LastLogin != "" {
		t.Fatalf("invited %+v", u)
	}
	if e := wacLastLog(t, a); e.Action != "invite_user" || e.Fields["id"] != "8" || e.Fields["role"] != "editor" || e.Fields["email"] != "ann@acme.example" {
		t.Errorf("log %+v", e)
	}
	if body := wacGet(t, a, "/users?flash=invited", http.StatusOK); !strings.Contains(body, "Invitation sent.") || !strings.Contains(body, "Ann Ray") {
		t.Error("users page after invite")
	}
	if body := wacGet(t, a, "/audit", http.StatusOK); !strings.Contains(body, "Invited user") || !strings.Contains(body, "ann@acme.example") {
		t.Error("audit log lacks the invite")
	}
	roundTrip(t, "admin", data, a)
}

func TestAdminEditUser(t *testing.T) {
	a, data := loadApp(t, "admin")
	before := appState(t, a, nil)
	good := url.Values{"name": {"Sam Lee"}, "email": {"sam.lee@acme.example"}, "role": {"editor"}, "status": {"active"}}
	with := func(k, v string) url.Values {
		f := url.Values{}
		for kk, vv := range good {
			f[kk] = vv
		}
		f.Set(k, v)
		return f
	}
	for _, f := range []url.Values{with("status", "invited"), with("status", "deleted"), with("role", "owner"),
		with("email", "priya@acme.example"), with("email", "x@"), with("name", "")} {
		wacPost(t, a, "/users/2/edit", f, http.StatusUnprocessableEntity)
	}
	wacPost(t, a, "/users/99/edit", good, http.StatusNotFound)
	wacPost(t, a, "/users/abc/edit", good, http.StatusNotFound)
	// No change: no log.
	if w := wacPost(t, a, "/users/2/edit", good, http.StatusSeeOther); w.Header().Get("Location") != "/users/2?flash=nochange" {
		t.Errorf("no-op redirect %q", w.Header().Get("Location"))
	}
	wacSame(t, a, before, "refused or empty edits")

	wacPost(t, a, "/users/2/edit", with("status", "suspended"), http.StatusSeeOther)
	if e := wacLastLog(t, a); e.Action != "update_user" || e.Fields["id"] != "2" || e.Fields["status"] != "suspended" || e.Fields["role"] != "" {
		t.Errorf("log %+v", e)
	}
	s := adminTestGet(t, a)
	if u := s.user(2); u.Status != "suspended" || u.Role != "editor" {
		t.Errorf("user 2 %+v", u)
	}
	f := with("role", "admin")
	f.Set("email", "sam@acme.example")
	wacPost(t, a, "/users/2/edit", f, http.StatusSeeOther)
	s = adminTestGet(t, a)
	if u := s.user(2); u.Status != "active" || u.Role != "admin" || u.Email != "sam@acme.example" {
		t.Errorf("user 2 %+v", u)
	}
	// An invited user may stay invited, or be activated.
	wacPost(t, a, "/users/5/edit", url.Values{"name": {"Lena Fischer"}, "email": {"lena@acme.example"}, "role": {"editor"}, "status": {"invited"}}, http.StatusSeeOther)
	if u := adminTestGet(t, a).user(5); u.Status != "invited" || u.Role != "editor" {
		t.Errorf("user 5 %+v", u)
	}
	if body := wacGet(t, a, "/users/2?flash=saved", http.StatusOK); !strings.Contains(body, "User updated.") || !strings.Contains(body, "Updated user") {
		t.Error("profile after edit")
	}
	roundTrip(t, "admin", data, a)
}

func TestAdminSettings(t *testing.T) {
	a, data := loadApp(t, "admin")
	before := appState(t, a, nil)
	good := url.Values{"site_name": {"Acme Corp"}, "session_timeout_minutes": {"60"}, "max_upload_mb": {"25"},
		"allow_signups": {"on"}, "email_notifications": {"on"}}
	with := func(k, v string) url.Values {
		f := url.Values{}
		for kk, vv := range good {
			f[kk] = vv
		}
		f.Set(k, v)
		return f
	}
	for _, f := range []url.Values{with("session_timeout_minutes", "4"), with("session_timeout_minutes", "1441"),
		with("session_timeout_minutes", "ten"), with("max_upload_mb", "0"), with("max_upload_mb", "99999999999999999999"),
		with("site_name", ""), with("site_name", strings.Repeat("n", 61)), with("maintenance_mode", "maybe")} {
		if w := wacPost(t, a, "/settings", f, http.StatusUnprocessableEntity); !strings.Contains(w.Body.String(), `class="err"`) {
			t.Errorf("%v: no inline error", f)
		}
	}
	if w := wacPost(t, a, "/settings", good, http.StatusSeeOther); w.Header().Get("Location") != "/settings?flash=nochange" {
		t.Error("no-op save")
	}
	wacSame(t, a, before, "refused settings")

	f := with("maintenance_mode", "on")
	f.Set("session_timeout_minutes", " 30 ")
	f.Del("allow_signups")
	wacPost(t, a, "/settings", f, http.StatusSeeOther)
	s := adminTestGet(t, a)
	if st := s.Settings; !st.MaintenanceMode || st.AllowSignups || st.SessionTimeoutMinutes != 30 || !st.EmailNotifications || st.MaxUploadMB != 25 {
		t.Errorf("settings %+v", st)
	}
	e := wacLastLog(t, a)
	if e.Action != "update_settings" || len(e.Fields) != 3 || e.Fields["maintenance_mode"] != "true" || e.Fields["allow_signups"] != "false" || e.Fields["session_timeout_minutes"] != "30" {
		t.Errorf("log %+v", e)
	}
	if body := wacGet(t, a, "/settings?flash=settings", http.StatusOK); !strings.Contains(body, "Settings saved.") || !strings.Contains(body, "Maintenance mode is on") {
		t.Error("settings page after save")
	}
	roundTrip(t, "admin", data, a)
}

func TestAdminKeys(t *testing.T) {
	a, data := loadApp(t, "admin")
	before := appState(t, a, nil)
	for _, l := range []string{"", "  ", "ci DEPLOY", strings.Repeat("k", 65), "bad\x01", "<script>"} {
		wacPost(t, a, "/keys", url.Values{"label": {l}}, http.StatusUnprocessableEntity)
	}
	wacPost(t, a, "/keys/key_1/revoke", url.Values{}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/keys/key_2/revoke", url.Values{"confirm": {"yes"}}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/keys/key_9/revoke", url.Values{"confirm": {"yes"}}, http.StatusNotFound)
	wacSame(t, a, before, "refused key changes")

	w := wacPost(t, a, "/keys", url.Values{"label": {"Billing export"}}, http.StatusSeeOther)
	if loc := w.Header().Get("Location"); loc != "/keys?flash=created&new=key_4" {
		t.Errorf("redirect %q", loc)
	}
	if e := wacLastLog(t, a); e.Action != "create_key" || e.Fields["id"] != "key_4" || e.Fields["label"] != "Billing export" {
		t.Errorf("log %+v", e)
	}
	if body := wacGet(t, a, "/keys?flash=created&new=key_4", http.StatusOK); !strings.Contains(body, "ak_live_") || !strings.Contains(body, "Copy your new key") {
		t.Error("new key's secret not shown")
	}
	wacPost(t, a, "/keys/key_1/revoke", url.Values{"confirm": {"yes"}}, http.StatusSeeOther)
	if e := wacLastLog(t, a); e.Action != "revoke_key" || e.Fields["id"] != "key_1" {
		t.Errorf("log %+v", e)
	}
	s := adminTestGet(t, a)
	if len(s.Keys) != 4 || !s.Keys[0].Revoked || s.Keys[0].RevokedOn != "2026-03-02" || s.Keys[3].Revoked || s.Keys[3].Created != "2026-03-02" {
		t.Errorf("keys %+v", s.Keys)
	}
	// A revoked key's label may be used again.
	wacPost(t, a, "/keys", url.Values{"label": {"CI deploy"}}, http.StatusSeeOther)
	roundTrip(t, "admin", data, a)
	// At most 100 keys.
	for i := len(adminTestGet(t, a).Keys); i < adminMaxKeys; i++ {
		wacPost(t, a, "/keys", url.Values{"label": {fmt.Sprint("k", i)}}, http.StatusSeeOther)
	}
	before = appState(t, a, nil)
	wacPost(t, a, "/keys", url.Values{"label": {"one too many"}}, http.StatusUnprocessableEntity)
	wacSame(t, a, before, "a key over the limit")
}

func TestAdminData(t *testing.T) {
	for _, bad := range []string{
		`{"users":[{"id":1,"name":"A","email":"a@x.io"},{"id":1,"name":"B","email":"b@x.io"}]}`,
		`{"users":[{"id":1,"name":"A","email":"a@x.io"},{"id":2,"name":"B","email":"A@X.io"}]}`,
		`{"users":[{"name":"A","email":"nope"}]}`,
		`{"users":[{"name":"A","email":"a@x.io","status":"gone"}]}`,
		`{"roles":["a","b"],"users":[{"name":"A","email":"a@x.io","role":"c"}]}`,
		`{"roles":["a","A"]}`,
		`{"users":[{"id":-1,"name":"A","email":"a@x.io"}]}`,
		`{"users":[{"id":"x1","name":"A","email":"a@x.io"}]}`,
		`{"settings":{"session_timeout_minutes":2}}`,
		`{"settings":{"max_upload_mb":0}}`,
		`{"keys":[{"id":"k","label":"a"},{"id":"k","label":"b"}]}`,
		`{"keys":[{"id":"a b","label":"a"}]}`,
		`{"keys":[{"label":""}]}`,
		`{"users":[{"name":"A","email":"a@x.io","last_login":"last week"}]}`,
	} {
		if _, err := New("admin", []byte(bad), nil); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	// Lenient: ids as strings or absent, roles from the users, defaults.
	a, err := New("admin", []byte(`{"users":[{"id":"3","name":"A","email":"a@x.io","role":"Owner"},{"name":"B","email":"b@x.io","role":"member","status":"Suspended"}],"keys":[{"id":7,"label":"x"}]}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := adminTestGet(t, a)
	if len(s.Users) != 2 || s.Users[0].ID != 3 || s.Users[1].ID != 4 || s.Users[1].Status != "suspended" || s.Settings.SessionTimeoutMinutes != 60 || s.Keys[0].ID != "7" {
		t.Errorf("lenient data: %+v", s)
	}
	if body := wacGet(t, a, "/users/new", http.StatusOK); !strings.Contains(body, `<option value="member" selected>`) {
		t.Error("default role is not member")
	}
	wacPost(t, a, "/users/new", url.Values{"name": {"C"}, "email": {"c@x.io"}}, http.StatusUnprocessableEntity)
	wacPost(t, a, "/users/new", url.Values{"name": {"C"}, "email": {"c@x.io"}, "role": {"member"}}, http.StatusSeeOther)
	if u := adminTestGet(t, a).user(5); u == nil || u.Role != "member" {
		t.Errorf("default role: %+v", u)
	}
	if _, err := New("admin", nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{`, `{"users":[null]}`, `{"users":[{"id":1,"name":"A","email":"a@x.io","role":"ghost","status":"active"}]}`,
		`{"settings":{"site_name":"","session_timeout_minutes":60,"max_upload_mb":1}}`} {
		if _, err := New("admin", nil, []byte(bad)); err == nil {
			t.Errorf("saved %s: no error", bad)
		}
	}
}

func TestAdminHostile(t *testing.T) {
	a, _ := loadApp(t, "admin")
	posts := []string{"/users/new", "/users/2/edit", "/users/99/edit", "/users/-1/edit", "/users/2", "/users", "/settings",
		"/keys", "/keys/key_1/revoke", "/keys/key_2/revoke", "/keys/nope/revoke", "/audit", "/", "/nope"}
	gets := []string{"/", "/users", "/users/2", "/users/new", "/users/2/edit", "/users/0/edit", "/settings", "/keys",
		"/keys/key_1/revoke", "/audit", "/users/%ff/edit", "/keys/%00/revoke"}
	wacHostile(t, a, posts, gets)
}

func TestAdminConcurrent(t *testing.T) {
	a, data := loadApp(t, "admin")
	wacConcurrent(t, a, []string{"/", "/users", "/users/2/edit", "/settings", "/keys", "/audit"}, func(i int) {
		wacDo(a, http.MethodPost, "/users/new", url.Values{"name": {"U"}, "email": {fmt.Sprintf("u%d@x.io", i)}, "role": {"viewer"}}.Encode())
		wacDo(a, http.MethodPost, "/settings", url.Values{"site_name": {"S"}, "session_timeout_minutes": {fmt.Sprint(5 + i)}, "max_upload_mb": {"3"}}.Encode())
	})
	if s := adminTestGet(t, a); len(s.Users) != 6+80 {
		t.Errorf("%d users", len(s.Users))
	}
	roundTrip(t, "admin", data, a)
}
