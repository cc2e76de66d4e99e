package trajectory

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Journal is a live episode's append-only log on disk:
//
//	dir/episodes/<episode_id>.journal
//
// Its first line is the trajectory's header (the trajectory without steps),
// each next line one step, as JSON. Append only buffers; Sync writes and
// fsyncs what was appended, so a server syncs once per reply for every
// episode the reply advanced. A crash loses at most the steps appended
// since the last Sync (a torn last line is dropped when the journal is
// read). When the episode ends, Store.Save writes the finished trajectory
// and removes the journal. A store that opens and finds a journal without
// its trajectory closes it as SandboxDied with detail "server_restart".
type Journal struct {
	s  *Store
	id string

	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	err error // sticky: the first write or sync failure
}

// ExitDetailServerRestart is the ExitDetail of an episode that was live
// when its server stopped without closing it (a crash, a kill -9).
const ExitDetailServerRestart = "server_restart"

// ExitDetailServerShutdown is the ExitDetail of an episode that was live
// when its server stopped gracefully (SIGTERM, a drain): the server saved
// it whole and typed it sandbox_died, an infrastructure fault.
const ExitDetailServerShutdown = "server_shutdown"

func (s *Store) journalPath(id string) string {
	return filepath.Join(s.episodeDir(), id+".journal")
}

// OpenJournal starts t's journal with its header (t's steps, if any, are
// written too) and syncs it, so a started episode survives a crash.
func (s *Store) OpenJournal(t *Trajectory) (*Journal, error) {
	if t == nil || !ValidID(t.EpisodeID) {
		return nil, fmt.Errorf("trajectory store: invalid episode id")
	}
	f, err := os.OpenFile(s.journalPath(t.EpisodeID), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("trajectory store: journal %s: %w", t.EpisodeID, err)
	}
	j := &Journal{s: s, id: t.EpisodeID, f: f, w: bufio.NewWriter(f)}
	hdr := *t
	hdr.Steps = nil
	j.line(&hdr)
	for i := range t.Steps {
		j.line(&t.Steps[i])
	}
	if err := j.Sync(); err != nil {
		j.f.Close()
		os.Remove(s.journalPath(t.EpisodeID))
		return nil, err
	}
	if err := syncDir(s.episodeDir()); err != nil {
		return nil, fmt.Errorf("trajectory store: journal %s: %w", t.EpisodeID, err)
	}
	return j, nil
}

// line buffers one JSON line (j.mu held or j not yet shared).
func (j *Journal) line(v any) {
	if j.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		j.err = fmt.Errorf("trajectory store: journal %s: %w", j.id, err)
		return
	}
	b = append(b, '\n')
	if _, err := j.w.Write(b); err != nil {
		j.err = fmt.Errorf("trajectory store: journal %s: %w", j.id, err)
	}
}

// Append buffers one step; Sync makes it durable. It fails only once the
// journal has failed (the error is sticky).
func (j *Journal) Append(st *Step) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.line(st)
	return j.err
}

// Sync writes and fsyncs the steps appended so far.
func (j *Journal) Sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return j.err
	}
	if j.f == nil {
		return nil // closed: the episode was saved whole
	}
	if err := j.w.Flush(); err != nil {
		j.err = fmt.Errorf("trajectory store: journal %s: %w", j.id, err)
		return j.err
	}
	if err := j.f.Sync(); err != nil {
		j.err = fmt.Errorf("trajectory store: journal %s: %w", j.id, err)
	}
	return j.err
}

// Err is the journal's sticky failure, if any.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// fail records a failure that happened outside the journal (saving the
// finished episode), so that the next Sync reports it.
func (j *Journal) fail(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = err
	}
}

// close closes the file; remove deletes it too (the episode is saved whole).
func (j *Journal) close(remove bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	if remove {
		os.Remove(j.s.journalPath(j.id))
	}
}

// SaveFinal saves t, the journal's finished episode, whole and removes the
// journal. On failure the journal stays (a restart recovers it) and the
// error is also kept for the next Sync.
func (j *Journal) SaveFinal(t *Trajectory) error {
	if err := j.s.Save(t); err != nil {
		j.fail(err)
		return err
	}
	j.close(true)
	return nil
}

// readJournal replays a journal into a trajectory. A torn last line (a
// crash mid-write) is dropped; anything else that does not decode is an
// error.
func readJournal(path string) (*Trajectory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := bytes.Split(b, []byte("\n"))
	// The last element is what follows the last newline: empty, or torn.
	lines = lines[:len(lines)-1]
	if len(lines) == 0 {
		return nil, errors.New("empty journal")
	}
	var t Trajectory
	if err := json.Unmarshal(lines[0], &t); err != nil {
		return nil, fmt.Errorf("journal header: %w", err)
	}
	t.Steps = []Step{}
	for i, l := range lines[1:] {
		var st Step
		if err := json.Unmarshal(l, &st); err != nil {
			return nil, fmt.Errorf("journal step %d: %w", i, err)
		}
		t.Steps = append(t.Steps, st)
		t.Reward += st.Reward
	}
	t.NumTurns = len(t.Steps)
	return &t, nil
}

// recoverJournal closes a journal its server left open: the episode is
// saved whole as SandboxDied (detail server_restart) and the journal
// removed. It returns the recovered trajectory.
func (s *Store) recoverJournal(id string) (*Trajectory, error) {
	t, err := readJournal(s.journalPath(id))
	if err != nil {
		return nil, err
	}
	if t.EpisodeID != id {
		return nil, fmt.Errorf("journal holds episode %q", t.EpisodeID)
	}
	if t.EndedAt == nil {
		now := time.Now().UTC()
		t.EndedAt = &now
		t.ExitReason = SandboxDied
		t.ExitDetail = ExitDetailServerRestart
	}
	if err := s.write(t); err != nil {
		return nil, err
	}
	os.Remove(s.journalPath(id))
	return t, nil
}

// quarantine moves a file that does not decode out of the store, so one
// bad file never stops a server from starting; the log says where it went.
func (s *Store) quarantine(name string, cause error) {
	qdir := filepath.Join(s.dir, "quarantine")
	from := filepath.Join(s.episodeDir(), name)
	to := filepath.Join(qdir, name)
	err := os.MkdirAll(qdir, 0o755)
	if err == nil {
		err = os.Rename(from, to)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.logf("trajectory store: %s is unreadable (%v) and could not be quarantined: %v", from, cause, err)
		return
	}
	s.logf("trajectory store: quarantined unreadable %s to %s: %v", name, to, cause)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
