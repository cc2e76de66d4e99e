package envserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/render"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/valyala/fasthttp"
)

// GET /v1/episodes/{id}/video.mp4 (docs/api.md, "Episode video"): an
// episode's replay as H.264 (yuv420p, faststart) MP4, drawn as the web
// UI's replay GIF draws it (package render) and encoded by ffmpeg, one
// process per export.
//
// Timing: each position (the screen the model saw, the step's actions
// marked) is one encoded frame shown from when it was observed until the
// next one was: the frames carry their own timestamps (variable frame
// rate), so a long gap costs no encoding. A position lasts at least
// videoMinMS and at most videoMaxMS (an idle minute plays as 3 s); the
// last screen is held videoTailMS.
const (
	videoMinMS      = 100
	videoMaxMS      = 3000
	videoTailMS     = 1500
	videoLongEdge   = 1280 // frames are scaled down to this long edge
	videoMaxPerCall = 2000 // hard cap on MaxVideoFrames
	videoProbeTime  = 10 * time.Second
	videoStderrTail = 4 << 10
	// videoFormat names the rendering in the cache's file names: a change
	// to how videos are drawn or encoded bumps it, and the cache drops the
	// older files when it opens.
	videoFormat = "v1"
)

// videos encodes and caches episode videos. Its zero value is not usable:
// the server builds one in New.
type videos struct {
	cfg     *Config
	slot    chan struct{}          // encodes at once
	served  *prometheus.CounterVec // result: cached | encoded | live | busy | error
	encSecs prometheus.Histogram

	probeOnce sync.Once
	ffmpeg    string // resolved path; "" when unavailable
	why       string // why unavailable

	mu      sync.Mutex
	opened  bool
	openErr error
	dir     string
	ownDir  bool                  // a temp dir the server removes at Shutdown
	files   map[string]*videoFile // episode id → cached file
	size    int64
}

type videoFile struct {
	size int64
	used time.Time
}

func newVideos(cfg *Config, reg *prometheus.Registry) *videos {
	v := &videos{cfg: cfg, slot: make(chan struct{}, cfg.VideoEncodes), files: map[string]*videoFile{}}
	v.served = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "shinken_videos_total",
		Help: "Episode video requests by result: cached (served from the cache), encoded (encoded and kept), live (encoded, not kept), busy, error."}, []string{"result"})
	v.encSecs = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "shinken_video_encode_seconds", Help: "One episode video's encode (frames drawn and ffmpeg run).",
		Buckets: []float64{.05, .1, .2, .5, 1, 2, 5, 10, 30, 60, 120}})
	reg.MustRegister(v.served, v.encSecs)
	for _, r := range []string{"cached", "encoded", "live", "busy", "error"} {
		v.served.WithLabelValues(r)
	}
	return v
}

// available probes ffmpeg once: it must run and offer libx264.
func (v *videos) available() bool {
	v.probeOnce.Do(func() {
		name := v.cfg.Ffmpeg
		switch name {
		case "off":
			v.why = "episode videos are off on this server (config ffmpeg: off)"
			return
		case "":
			name = "ffmpeg"
		}
		path, err := exec.LookPath(name)
		if err != nil {
			v.why = fmt.Sprintf("episode videos need ffmpeg, not found (%v); make deps installs it", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), videoProbeTime)
		defer cancel()
		cmd := exec.CommandContext(ctx, path, "-hide_banner", "-loglevel", "error", "-h", "encoder=libx264")
		cmd.Stdin = nil
		out, err := cmd.CombinedOutput()
		if err != nil || !bytes.Contains(out, []byte("libx264")) || bytes.Contains(out, []byte("not recognized")) {
			v.why = fmt.Sprintf("episode videos need ffmpeg with libx264: %s answered %v: %.200s", path, err, out)
			return
		}
		v.ffmpeg = path
	})
	return v.ffmpeg != ""
}

// spec is what /v1/spec says of videos: nil where none is served.
func (v *videos) spec() *api.VideoSpec {
	if !v.available() {
		return nil
	}
	return &api.VideoSpec{MP4: true, MaxFrames: v.cfg.MaxVideoFrames, MaxPositionMS: videoMaxMS, TailMS: videoTailMS,
		LongEdge: videoLongEdge, MaxConcurrent: v.cfg.VideoEncodes, TimeoutMS: int(v.cfg.VideoTimeout / time.Millisecond)}
}

// open makes the cache directory and indexes what an earlier run left
// there (stray temp files and videos of another rendering are removed).
func (v *videos) open() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.opened {
		return v.openErr
	}
	v.opened = true
	dir := v.cfg.VideoDir
	if dir == "" {
		d, err := os.MkdirTemp("", "shinken-videos-")
		if err != nil {
			v.openErr = fmt.Errorf("video cache: %w", err)
			return v.openErr
		}
		dir, v.ownDir = d, true
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		v.openErr = fmt.Errorf("video cache: %w", err)
		return v.openErr
	}
	v.dir = dir
	ents, err := os.ReadDir(dir)
	if err != nil {
		v.openErr = fmt.Errorf("video cache: %w", err)
		return v.openErr
	}
	for _, e := range ents {
		name := e.Name()
		id, ok := strings.CutSuffix(name, "."+videoFormat+".mp4")
		info, ierr := e.Info()
		if !ok || !trajectory.ValidID(id) || ierr != nil || !info.Mode().IsRegular() {
			if strings.HasPrefix(name, ".enc-") || strings.HasSuffix(name, ".mp4") {
				os.Remove(filepath.Join(dir, name))
			}
			continue
		}
		v.files[id] = &videoFile{size: info.Size(), used: info.ModTime()}
		v.size += info.Size()
	}
	v.evictLocked("")
	return nil
}

func (v *videos) path(id string) string { return filepath.Join(v.dir, id+"."+videoFormat+".mp4") }

// cached opens episode id's cached video, marking it used.
func (v *videos) cached(id string) (*os.File, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	vf := v.files[id]
	if vf == nil {
		return nil, false
	}
	f, err := os.Open(v.path(id))
	if err != nil {
		v.size -= vf.size
		delete(v.files, id)
		return nil, false
	}
	vf.used = time.Now()
	return f, true
}

// keep moves a finished encode into the cache under id and evicts the
// least recently used videos beyond VideoCacheBytes (never id itself: one
// video over the whole bound is served, then dropped by the next keep).
func (v *videos) keep(id, tmp string) (string, error) {
	info, err := os.Stat(tmp)
	if err != nil {
		return "", err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	final := v.path(id)
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	if old := v.files[id]; old != nil {
		v.size -= old.size
	}
	v.files[id] = &videoFile{size: info.Size(), used: time.Now()}
	v.size += info.Size()
	v.evictLocked(id)
	return final, nil
}

func (v *videos) evictLocked(keep string) {
	if v.size <= v.cfg.VideoCacheBytes {
		return
	}
	ids := make([]string, 0, len(v.files))
	for id := range v.files {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return v.files[ids[i]].used.Before(v.files[ids[j]].used) })
	for _, id := range ids {
		if v.size <= v.cfg.VideoCacheBytes {
			return
		}
		if id == keep {
			continue
		}
		os.Remove(v.path(id))
		v.size -= v.files[id].size
		delete(v.files, id)
	}
}

// close removes the cache directory when it is the server's own temp dir.
func (v *videos) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ownDir {
		os.RemoveAll(v.dir)
	}
}

// cachedCount is how many videos the cache holds, and their bytes.
func (v *videos) cachedCount() (int, int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.files), v.size
}

// serveVideo answers GET /v1/episodes/{id}/video.mp4. A finished
// episode's video is encoded once and kept; a running episode's is
// encoded from the steps so far on every request and not kept, nor is a
// video some of whose frames were missing. The X-Shinken-Video header
// says which: "cached" (served from the cache), "encoded" (encoded now
// and kept), "live" (not kept).
func (s *Server) serveVideo(ctx *fasthttp.RequestCtx, c codec, id string) {
	if !ctx.IsGet() {
		s.writeError(ctx, c, aci.Errorf(aci.CodeBadRequest, "the episode video needs GET"))
		return
	}
	v := s.videos
	defer func() {
		switch st := ctx.Response.StatusCode(); {
		case st == aci.CodeBusy.HTTPStatus():
			v.served.WithLabelValues("busy").Inc()
		case st != fasthttp.StatusOK:
			v.served.WithLabelValues("error").Inc()
		}
	}()
	if !v.available() {
		s.writeError(ctx, c, aci.Errorf(aci.CodeUnsupported, "%s", v.why))
		return
	}
	if !trajectory.ValidID(id) {
		s.writeError(ctx, c, aci.Errorf(aci.CodeNotFound, "unknown episode %q", id))
		return
	}
	t, err := s.episode(id)
	if err != nil {
		s.writeError(ctx, c, err)
		return
	}
	if err := v.open(); err != nil {
		s.writeError(ctx, c, aci.Errorf(aci.CodeInternal, "%v", err))
		return
	}
	finished := t.EndedAt != nil
	if finished {
		if f, ok := v.cached(id); ok {
			s.sendVideo(ctx, c, f, id, "cached")
			return
		}
	}
	select {
	case v.slot <- struct{}{}:
		defer func() { <-v.slot }()
	default:
		s.writeError(ctx, c, aci.Errorf(aci.CodeBusy, "%d episode video export(s) already running; retry shortly", cap(v.slot)))
		return
	}
	if finished {
		// Another request may have encoded it while this one waited.
		if f, ok := v.cached(id); ok {
			s.sendVideo(ctx, c, f, id, "cached")
			return
		}
	}
	tmp, err := os.CreateTemp(v.dir, ".enc-*.mp4")
	if err != nil {
		s.writeError(ctx, c, aci.Errorf(aci.CodeInternal, "video: %v", err))
		return
	}
	tmp.Close()
	tmpPath := tmp.Name()
	defer os.Remove(tmpPath) // a no-op once kept (renamed) or sent (unlinked)
	st, err := s.encodeVideo(s.ctx, t, tmpPath)
	if err != nil {
		s.writeError(ctx, c, err)
		return
	}
	v.encSecs.Observe(st.elapsed.Seconds())
	path, how := tmpPath, "live"
	if finished && st.missing == 0 {
		if path, err = v.keep(id, tmpPath); err != nil {
			s.writeError(ctx, c, aci.Errorf(aci.CodeInternal, "video: %v", err))
			return
		}
		how = "encoded"
	}
	f, err := os.Open(path)
	if err != nil {
		s.writeError(ctx, c, aci.Errorf(aci.CodeInternal, "video: %v", err))
		return
	}
	if how == "live" {
		os.Remove(tmpPath) // the open file is sent; its name goes now
	}
	s.sendVideo(ctx, c, f, id, how)
}

// sendVideo streams f as the reply; fasthttp closes it once sent.
func (s *Server) sendVideo(ctx *fasthttp.RequestCtx, c codec, f *os.File, id, how string) {
	info, err := f.Stat()
	if err != nil {
		f.Close()
		s.writeError(ctx, c, aci.Errorf(aci.CodeInternal, "video: %v", err))
		return
	}
	h := &ctx.Response.Header
	h.SetContentType("video/mp4")
	h.Set("Content-Disposition", `inline; filename="`+id+`.mp4"`)
	h.Set("X-Shinken-Video", how)
	if how == "live" {
		h.Set("Cache-Control", "no-store")
	} else {
		h.Set("Cache-Control", "private, max-age=31536000, immutable")
	}
	ctx.Response.SetBodyStream(f, int(info.Size()))
	s.videos.served.WithLabelValues(how).Inc()
}

// videoStats describe one encode.
type videoStats struct {
	frames  int // positions encoded
	missing int // positions whose frame was not found or did not decode
	w, h    int
	ms      int64 // the video's length
	elapsed time.Duration
}

// encodeVideo renders t's replay into out (an MP4 file), running ffmpeg
// under the server's context and VideoTimeout.
func (s *Server) encodeVideo(ctx context.Context, t *trajectory.Trajectory, out string) (videoStats, error) {
	src := &uiSource{s: s}
	spec := s.pool.Spec()
	return encodeVideo(ctx, s.videos, t, spec.Width, spec.Height, src.Frame, out)
}

type frameFunc func(hash string) (data []byte, format string, err error)

func encodeVideo(ctx context.Context, v *videos, t *trajectory.Trajectory, sw, sh int, frame frameFunc, out string) (videoStats, error) {
	start := time.Now()
	var st videoStats
	if !v.available() {
		return st, aci.Errorf(aci.CodeUnsupported, "%s", v.why)
	}
	pos := render.Sample(render.Positions(t), min(v.cfg.MaxVideoFrames, videoMaxPerCall))
	decode := func(p render.Position) *image.RGBA {
		if p.Frame == "" {
			return nil
		}
		data, format, err := frame(p.Frame)
		if err != nil {
			return nil
		}
		img, err := render.Decode(data, format, sw, sh)
		if err != nil {
			return nil
		}
		return render.Downscale(img, videoLongEdge)
	}
	// The video starts at the first position with a frame.
	var first *image.RGBA
	for len(pos) > 0 && first == nil {
		if first = decode(pos[0]); first == nil {
			st.missing++
			pos = pos[1:]
		}
	}
	if first == nil {
		return st, aci.Errorf(aci.CodeNotFound, "episode %s has no recorded frames (record_frames off?)", t.EpisodeID)
	}
	// H.264 in yuv420p needs even sizes: odd ones are padded by a black
	// row or column.
	iw, ih := first.Rect.Dx(), first.Rect.Dy()
	st.w, st.h = iw+iw%2, ih+ih%2
	ts := videoTimes(pos)
	st.ms = ts[len(ts)-1] + 100

	tctx, cancel := context.WithTimeout(ctx, v.cfg.VideoTimeout)
	defer cancel()
	expr := ptsExpr(ts)
	args := []string{"-hide_banner", "-nostats", "-loglevel", "error",
		"-f", "rawvideo", "-pix_fmt", "rgb24", "-s", fmt.Sprintf("%dx%d", st.w, st.h), "-r", "10", "-i", "pipe:0",
		"-vf", "settb=1/1000,setpts='" + expr + "'", "-enc_time_base", "1:1000", "-fps_mode", "vfr",
		"-c:v", "libx264", "-preset", "veryfast", "-crf", "23", "-pix_fmt", "yuv420p", "-threads", "2",
		"-movflags", "+faststart", "-f", "mp4", "-y", out}
	cmd := exec.CommandContext(tctx, v.ffmpeg, args...)
	// ffmpeg and anything it starts are one process group, killed whole
	// when the deadline passes or the server stops.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	stderr := &tailBuffer{max: videoStderrTail}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return st, aci.Errorf(aci.CodeInternal, "video: %v", err)
	}
	if err := cmd.Start(); err != nil {
		return st, aci.Errorf(aci.CodeInternal, "video: starting ffmpeg: %v", err)
	}
	raw := make([]byte, st.w*st.h*3)
	var last []byte
	werr := func() error {
		for i, p := range pos {
			img := first
			if i > 0 {
				img = decode(p)
			}
			if img == nil {
				// A frame not recorded: the previous screen stays.
				st.missing++
			} else {
				if img.Rect.Dx() != iw || img.Rect.Dy() != ih {
					img = render.Resize(img, iw, ih)
				}
				sx := float64(iw) / float64(max(sw, 1))
				sy := float64(ih) / float64(max(sh, 1))
				for _, a := range p.Actions {
					render.MarkRGBA(img, a, sx, sy, sw, sh)
				}
				packRGB(raw, img, st.w)
				last = raw
			}
			if _, err := stdin.Write(last); err != nil {
				return err
			}
			st.frames++
		}
		// The last screen once more, so that it is held for its tail.
		_, err := stdin.Write(last)
		return err
	}()
	cerr := stdin.Close()
	err = cmd.Wait()
	st.elapsed = time.Since(start)
	switch {
	case errors.Is(tctx.Err(), context.DeadlineExceeded):
		return st, aci.Errorf(aci.CodeTimeout, "video: encoding ran past %s; ffmpeg killed", v.cfg.VideoTimeout)
	case ctx.Err() != nil:
		return st, aci.Errorf(aci.CodeBusy, "video: the server is stopping")
	case err != nil:
		return st, aci.Errorf(aci.CodeInternal, "video: ffmpeg: %v: %s", err, stderr.String())
	case werr != nil || cerr != nil:
		return st, aci.Errorf(aci.CodeInternal, "video: feeding ffmpeg: %v: %s", errors.Join(werr, cerr), stderr.String())
	}
	if info, err := os.Stat(out); err != nil || info.Size() == 0 {
		return st, aci.Errorf(aci.CodeInternal, "video: ffmpeg wrote nothing: %s", stderr.String())
	}
	return st, nil
}

// videoTimes are the presentation times (ms) of the frames fed for pos,
// and of the closing repeat of the last one: each position lasts from
// when its frame was observed to when the next was, within
// [videoMinMS, videoMaxMS]; the last is held videoTailMS (its closing
// repeat starts 100 ms before the end, one frame at the nominal 10 fps).
func videoTimes(pos []render.Position) []int64 {
	ts := make([]int64, 0, len(pos)+1)
	var at int64
	for i, p := range pos {
		ts = append(ts, at)
		d := int64(videoTailMS)
		if i+1 < len(pos) {
			d = min(max(pos[i+1].AtMS-p.AtMS, videoMinMS), videoMaxMS)
		}
		at += d
	}
	return append(ts, at-100)
}

// ptsExpr is setpts's expression for frame N's time: a sum of
// eq(N,i)*ts[i], bracketed as a balanced tree (ffmpeg's evaluator refuses
// a chain of about 100 terms; a tree's depth grows with the log).
func ptsExpr(ts []int64) string {
	var terms []string
	for i, ms := range ts {
		if ms != 0 {
			terms = append(terms, fmt.Sprintf("eq(N,%d)*%d", i, ms))
		}
	}
	if len(terms) == 0 {
		return "0"
	}
	var tree func(t []string) string
	tree = func(t []string) string {
		if len(t) == 1 {
			return t[0]
		}
		return "(" + tree(t[:len(t)/2]) + "+" + tree(t[len(t)/2:]) + ")"
	}
	return tree(terms)
}

// packRGB writes img's pixels as RGB24 into raw, a w-wide frame at least
// as large as img; the rest of raw stays black.
func packRGB(raw []byte, img *image.RGBA, w int) {
	clear(raw)
	for y := 0; y < img.Rect.Dy(); y++ {
		row := img.Pix[y*img.Stride : y*img.Stride+img.Rect.Dx()*4]
		o := y * w * 3
		for x := 0; x+3 < len(row); x += 4 {
			raw[o], raw[o+1], raw[o+2] = row[x], row[x+1], row[x+2]
			o += 3
		}
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
