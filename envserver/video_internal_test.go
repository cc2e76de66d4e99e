package envserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/internal/procstat"
	"github.com/shinken-rl/shinken/trajectory"
)

// testVideos is a videos over cfg's defaults with ffmpeg at bin.
func testVideos(t testing.TB, bin string, edit func(*Config)) *videos {
	t.Helper()
	cfg := &Config{Ffmpeg: bin, VideoDir: t.TempDir()}
	if edit != nil {
		edit(cfg)
	}
	cfg.setDefaults()
	return newVideos(cfg, prometheus.NewRegistry())
}

func needFFmpeg(t testing.TB) {
	t.Helper()
	for _, bin := range []string{"ffmpeg", "ffprobe"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (make deps installs it)", bin)
		}
	}
}

// synthetic is an episode of n steps on a w×h screen, step i ending at
// times[i] ms, with a PNG frame per position and a click per step.
func synthetic(t testing.TB, w, h int, times []int64) (*trajectory.Trajectory, frameFunc) {
	t.Helper()
	frames := map[string][]byte{}
	put := func(i int) string {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				img.Set(x, y, color.RGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8(i * 37), 255})
			}
		}
		var b bytes.Buffer
		if err := png.Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		hash := fmt.Sprintf("%032x", i+1)
		frames[hash] = b.Bytes()
		return hash
	}
	now := time.Now()
	tr := &trajectory.Trajectory{EpisodeID: "ep-synthetic", InitFrame: put(0), StartedAt: now, EndedAt: &now}
	for i, ms := range times {
		x, y := float64(10+i*7%(w-20)), float64(10+i*5%(h-20))
		tr.Steps = append(tr.Steps, trajectory.Step{Index: i, TMS: ms, ObsFrame: put(i + 1),
			Actions: []aci.Action{{Verb: aci.Click, X: &x, Y: &y}}})
	}
	return tr, func(hash string) ([]byte, string, error) {
		if b, ok := frames[hash]; ok {
			return b, "png", nil
		}
		return nil, "", errors.New("no such frame")
	}
}

type probed struct {
	Streams []struct {
		CodecName string `json:"codec_name"`
		PixFmt    string `json:"pix_fmt"`
		Width     int    `json:"width"`
		Height    int    `json:"height"`
		NbFrames  string `json:"nb_frames"`
	} `json:"streams"`
	Format struct {
		Duration string `json:"duration"`
	} `json:"format"`
}

// ffprobeVideo describes an MP4 and reports whether its moov atom comes
// before its mdat (faststart).
func ffprobeVideo(t testing.TB, path string) (p probed, durMS int64, faststart bool) {
	t.Helper()
	out, err := exec.Command("ffprobe", "-v", "error", "-show_entries",
		"stream=codec_name,pix_fmt,width,height,nb_frames:format=duration", "-of", "json", path).Output()
	if err != nil {
		t.Fatalf("ffprobe %s: %v", path, err)
	}
	if err := json.Unmarshal(out, &p); err != nil || len(p.Streams) != 1 {
		t.Fatalf("ffprobe: %s: %v", out, err)
	}
	d, _ := strconv.ParseFloat(p.Format.Duration, 64)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return p, int64(d * 1000), topAtomIndex(b, "moov") >= 0 && topAtomIndex(b, "moov") < topAtomIndex(b, "mdat")
}

// topAtomIndex is the order of MP4 top-level atom name in b, -1 if absent.
func topAtomIndex(b []byte, name string) int {
	for i, off := 0, 0; off+8 <= len(b); i++ {
		size := int(uint32(b[off])<<24 | uint32(b[off+1])<<16 | uint32(b[off+2])<<8 | uint32(b[off+3]))
		if string(b[off+4:off+8]) == name {
			return i
		}
		if size == 1 && off+16 <= len(b) { // 64-bit size
			size = int(uint64(b[off+8])<<56 | uint64(b[off+9])<<48 | uint64(b[off+10])<<40 | uint64(b[off+11])<<32 |
				uint64(b[off+12])<<24 | uint64(b[off+13])<<16 | uint64(b[off+14])<<8 | uint64(b[off+15]))
		}
		if size < 8 {
			return -1
		}
		off += size
	}
	return -1
}

// TestVideoEncode: an odd-sized screen comes out padded to even, as H.264
// yuv420p with faststart; the positions last their real durations, a long
// gap capped and a short one raised to the minimum.
func TestVideoEncode(t *testing.T) {
	needFFmpeg(t)
	v := testVideos(t, "", nil)
	if !v.available() {
		t.Fatalf("ffmpeg installed but not usable: %s", v.why)
	}
	// Gaps: 800, 700, 60000 (capped to 3000), 20 (raised to 100), then the tail.
	tr, frames := synthetic(t, 301, 201, []int64{800, 1500, 61500, 61520})
	out := filepath.Join(t.TempDir(), "v.mp4")
	st, err := encodeVideo(context.Background(), v, tr, 301, 201, frames, out)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(800 + 700 + videoMaxMS + videoMinMS + videoTailMS)
	if st.ms != want || st.frames != 5 || st.missing != 0 || st.w != 302 || st.h != 202 {
		t.Fatalf("stats %+v; want 5 frames, %d ms, 302x202", st, want)
	}
	p, ms, fast := ffprobeVideo(t, out)
	s := p.Streams[0]
	if s.CodecName != "h264" || s.PixFmt != "yuv420p" || s.Width != 302 || s.Height != 202 || s.NbFrames != "6" {
		t.Errorf("ffprobe: %+v; want h264 yuv420p 302x202, 6 frames (5 positions and the last held)", s)
	}
	if ms < want-50 || ms > want+150 {
		t.Errorf("duration %d ms; want about %d", ms, want)
	}
	if !fast {
		t.Errorf("moov does not come before mdat: not faststart")
	}
}

// TestVideoSampled: an episode over MaxVideoFrames positions is sampled
// down to it; a missing frame holds the previous screen.
func TestVideoSampled(t *testing.T) {
	needFFmpeg(t)
	v := testVideos(t, "", func(c *Config) { c.MaxVideoFrames = 10 })
	times := make([]int64, 40)
	for i := range times {
		times[i] = int64(i+1) * 250
	}
	tr, frames := synthetic(t, 64, 48, times)
	tr.Steps[int((len(tr.Steps)+1)/2)].ObsFrame = "ffffffffffffffffffffffffffffffff" // not recorded
	st, err := encodeVideo(context.Background(), v, tr, 64, 48, frames, filepath.Join(t.TempDir(), "v.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	if st.frames != 10 {
		t.Errorf("encoded %d positions; want 10 (MaxVideoFrames)", st.frames)
	}
	tr.InitFrame = ""
	for i := range tr.Steps {
		tr.Steps[i].ObsFrame = ""
	}
	_, err = encodeVideo(context.Background(), v, tr, 64, 48, frames, filepath.Join(t.TempDir(), "none.mp4"))
	if aci.CodeOf(err) != aci.CodeNotFound {
		t.Errorf("no frames at all: %v; want not_found", err)
	}
}

// TestVideoLong: an episode of hundreds of steps encodes every position
// at its time (ffmpeg's expression evaluator takes the whole schedule).
func TestVideoLong(t *testing.T) {
	needFFmpeg(t)
	v := testVideos(t, "", func(c *Config) { c.MaxVideoFrames = videoMaxPerCall })
	times := make([]int64, 600)
	for i := range times {
		times[i] = int64(i+1) * 200
	}
	tr, frames := synthetic(t, 32, 24, times)
	out := filepath.Join(t.TempDir(), "v.mp4")
	st, err := encodeVideo(context.Background(), v, tr, 32, 24, frames, out)
	if err != nil {
		t.Fatal(err)
	}
	want := int64(600*200 + videoTailMS)
	p, ms, _ := ffprobeVideo(t, out)
	if st.frames != 601 || p.Streams[0].NbFrames != "602" || ms < want-50 || ms > want+150 {
		t.Errorf("%d positions, %s frames, %d ms; want 601, 602, about %d", st.frames, p.Streams[0].NbFrames, ms, want)
	}
}

// TestVideoTimeoutKillsGroup: an ffmpeg that never finishes is killed at
// the deadline with everything it started, and the error is typed.
func TestVideoTimeoutKillsGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	fake := filepath.Join(dir, "ffmpeg")
	script := "#!/bin/sh\ncase \"$*\" in *encoder=libx264*) echo 'Encoder libx264 [fake]'; exit 0;; esac\n" +
		"sleep 300 &\necho $! > " + pidFile + "\nwait\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	v := testVideos(t, fake, func(c *Config) { c.VideoTimeout = 500 * time.Millisecond })
	if !v.available() {
		t.Fatalf("fake ffmpeg not accepted: %s", v.why)
	}
	tr, frames := synthetic(t, 320, 200, []int64{500, 1000})
	start := time.Now()
	_, err := encodeVideo(context.Background(), v, tr, 320, 200, frames, filepath.Join(dir, "v.mp4"))
	if aci.CodeOf(err) != aci.CodeTimeout {
		t.Fatalf("hung ffmpeg: %v; want timeout", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the encode returned after %s; want soon after its 500 ms deadline", d)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the fake ffmpeg did not start its child: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("ffmpeg's child %d outlived the kill", pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// alive reports whether pid runs (a zombie awaiting its reaper is dead).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := procstat.Read(pid)
	return err == nil && !st.Gone()
}

// TestVideoUnavailable: a missing ffmpeg, or "off", serves no video and
// says why.
func TestVideoUnavailable(t *testing.T) {
	for _, bin := range []string{filepath.Join(t.TempDir(), "no-such-ffmpeg"), "off"} {
		v := testVideos(t, bin, nil)
		if v.available() || v.spec() != nil || v.why == "" {
			t.Errorf("ffmpeg %q: available %v spec %v why %q; want unavailable with a reason", bin, v.available(), v.spec(), v.why)
		}
	}
}

// TestVideoCacheBound: the cache keeps at most VideoCacheBytes, dropping
// the least recently used, and reindexes its directory on open (stray
// temp files removed).
func TestVideoCacheBound(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".enc-123.mp4"), []byte("partial"), 0o600)
	os.WriteFile(filepath.Join(dir, "ep-old."+videoFormat+".mp4"), make([]byte, 100), 0o600)
	os.WriteFile(filepath.Join(dir, "ep-gone.v0.mp4"), make([]byte, 100), 0o600)
	v := testVideos(t, "", func(c *Config) { c.VideoDir, c.VideoCacheBytes = dir, 250 })
	if err := v.open(); err != nil {
		t.Fatal(err)
	}
	if n, size := v.cachedCount(); n != 1 || size != 100 {
		t.Fatalf("reopened cache holds %d videos, %d bytes; want the one of this format", n, size)
	}
	for _, name := range []string{".enc-123.mp4", "ep-gone.v0.mp4"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s survived the open", name)
		}
	}
	for _, id := range []string{"ep-a", "ep-b"} {
		tmp := filepath.Join(dir, ".enc-"+id)
		os.WriteFile(tmp, make([]byte, 100), 0o600)
		time.Sleep(10 * time.Millisecond)
		if _, err := v.keep(id, tmp); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := v.cached("ep-old"); ok {
		t.Errorf("the least recently used video was kept over the bound")
	}
	if f, ok := v.cached("ep-b"); !ok {
		t.Errorf("the newest video was dropped")
	} else {
		f.Close()
	}
	if n, size := v.cachedCount(); n != 2 || size != 200 {
		t.Errorf("cache: %d videos, %d bytes; want 2, 200 (bound 250)", n, size)
	}
}
