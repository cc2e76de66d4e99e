package trajectory

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
)

// frameHash is a stand-in content hash for test frames (32 hex chars).
func frameHash(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:16])
}

func newTraj(id string, steps int, ended bool) *Trajectory {
	seed := int64(7)
	t := &Trajectory{EpisodeID: id, EnvID: "env-1", Task: "t", Seed: &seed,
		StartedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Steps: []Step{}}
	for i := range steps {
		frame := []byte(fmt.Sprintf("frame %s %d", id, i))
		t.Steps = append(t.Steps, Step{Index: i, Actions: []aci.Action{{Verb: aci.Click, Target: aci.Px(1, 2)}},
			PromptIDs: []int{1, 2, i}, ResponseIDs: []int{9}, ResponseMask: []int{1},
			ObsFrame: frameHash(frame), TMS: int64(i * 10)})
	}
	t.NumTurns = len(t.Steps)
	if ended {
		e := t.StartedAt.Add(time.Minute)
		t.EndedAt = &e
		t.ExitReason = TaskComplete
		t.Reward = 1
	}
	return t
}

func TestStoreRoundTrip(t *testing.T) {
	s, err := NewStore(t.TempDir(), StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := newTraj("ep-1", 3, true)
	want.Steps[1].Text = "pyautogui.click(1, 2)"
	want.Steps[1].Dialect = "pyautogui"
	want.Steps[2].Error = aci.Errorf(aci.CodeInvalidAction, "off screen")
	if err := s.Save(want); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load("ep-1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load = %+v; want %+v", got, want)
	}
	// Saving again as it grows replaces the file.
	want.Steps = append(want.Steps, want.Steps[0])
	if err := s.Save(want); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Load("ep-1"); len(got.Steps) != 4 {
		t.Errorf("after re-save got %d steps; want 4", len(got.Steps))
	}
	ids, err := s.List()
	if err != nil || !reflect.DeepEqual(ids, []string{"ep-1"}) {
		t.Errorf("List = %v, %v; want [ep-1]", ids, err)
	}
}

func TestStoreRejectsBadIDs(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(filepath.Join(dir, "store"), StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", "../escape", "a/b", ".hidden", "..", strings.Repeat("x", 200), "a\x00b"} {
		if err := s.Save(newTraj(id, 1, true)); err == nil {
			t.Errorf("Save(%q) succeeded; want an error", id)
		}
		if _, err := s.Load(id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Load(%q) = %v; want ErrNotFound", id, err)
		}
	}
	if _, err := s.Load("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load(nope) = %v; want ErrNotFound", err)
	}
	for _, k := range [][2]string{{"../../etc/passwd", "png"}, {"ABCDEF0123456789", "png"}, {"0123456789abcdef", "../x"}} {
		if err := s.PutFrame(k[0], k[1], []byte("x")); err == nil {
			t.Errorf("PutFrame(%q, %q) succeeded; want an error", k[0], k[1])
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("store wrote outside its dir: %v", ents)
	}
}

func TestStoreFramesOnce(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("pixels")
	h := frameHash(data)
	for range 3 {
		if err := s.PutFrame(h, "png", data); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Frame(h, "png")
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("Frame = %q, %v; want %q", got, err, data)
	}
	if _, err := s.Frame(h, "jpeg"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Frame(jpeg) = %v; want ErrNotFound", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "frames", "*", "*"))
	if len(files) != 1 {
		t.Errorf("frame files %v; want exactly one", files)
	}
}

func TestStoreRetention(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir, StoreOptions{MaxEpisodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	shared := []byte("shared frame")
	sh := frameHash(shared)
	if err := s.PutFrame(sh, "png", shared); err != nil {
		t.Fatal(err)
	}
	live := newTraj("live", 1, false)
	if err := s.Save(live); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		tr := newTraj(fmt.Sprintf("ep-%d", i), 1, true)
		own := []byte(tr.EpisodeID)
		tr.Steps[0].ObsFrame = frameHash(own)
		tr.InitFrame = sh
		if err := s.PutFrame(frameHash(own), "png", own); err != nil {
			t.Fatal(err)
		}
		if err := s.Save(tr); err != nil {
			t.Fatal(err)
		}
	}
	ids, _ := s.List()
	if want := []string{"ep-2", "ep-3", "live"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("List = %v; want %v (oldest finished evicted, live kept)", ids, want)
	}
	if _, err := s.Frame(frameHash([]byte("ep-0")), "png"); !errors.Is(err, ErrNotFound) {
		t.Errorf("evicted episode's own frame: %v; want ErrNotFound", err)
	}
	if _, err := s.Frame(sh, "png"); err != nil {
		t.Errorf("frame still referenced was deleted: %v", err)
	}
	if _, err := s.Frame(frameHash([]byte("ep-3")), "png"); err != nil {
		t.Errorf("kept episode's frame: %v", err)
	}
	// Retention carries across a reopen with a smaller limit.
	s2, err := NewStore(dir, StoreOptions{MaxEpisodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	ids, _ = s2.List()
	if want := []string{"ep-3", "live"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("after reopen with limit 1, List = %v; want %v (the newest scored, and the unscored one under its own bound)", ids, want)
	}
}

// TestHelperWriter is not a test: TestCrashMidWrite runs it in a subprocess
// that saves growing episodes and frames in a loop until it is killed.
func TestHelperWriter(t *testing.T) {
	dir := os.Getenv("SHINKEN_TRAJ_WRITER_DIR")
	if dir == "" {
		t.Skip("helper process for TestCrashMidWrite")
	}
	s, err := NewStore(dir, StoreOptions{MaxEpisodes: 20})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	round := os.Getenv("SHINKEN_TRAJ_WRITER_ROUND")
	pad := strings.Repeat("model output ", 2000) // ~26 KB per step: writes take a while
	for ep := 0; ; ep++ {
		tr := newTraj(fmt.Sprintf("r%s-ep-%d", round, ep), 0, false)
		for i := range 12 {
			frame := bytes.Repeat([]byte(fmt.Sprintf("%s/%d/%d;", round, ep, i)), 2000)
			h := frameHash(frame)
			if err := s.PutFrame(h, "png", frame); err != nil {
				fmt.Println("error", err)
				os.Exit(2)
			}
			tr.Steps = append(tr.Steps, Step{Index: i, Text: pad, PromptIDs: []int{i}, ResponseIDs: []int{i},
				ResponseMask: []int{1}, ObsFrame: h})
			tr.NumTurns = len(tr.Steps)
			if i == 11 {
				now := time.Now()
				tr.EndedAt = &now
			}
			if err := s.Save(tr); err != nil {
				fmt.Println("error", err)
				os.Exit(2)
			}
			fmt.Println("saved", tr.EpisodeID, i)
		}
	}
}

// TestCrashMidWrite kills a writer with SIGKILL at several points while it
// saves in a loop, then checks that every episode on disk reads back whole,
// with every frame it references present and intact, and no temp file
// listed.
func TestCrashMidWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns writer processes")
	}
	dir := t.TempDir()
	for round, kills := range []int{3, 17, 40, 61} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), "SHINKEN_TRAJ_WRITER_DIR="+dir, fmt.Sprintf("SHINKEN_TRAJ_WRITER_ROUND=%d", round))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if cmd.ProcessState == nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		})
		lines := bufio.NewScanner(out)
		n := 0
		deadline := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
		for n < kills && lines.Scan() {
			if strings.HasPrefix(lines.Text(), "error") {
				t.Fatalf("writer: %s", lines.Text())
			}
			n++
		}
		deadline.Stop()
		if n < kills {
			t.Fatalf("writer stopped after %d saves; want %d", n, kills)
		}
		// Kill it while it is writing: it never waits between saves.
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait() // reaps it; the error is the kill

		s, err := NewStore(dir, StoreOptions{MaxEpisodes: 20})
		if err != nil {
			t.Fatalf("round %d: reopening after SIGKILL: %v", round, err)
		}
		ids, err := s.List()
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) == 0 {
			t.Fatalf("round %d: no episodes on disk after %d saves", round, n)
		}
		for _, id := range ids {
			tr, err := s.Load(id)
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			if tr.NumTurns != len(tr.Steps) || len(tr.Steps) == 0 {
				t.Errorf("round %d: %s has num_turns %d and %d steps", round, id, tr.NumTurns, len(tr.Steps))
			}
			for i, st := range tr.Steps {
				if st.Index != i || len(st.Text) != len(tr.Steps[0].Text) {
					t.Errorf("round %d: %s step %d is damaged", round, id, i)
				}
				b, err := s.Frame(st.ObsFrame, "png")
				if err != nil {
					t.Errorf("round %d: %s step %d frame: %v", round, id, i, err)
				} else if frameHash(b) != st.ObsFrame {
					t.Errorf("round %d: %s step %d frame content does not match its hash", round, id, i)
				}
			}
		}
		if tmp, _ := filepath.Glob(filepath.Join(dir, "episodes", ".tmp-*")); len(tmp) != 0 {
			t.Errorf("round %d: temp files left after reopen: %v", round, tmp)
		}
	}
}

// TestStoreIsPrivate: episodes and frames hold answers; only the server's
// user may read them, even in a store an older version left readable.
func TestStoreIsPrivate(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "episodes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := NewStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(newTraj("ep-1", 1, true)); err != nil {
		t.Fatal(err)
	}
	data := []byte("frame")
	if err := s.PutFrame(frameHash(data), "png", data); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v; want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMalformedFrameRefsDoNotPanicEviction: episodes on disk that name
// frames by hashes of another shape (short, a path) are indexed and
// evicted at startup without a panic, and without touching other files.
func TestMalformedFrameRefsDoNotPanicEviction(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir, StoreOptions{MaxEpisodes: 5})
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(dir, "keep.png")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, h := range []string{"a", "", "../keep", "zz"} {
		tr := &Trajectory{EpisodeID: fmt.Sprintf("ep-%d", i), InitFrame: h, EndedAt: &now, ExitReason: TaskComplete,
			Steps: []Step{{ObsFrame: h}}}
		if err := s.Save(tr); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := NewStore(dir, StoreOptions{MaxEpisodes: 1}); err != nil {
		t.Fatalf("reopening with eviction: %v", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("eviction removed a file outside the frames: %v", err)
	}
}
