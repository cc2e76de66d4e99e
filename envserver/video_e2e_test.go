package envserver_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

// videoGet GETs an episode's video (or any path), with the token, and
// returns the status, the X-Shinken-Video header and the body; accept
// "json" asks for JSON errors.
func videoGet(t testing.TB, s *servertest.Server, path, accept string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	r, err := servertest.Client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return r.StatusCode, r.Header.Get("X-Shinken-Video"), b
}

// errCode is a JSON error body's code.
func errCode(b []byte) aci.Code {
	var e struct {
		Error *aci.Error `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil || e.Error == nil {
		return ""
	}
	return e.Error.Code
}

func specOf(t testing.TB, s *servertest.Server) api.Spec {
	t.Helper()
	st, _, b := videoGet(t, s, "/v1/spec", "application/json")
	var sp api.Spec
	if st != 200 || json.Unmarshal(b, &sp) != nil {
		t.Fatalf("spec: %d %.200s", st, b)
	}
	return sp
}

// ffmpegWrapper writes an ffmpeg that runs the real one, first waiting
// while the file hold exists (and saying so in started): a test holds an
// encode in flight with it.
func ffmpegWrapper(t testing.TB, dir string) (bin, hold, started string) {
	t.Helper()
	real, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg not installed (make deps installs it)")
	}
	if _, err := exec.LookPath("ffprobe"); err != nil {
		t.Skip("ffprobe not installed (make deps installs it)")
	}
	bin, hold, started = filepath.Join(dir, "ffmpeg"), filepath.Join(dir, "hold"), filepath.Join(dir, "started")
	script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in *encoder=libx264*) ;; *) touch %q; i=0; while [ -e %q ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done;; esac\nexec %q \"$@\"\n",
		started, hold, real)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, hold, started
}

// TestEpisodeVideo plays a few clicks in a real app and exports the
// episode: while it runs (not kept), then finished (encoded, kept, and
// served again from the cache), checked with ffprobe; and the route's
// refusals: busy beyond one encode, unknown and malformed ids, no token.
func TestEpisodeVideo(t *testing.T) {
	bin, hold, started := ffmpegWrapper(t, t.TempDir())
	s := servertest.Start(t, servertest.Options{Pool: 1, Token: "video-token", Edit: func(c *configs.Server) { c.Ffmpeg = bin }})

	sp := specOf(t, s)
	if sp.Trainer.Video == nil || !sp.Trainer.Video.MP4 || sp.Trainer.Video.MaxFrames <= 0 {
		t.Fatalf("spec trainer.video: %+v; want mp4 advertised", sp.Trainer.Video)
	}

	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "galculator-compute"}}})
	env, epID := r.Results[0].EnvID, r.Results[0].EpisodeID
	defer closeEnvs(s, env)
	px := func(x, y float64) *aci.Action { return &aci.Action{Verb: aci.Click, X: &x, Y: &y} }
	for i, a := range []*aci.Action{px(100, 300), px(200, 350), {Verb: aci.Wait, MS: 1200}, px(300, 400)} {
		out := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: a}}})
		if res := out.Results[0]; res.Error != nil {
			t.Fatalf("step %d: %v", i, res.Error)
		}
	}
	vpath := "/v1/episodes/" + epID + "/video.mp4"

	// Running: encoded from the steps so far, not kept. One encode at a
	// time: a second request while it runs is busy.
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var liveStatus int
	var liveHow string
	wg.Add(1)
	go func() {
		defer wg.Done()
		liveStatus, liveHow, _ = videoGet(t, s, vpath, "")
	}()
	for deadline := time.Now().Add(20 * time.Second); ; {
		if _, err := os.Stat(started); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the held encode never started ffmpeg")
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, _, b := videoGet(t, s, vpath, "application/json")
	if st != 503 || errCode(b) != aci.CodeBusy {
		t.Errorf("a second export while one runs: %d %s; want 503 busy", st, b)
	}
	os.Remove(hold)
	wg.Wait()
	if liveStatus != 200 || liveHow != "live" {
		t.Errorf("running episode's video: %d %q; want 200 live", liveStatus, liveHow)
	}

	closeEnvs(s, env)
	var tr trajectory.Trajectory
	if err := msgpack.Unmarshal(videoGetOK(t, s, "/v1/episodes/"+epID), &tr); err != nil || tr.EndedAt == nil {
		t.Fatalf("episode after close: %v %+v", err, tr.EndedAt)
	}
	st, how, first := videoGet(t, s, vpath, "")
	if st != 200 || how != "encoded" {
		t.Fatalf("finished episode's video: %d %q %.200s; want 200 encoded", st, how, first)
	}
	file := filepath.Join(t.TempDir(), "ep.mp4")
	if err := os.WriteFile(file, first, 0o600); err != nil {
		t.Fatal(err)
	}
	p, ms, fast := probeMP4(t, file)
	if p.CodecName != "h264" || p.PixFmt != "yuv420p" || p.Width%2 != 0 || p.Height%2 != 0 ||
		p.Width != min(sp.Observation.Screen.W, 1280)+sp.Observation.Screen.W%2 {
		t.Errorf("ffprobe: %+v; want h264 yuv420p at the screen's even size (%+v)", p, sp.Observation.Screen)
	}
	if !fast {
		t.Error("moov after mdat: not faststart")
	}
	// The real timing: each step's gap, within [100 ms, 3 s], then 1.5 s.
	want, prev := int64(1500), int64(0)
	for _, step := range tr.Steps {
		want += min(max(step.TMS-prev, 100), 3000)
		prev = step.TMS
	}
	if ms < want-100 || ms > want+200 {
		t.Errorf("duration %d ms; want about %d (steps at %v)", ms, want, stepTimes(tr))
	}
	if n, _ := strconv.Atoi(p.NbFrames); n != len(tr.Steps)+2 {
		t.Errorf("%s frames; want %d (a position per step, the last screen, its hold)", p.NbFrames, len(tr.Steps)+2)
	}

	st, how, again := videoGet(t, s, vpath, "")
	if st != 200 || how != "cached" || string(again) != string(first) {
		t.Errorf("second export: %d %q (%d bytes, same %v); want 200 cached, the same bytes", st, how, len(again), string(again) == string(first))
	}
	if m := string(videoGetOK(t, s, "/metrics")); !strings.Contains(m, `shinken_videos_total{result="cached"} 1`) ||
		!strings.Contains(m, `shinken_videos_total{result="encoded"} 1`) || !strings.Contains(m, `shinken_videos_total{result="busy"} 1`) {
		t.Errorf("metrics: want one video cached, one encoded, one busy:\n%s", grepLines(m, "shinken_videos_total"))
	}

	for _, c := range []struct {
		path string
		code aci.Code
	}{
		{"/v1/episodes/ep-0000000000000000/video.mp4", aci.CodeNotFound},
		{"/v1/episodes/..%2F..%2Fetc%2Fpasswd/video.mp4", aci.CodeNotFound},
		{"/v1/episodes/.." + "/.." + "/etc/video.mp4", aci.CodeNotFound},
		{"/v1/episodes/.hidden/video.mp4", aci.CodeNotFound},
		{"/v1/episodes/" + strings.Repeat("a", 200) + "/video.mp4", aci.CodeNotFound},
	} {
		st, _, b := videoGet(t, s, c.path, "application/json")
		if st != c.code.HTTPStatus() || errCode(b) != c.code {
			t.Errorf("GET %s: %d %.200s; want %s", c.path, st, b, c.code)
		}
	}
	noToken := *s
	noToken.Token = ""
	if st, _, b := videoGet(t, &noToken, vpath, ""); st != 401 || !strings.Contains(string(b), string(aci.CodeUnauthorized)) {
		t.Errorf("without the token: %d %s; want 401 unauthorized", st, b)
	}
	leftovers, _ := filepath.Glob(filepath.Join(s.State, "videos", ".enc-*"))
	if len(leftovers) != 0 {
		t.Errorf("temp files left in the video cache: %v", leftovers)
	}
}

// TestEpisodeVideoWithoutFFmpeg: a server whose ffmpeg is not there
// advertises no video and answers the route unsupported.
func TestEpisodeVideoWithoutFFmpeg(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) {
		c.Ffmpeg = filepath.Join(t.TempDir(), "no-such-ffmpeg")
	}})
	if sp := specOf(t, s); sp.Trainer.Video != nil {
		t.Errorf("spec advertises video without ffmpeg: %+v", sp.Trainer.Video)
	}
	if st, _, b := videoGet(t, s, "/v1/episodes/ep-0000000000000000/video.mp4", "application/json"); st != 501 || errCode(b) != aci.CodeUnsupported {
		t.Errorf("video without ffmpeg: %d %s; want 501 unsupported", st, b)
	}
	st, _, b := videoGet(t, s, "/v1/spec", "")
	var raw struct {
		Trainer map[string]any `msgpack:"trainer"`
	}
	if st != 200 || msgpack.Unmarshal(b, &raw) != nil || raw.Trainer == nil {
		t.Fatalf("spec: %d", st)
	}
	if _, ok := raw.Trainer["video"]; ok {
		t.Errorf("msgpack spec carries trainer.video without ffmpeg: %v", raw.Trainer)
	}
}

// videoGetOK GETs path with the token and returns the body, failing on a
// non-200.
func videoGetOK(t testing.TB, s *servertest.Server, path string) []byte {
	t.Helper()
	st, _, b := videoGet(t, s, path, "")
	if st != 200 {
		t.Fatalf("GET %s: %d %.200s", path, st, b)
	}
	return b
}

func stepTimes(tr trajectory.Trajectory) []int64 {
	var out []int64
	for _, s := range tr.Steps {
		out = append(out, s.TMS)
	}
	return out
}

type mp4Stream struct {
	CodecName string `json:"codec_name"`
	PixFmt    string `json:"pix_fmt"`
	Width     int    `json:"width"`
	Height    int    `json:"height"`
	NbFrames  string `json:"nb_frames"`
}

// probeMP4 describes an MP4's video stream, its length, and whether its
// moov atom comes before its mdat (faststart).
func probeMP4(t testing.TB, path string) (mp4Stream, int64, bool) {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-show_entries",
		"stream=codec_name,pix_fmt,width,height,nb_frames:format=duration", "-of", "json", path).Output()
	if err != nil {
		t.Fatalf("ffprobe: %v", err)
	}
	var p struct {
		Streams []mp4Stream `json:"streams"`
		Format  struct {
			Duration string `json:"duration"`
		} `json:"format"`
	}
	if err := json.Unmarshal(out, &p); err != nil || len(p.Streams) != 1 {
		t.Fatalf("ffprobe: %s %v", out, err)
	}
	d, _ := strconv.ParseFloat(p.Format.Duration, 64)
	b, _ := os.ReadFile(path)
	moov, mdat := strings.Index(string(b), "moov"), strings.Index(string(b), "mdat")
	return p.Streams[0], int64(d * 1000), moov >= 0 && mdat >= 0 && moov < mdat
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
