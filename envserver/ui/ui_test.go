package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/render"
	"github.com/shinken-rl/shinken/trajectory"
)

// fakeSource is a small in-memory server state for the handler tests; the
// browser tests in envserver run the UI over a real server.
type fakeSource struct {
	eps    map[string]*trajectory.Trajectory
	frames map[string][]byte
	reads  int
}

func (f *fakeSource) Envs() []Env {
	return []Env{{ID: "env-1", State: "running", Task: "t1", Frame: "00112233445566778899aabbccddeeff"}}
}
func (f *fakeSource) Pool() PoolView {
	return PoolView{Provider: "fake", ScreenW: 40, ScreenH: 25}
}
func (f *fakeSource) Counters() Counters { return Counters{Warm: 2} }
func (f *fakeSource) Tasks() []Task {
	return []Task{{ID: "t1", Instruction: "do one", MaxSteps: 5}, {ID: "t2", Instruction: "do two", MaxSteps: 3}}
}
func (f *fakeSource) EpisodeIDs() []string {
	var ids []string
	for id := range f.eps {
		ids = append(ids, id)
	}
	return ids
}
func (f *fakeSource) Episode(id string) (*trajectory.Trajectory, error) {
	f.reads++
	if t := f.eps[id]; t != nil {
		c := *t
		return &c, nil
	}
	return nil, fmt.Errorf("%w: episode %s", ErrNotFound, id)
}
func (f *fakeSource) Frame(hash string) ([]byte, string, error) {
	if b, ok := f.frames[hash]; ok {
		return b, "png", nil
	}
	return nil, "", ErrNotFound
}

func newFake(t *testing.T, n int) *fakeSource {
	t.Helper()
	f := &fakeSource{eps: map[string]*trajectory.Trajectory{}, frames: map[string][]byte{}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 3; i++ {
		img := image.NewRGBA(image.Rect(0, 0, 40, 25))
		for p := range img.Pix {
			img.Pix[p] = uint8(i * 80)
		}
		var buf bytes.Buffer
		png.Encode(&buf, img)
		f.frames[fmt.Sprintf("%032x", i)] = buf.Bytes()
	}
	for i := 0; i < n; i++ {
		end := t0.Add(time.Duration(i)*time.Minute + time.Second)
		tr := &trajectory.Trajectory{EpisodeID: fmt.Sprintf("ep-%03d", i), Task: []string{"t1", "t2"}[i%2],
			StartedAt: t0.Add(time.Duration(i) * time.Minute), EndedAt: &end, InitFrame: fmt.Sprintf("%032x", 0)}
		steps := 1 + i%3
		for k := 0; k < steps; k++ {
			tr.Steps = append(tr.Steps, trajectory.Step{Index: k, ObsFrame: fmt.Sprintf("%032x", (k+1)%3),
				Actions: []aci.Action{{Verb: aci.Click, Target: aci.Px(10, 10)}, {Verb: aci.Drag, Target: aci.Px(5, 5), To: aci.Px(30, 20)}}})
		}
		if i%2 == 0 {
			tr.Reward, tr.ExitReason = 1, trajectory.TaskComplete
		} else {
			tr.ExitReason = trajectory.MaxSteps
		}
		f.eps[tr.EpisodeID] = tr
	}
	return f
}

func get(t *testing.T, h http.Handler, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestAuth(t *testing.T) {
	u := New(newFake(t, 1), Options{Token: "s3cret"})
	for _, p := range []string{"/ui/", "/ui/api/pool", "/ui/static/app.js", "/ui/frames/00000000000000000000000000000000"} {
		if w := get(t, u, p, nil); w.Code != http.StatusUnauthorized {
			t.Errorf("GET %s without token: got %d; want 401", p, w.Code)
		}
		if w := get(t, u, p, map[string]string{"Authorization": "Bearer wrong"}); w.Code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: got %d; want 401", p, w.Code)
		}
		if w := get(t, u, p, map[string]string{"Authorization": "Bearer s3cret"}); w.Code != http.StatusOK {
			t.Errorf("GET %s with the token: got %d; want 200", p, w.Code)
		}
	}
	// A login by ?token= sets a cookie that is not the token and redirects
	// to a URL without it.
	w := get(t, u, "/ui/login?token=s3cret", nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/ui/" {
		t.Fatalf("login: got %d Location %q; want 303 to /ui/", w.Code, w.Header().Get("Location"))
	}
	setCookie := w.Header().Get("Set-Cookie")
	if strings.Contains(setCookie, "s3cret") || !strings.Contains(setCookie, "HttpOnly") || !strings.Contains(setCookie, "SameSite=Strict") {
		t.Fatalf("login cookie %q: want HttpOnly, SameSite=Strict and no token", setCookie)
	}
	cookie := strings.Split(setCookie, ";")[0]
	if w := get(t, u, "/ui/api/pool", map[string]string{"Cookie": cookie}); w.Code != http.StatusOK {
		t.Errorf("GET with the session cookie: got %d; want 200", w.Code)
	}
	if w := get(t, u, "/ui/api/pool", map[string]string{"Cookie": CookieName + "=forged"}); w.Code != http.StatusUnauthorized {
		t.Errorf("GET with a forged cookie: got %d; want 401", w.Code)
	}
	if w := get(t, u, "/ui/login?token=nope", nil); w.Code != http.StatusUnauthorized || w.Header().Get("Set-Cookie") != "" {
		t.Errorf("login with a wrong token: got %d cookie %q; want 401 and none", w.Code, w.Header().Get("Set-Cookie"))
	}
	// A POSTed form works as well and keeps the token out of the URL.
	r := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {"s3cret"}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w = httptest.NewRecorder()
	u.ServeHTTP(w, r)
	if w.Code != http.StatusSeeOther || w.Header().Get("Set-Cookie") == "" {
		t.Errorf("POST login: got %d cookie %q; want 303 and a cookie", w.Code, w.Header().Get("Set-Cookie"))
	}
}

func TestNoTokenServesAll(t *testing.T) {
	u := New(newFake(t, 1), Options{})
	if w := get(t, u, "/ui/api/tasks", nil); w.Code != http.StatusOK {
		t.Fatalf("no token: got %d; want 200", w.Code)
	}
}

func TestETag(t *testing.T) {
	u := New(newFake(t, 1), Options{})
	w := get(t, u, "/ui/api/pool", nil)
	etag := w.Header().Get("ETag")
	if w.Code != http.StatusOK || etag == "" {
		t.Fatalf("pool: got %d etag %q", w.Code, etag)
	}
	if w := get(t, u, "/ui/api/pool", map[string]string{"If-None-Match": etag}); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
		t.Fatalf("pool with its etag: got %d and %d bytes; want 304 and none", w.Code, w.Body.Len())
	}
}

func TestEpisodeListFilterAndPages(t *testing.T) {
	f := newFake(t, 25)
	u := New(f, Options{})
	list := func(q string) EpisodePage {
		t.Helper()
		w := get(t, u, "/ui/api/episodes?"+q, nil)
		if w.Code != http.StatusOK {
			t.Fatalf("episodes?%s: got %d %s", q, w.Code, w.Body)
		}
		var p EpisodePage
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	p := list("limit=10")
	if p.Total != 25 || len(p.Items) != 10 || p.Items[0].ID != "ep-024" || p.Items[9].ID != "ep-015" {
		t.Fatalf("page 1: total %d, %d items, first %s; want 25, 10, newest ep-024 first", p.Total, len(p.Items), p.Items[0].ID)
	}
	if p = list("limit=10&offset=20"); len(p.Items) != 5 || p.Items[4].ID != "ep-000" {
		t.Fatalf("last page: %d items; want 5 ending at ep-000", len(p.Items))
	}
	if p = list("task=t2"); p.Total != 12 {
		t.Errorf("task=t2: got %d; want 12", p.Total)
	}
	if p = list("exit=task_complete&min_reward=0.5"); p.Total != 13 {
		t.Errorf("passed: got %d; want 13", p.Total)
	}
	if p = list("max_reward=0"); p.Total != 12 {
		t.Errorf("max_reward=0: got %d; want 12", p.Total)
	}
	since := time.Date(2026, 1, 1, 0, 20, 0, 0, time.UTC).Format(time.RFC3339)
	if p = list("since=" + since); p.Total != 5 {
		t.Errorf("since %s: got %d; want 5", since, p.Total)
	}
	if w := get(t, u, "/ui/api/episodes?min_reward=x", nil); w.Code != http.StatusBadRequest {
		t.Errorf("bad filter: got %d; want 400", w.Code)
	}
	// Finished episodes are read once, not at every refresh.
	reads := f.reads
	u.index.at = time.Time{}
	list("")
	if f.reads != reads {
		t.Errorf("a refresh re-read %d finished episodes; want 0", f.reads-reads)
	}
}

func TestTaskStats(t *testing.T) {
	u := New(newFake(t, 10), Options{})
	w := get(t, u, "/ui/api/tasks", nil)
	var r struct{ Tasks []TaskStats }
	if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Tasks) != 2 || r.Tasks[0].Episodes != 5 || r.Tasks[0].PassRate != 1 || r.Tasks[1].PassRate != 0 {
		t.Fatalf("tasks: got %+v; want t1 5 episodes all passed, t2 none passed", r.Tasks)
	}
}

func TestSeriesBounded(t *testing.T) {
	s := newSeries(4)
	t0 := time.Unix(100, 0)
	for i := 0; i < 10; i++ {
		s.add(t0.Add(time.Duration(i)*time.Second), Counters{Steps: uint64(i * 5), Leased: i})
	}
	r := s.since(0)
	if len(r.Samples) != 4 || r.Seq != 10 || r.Samples[0].Seq != 7 || r.Samples[3].StepsPS != 5 {
		t.Fatalf("since(0): got %+v; want the last 4 samples at 5 steps/s", r)
	}
	if r = s.since(9); len(r.Samples) != 1 || r.Samples[0].Leased != 9 {
		t.Fatalf("since(9): got %+v; want only sample 10", r)
	}
}

func TestFrameAndGIF(t *testing.T) {
	f := newFake(t, 3)
	u := New(f, Options{})
	w := get(t, u, "/ui/frames/"+fmt.Sprintf("%032x", 1), nil)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "image/png" || !strings.Contains(w.Header().Get("Cache-Control"), "immutable") {
		t.Fatalf("frame: got %d %q %q", w.Code, w.Header().Get("Content-Type"), w.Header().Get("Cache-Control"))
	}
	w = get(t, u, "/ui/frames/"+fmt.Sprintf("%032x", 1)+"?w=20", nil)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "image/jpeg" {
		t.Fatalf("thumbnail: got %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	if img, err := jpeg.Decode(bytes.NewReader(w.Body.Bytes())); err != nil || img.Bounds().Dx() != 20 || img.Bounds().Dy() != 12 {
		t.Fatalf("thumbnail of a 40x25 frame at w=20: got %v (%v); want 20x12", img.Bounds(), err)
	}
	if w := get(t, u, "/ui/frames/"+fmt.Sprintf("%032x", 1)+"?w=5000", nil); w.Code != http.StatusBadRequest {
		t.Fatalf("thumbnail too wide: got %d; want 400", w.Code)
	}
	if w := get(t, u, "/ui/frames/../../etc", nil); w.Code == http.StatusOK {
		t.Fatalf("bad hash: got 200")
	}
	if w := get(t, u, "/ui/frames/"+strings.Repeat("e", 32), nil); w.Code != http.StatusNotFound {
		t.Fatalf("unknown frame: got %d; want 404", w.Code)
	}
	w = get(t, u, "/ui/api/episodes/ep-002/replay.gif", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("gif: got %d %s", w.Code, w.Body)
	}
	g, err := gif.DecodeAll(bytes.NewReader(w.Body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	// ep-002 has 3 steps: 3 positions with actions plus the final screen.
	if len(g.Image) != 4 {
		t.Fatalf("gif frames: got %d; want 4", len(g.Image))
	}
	// The click at (10,10) is ringed in red on the first frame.
	red := 0
	for _, ix := range g.Image[0].Pix {
		if g.Image[0].Palette[ix] == (color.RGBA{255, 0, 0, 255}) {
			red++
		}
	}
	if red == 0 {
		t.Errorf("first gif frame has no action marks")
	}
	if w := get(t, u, "/ui/api/episodes/nope/replay.gif", nil); w.Code != http.StatusNotFound {
		t.Errorf("unknown episode gif: got %d; want 404", w.Code)
	}
}

func TestRawDims(t *testing.T) {
	for _, c := range []struct{ w, h, sw, sh int }{{1280, 800, 1280, 800}, {640, 400, 1280, 800}, {1024, 640, 1280, 800}, {1920, 1080, 1920, 1080}, {683, 384, 1366, 768}} {
		w, h, ok := render.RawDims(c.w*c.h*3, c.sw, c.sh)
		if !ok || w != c.w || h != c.h {
			t.Errorf("render.RawDims(%dx%d on %dx%d): got %dx%d %v", c.w, c.h, c.sw, c.sh, w, h, ok)
		}
	}
	if _, _, ok := render.RawDims(7*13*3, 1280, 800); ok {
		t.Errorf("rawDims of a prime-ish size: want not ok")
	}
}
