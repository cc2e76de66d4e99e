package trajectory

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// TestJournalSurvivesCrash: a live episode's synced steps survive the
// process (the journal is never closed), a torn last line is dropped, and
// the next store closes the episode as sandbox_died / server_restart.
func TestJournalSurvivesCrash(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr := newTraj("ep-live", 0, false)
	j, err := s.OpenJournal(tr)
	if err != nil {
		t.Fatal(err)
	}
	full := newTraj("ep-live", 3, false)
	for i := range full.Steps {
		if err := j.Append(&full.Steps[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Sync(); err != nil {
		t.Fatal(err)
	}
	// Live: readable from the journal.
	got, err := s.Load("ep-live")
	if err != nil || len(got.Steps) != 3 {
		t.Fatalf("live episode: got %+v, %v; want 3 steps", got, err)
	}
	// The crash: a step half written, nothing closed.
	f, _ := os.OpenFile(s.journalPath("ep-live"), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"index":3,"actio`)
	f.Close()
	os.WriteFile(filepath.Join(s.episodeDir(), ".ep-x.json.tmp123"), []byte("partial"), 0o644)

	var logs []string
	var mu sync.Mutex
	s2, err := NewStore(dir, StoreOptions{Logf: func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	got, err = s2.Load("ep-live")
	if err != nil {
		t.Fatal(err)
	}
	if got.ExitReason != SandboxDied || got.ExitDetail != ExitDetailServerRestart || got.EndedAt == nil || len(got.Steps) != 3 {
		t.Errorf("recovered: exit %q detail %q ended %v steps %d; want sandbox_died server_restart, ended, 3 steps", got.ExitReason, got.ExitDetail, got.EndedAt, len(got.Steps))
	}
	if !reflect.DeepEqual(got.Steps, full.Steps) {
		t.Errorf("recovered steps differ from those appended")
	}
	if _, err := os.Stat(s2.journalPath("ep-live")); !os.IsNotExist(err) {
		t.Errorf("journal still there after recovery: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(s2.episodeDir(), ".*tmp*")); len(m) != 0 {
		t.Errorf("crash temp files left: %v", m)
	}
	if !strings.Contains(strings.Join(logs, "\n"), "ep-live") {
		t.Errorf("recovery not logged: %q", logs)
	}
}

// TestCorruptFileQuarantined: a file that does not decode is moved aside
// with a log line; the store opens and serves the rest.
func TestCorruptFileQuarantined(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(newTraj("good", 1, true)); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(s.episodePath("bad"), []byte("{not json"), 0o644)
	os.WriteFile(s.journalPath("badj"), []byte("garbage\n"), 0o644)
	var logs []string
	s2, err := NewStore(dir, StoreOptions{Logf: func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }})
	if err != nil {
		t.Fatalf("a corrupt file stopped the store: %v", err)
	}
	if ids, _ := s2.List(); !reflect.DeepEqual(ids, []string{"good"}) {
		t.Errorf("List = %v; want [good]", ids)
	}
	for _, name := range []string{"bad.json", "badj.journal"} {
		if _, err := os.Stat(filepath.Join(dir, "quarantine", name)); err != nil {
			t.Errorf("%s not quarantined: %v", name, err)
		}
	}
	if n := strings.Count(strings.Join(logs, "\n"), "quarantined"); n != 2 {
		t.Errorf("quarantine log lines: %d in %q; want 2", n, logs)
	}
}

// TestUnscoredDoNotEvictScored: failed resets and abandoned episodes never
// push scored episodes out of retention.
func TestUnscoredDoNotEvictScored(t *testing.T) {
	s, err := NewStore(t.TempDir(), StoreOptions{MaxEpisodes: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := s.Save(newTraj(id, 1, true)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		empty := newTraj(fmt.Sprintf("empty-%d", i), 0, true)
		empty.ExitReason = SetupError
		if err := s.Save(empty); err != nil {
			t.Fatal(err)
		}
	}
	ids, _ := s.List()
	if want := []string{"a", "b", "empty-3", "empty-4"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("List = %v; want %v", ids, want)
	}
}
