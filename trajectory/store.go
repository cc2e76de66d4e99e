package trajectory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/internal/atomicfile"
)

// ErrNotFound is wrapped by Load and Frame for ids and hashes the store does
// not hold.
var ErrNotFound = errors.New("not found")

// DefaultMaxEpisodes is the retention when StoreOptions.MaxEpisodes is 0.
const DefaultMaxEpisodes = 10000

// StoreOptions tune a Store.
type StoreOptions struct {
	// MaxEpisodes bounds how many finished episodes are kept; beyond it the
	// oldest finished ones are deleted, with the frames only they used.
	// 0 means DefaultMaxEpisodes. Unscored episodes (abandoned, or
	// ended before a step) are kept under a bound of their own, so they
	// never push scored ones out.
	MaxEpisodes int
	// Logf receives what the store repairs on open (recovered journals,
	// quarantined files); nil discards.
	Logf func(format string, args ...any)
}

// Store keeps trajectories and their frames on disk:
//
//	dir/episodes/<episode_id>.json   one trajectory, JSON
//	dir/frames/<hh>/<hash>.<format>  encoded frames, content-addressed
//
// Every file is written crash-safe: a temp file in the same directory,
// fsync, rename over the final name, fsync of the directory. A crash at any
// point leaves either the previous complete file or the new complete one;
// stray temp files are removed when the store opens. A Store is safe for
// concurrent use, but one episode's Saves must not run concurrently (the
// last rename wins).
//
// One process owns a store directory at a time: NewStore deletes temp files
// and frames no episode references.
type Store struct {
	dir  string
	max  int
	logf func(format string, args ...any)

	mu       sync.Mutex
	finished []string            // finished scored episode ids, oldest first
	unscored []string            // finished unscored or empty episode ids, oldest first
	isDone   map[string]bool     // id → finished
	frames   map[string][]string // id → frame hashes it references
	refs     map[string]int      // frame hash → episodes referencing it

	subdirs sync.Map // frame prefix directories known to exist (frameSubdir)
}

var (
	idRE   = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$`)
	hashRE = regexp.MustCompile(`^[0-9a-f]{8,64}$`)
	fmtRE  = regexp.MustCompile(`^[a-z0-9]{1,8}$`)
)

// ValidID reports whether id is usable as an episode id (no path
// separators, no leading dot, at most 128 characters).
func ValidID(id string) bool { return idRE.MatchString(id) }

// NewStore opens (creating if needed) a store in dir. It indexes the
// episodes already there, oldest first by modification time, so retention
// carries across restarts; each is read once for the frames it references.
func NewStore(dir string, opts StoreOptions) (*Store, error) {
	if opts.MaxEpisodes < 0 {
		return nil, fmt.Errorf("trajectory store: max episodes %d is negative", opts.MaxEpisodes)
	}
	if opts.MaxEpisodes == 0 {
		opts.MaxEpisodes = DefaultMaxEpisodes
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	s := &Store{dir: dir, max: opts.MaxEpisodes, logf: opts.Logf, isDone: map[string]bool{},
		frames: map[string][]string{}, refs: map[string]int{}}
	// Episodes and frames are the server's user's alone (an older store's
	// looser directories are tightened): a sandbox, or anyone else on the
	// host, must not read past answers.
	for _, d := range []string{s.episodeDir(), s.frameDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("trajectory store: %w", err)
		}
	}
	for _, d := range []string{s.dir, s.episodeDir(), s.frameDir()} {
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("trajectory store: %w", err)
		}
	}
	if err := s.index(); err != nil {
		return nil, fmt.Errorf("trajectory store %s: %w", dir, err)
	}
	s.mu.Lock()
	err := s.evict()
	s.mu.Unlock()
	return s, err
}

func (s *Store) episodeDir() string { return filepath.Join(s.dir, "episodes") }
func (s *Store) frameDir() string   { return filepath.Join(s.dir, "frames") }

func (s *Store) episodePath(id string) string {
	return filepath.Join(s.episodeDir(), id+".json")
}

func (s *Store) framePath(hash, format string) string {
	return filepath.Join(s.frameDir(), hash[:2], hash+"."+format)
}

// index reads the episodes on disk, removes temp files and orphan frames.
func (s *Store) index() error {
	ents, err := os.ReadDir(s.episodeDir())
	if err != nil {
		return err
	}
	type aged struct {
		id     string
		mod    time.Time
		scored bool
	}
	var eps []aged
	have := map[string]bool{}
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok {
			have[id] = true
		}
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp") {
			os.Remove(filepath.Join(s.episodeDir(), name)) // a crash's temp file
			continue
		}
		var t *Trajectory
		if id, ok := strings.CutSuffix(name, ".journal"); ok && ValidID(id) {
			if have[id] {
				os.Remove(s.journalPath(id)) // saved whole already
				continue
			}
			var err error
			if t, err = s.recoverJournal(id); err != nil {
				s.quarantine(name, err)
				continue
			}
			s.logf("trajectory store: episode %s was live when its server stopped; closed as %s (%s)", id, t.ExitReason, t.ExitDetail)
		} else if id, ok := strings.CutSuffix(name, ".json"); ok && ValidID(id) {
			var err error
			if t, err = s.Load(id); err != nil {
				s.quarantine(name, err)
				continue
			}
		} else {
			continue
		}
		info, err := os.Stat(s.episodePath(t.EpisodeID))
		if err != nil {
			continue
		}
		eps = append(eps, aged{t.EpisodeID, info.ModTime(), scored(t)})
		s.track(t)
	}
	sort.Slice(eps, func(i, j int) bool {
		if !eps[i].mod.Equal(eps[j].mod) {
			return eps[i].mod.Before(eps[j].mod)
		}
		return eps[i].id < eps[j].id
	})
	// Episodes left on disk by an earlier process will not grow again: all
	// are finished as far as retention goes.
	for _, e := range eps {
		s.done(e.id, e.scored)
	}
	return filepath.WalkDir(s.frameDir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		hash, _, _ := strings.Cut(name, ".")
		if strings.HasPrefix(name, ".tmp-") || s.refs[hash] == 0 {
			os.Remove(p)
		}
		return nil
	})
}

// frameRefs lists the distinct frame hashes t references.
func frameRefs(t *Trajectory) []string {
	seen := map[string]bool{}
	var out []string
	add := func(h string) {
		// A hash of another shape (an episode file edited or written by an
		// older build) names no frame of this store: skipped, so eviction
		// never slices or globs with it.
		if hashRE.MatchString(h) && !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	add(t.InitFrame)
	for i := range t.Steps {
		add(t.Steps[i].ObsFrame)
	}
	return out
}

// track records t's frame references, replacing any earlier ones (s.mu held
// or not yet shared).
func (s *Store) track(t *Trajectory) {
	for _, h := range s.frames[t.EpisodeID] {
		s.refs[h]--
	}
	hs := frameRefs(t)
	for _, h := range hs {
		s.refs[h]++
	}
	s.frames[t.EpisodeID] = hs
}

// Save writes t crash-safe, replacing any earlier save of the same episode.
// It may be called repeatedly as the episode grows; once t has EndedAt set
// the episode counts toward retention and the oldest finished episodes
// beyond the limit are deleted.
func (s *Store) Save(t *Trajectory) error {
	if t == nil || !ValidID(t.EpisodeID) {
		return fmt.Errorf("trajectory store: invalid episode id")
	}
	if err := s.write(t); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.track(t)
	if t.EndedAt != nil {
		s.done(t.EpisodeID, scored(t))
	}
	return s.evict()
}

// write saves t's file crash-safe.
func (s *Store) write(t *Trajectory) error {
	b, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("trajectory store: encoding %s: %w", t.EpisodeID, err)
	}
	if err := atomicfile.Write(s.episodePath(t.EpisodeID), b, 0o600); err != nil {
		return fmt.Errorf("trajectory store: saving %s: %w", t.EpisodeID, err)
	}
	return nil
}

// scored reports whether t counts toward retention: it was scored (an exit
// reason) and took at least one step.
func scored(t *Trajectory) bool { return t.ExitReason != "" && len(t.Steps) > 0 }

// done files a finished episode under its retention list (s.mu held or s
// not yet shared).
func (s *Store) done(id string, isScored bool) {
	if s.isDone[id] {
		return
	}
	s.isDone[id] = true
	if isScored {
		s.finished = append(s.finished, id)
	} else {
		s.unscored = append(s.unscored, id)
	}
}

// evict deletes the oldest finished episodes beyond the limit and the frames
// no remaining episode references (s.mu held).
func (s *Store) evict() error {
	var errs []error
	for len(s.finished) > s.max || len(s.unscored) > s.max {
		var id string
		if len(s.finished) > s.max {
			id, s.finished = s.finished[0], s.finished[1:]
		} else {
			id, s.unscored = s.unscored[0], s.unscored[1:]
		}
		delete(s.isDone, id)
		if err := os.Remove(s.episodePath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
		for _, h := range s.frames[id] {
			s.refs[h]--
			if s.refs[h] <= 0 {
				delete(s.refs, h)
				matches, _ := filepath.Glob(filepath.Join(s.frameDir(), h[:2], h+".*"))
				for _, m := range matches {
					os.Remove(m)
				}
			}
		}
		delete(s.frames, id)
	}
	return errors.Join(errs...)
}

// Load reads one episode. An unknown id is an error wrapping ErrNotFound; a
// file that does not decode (which a crash cannot produce) is reported as
// corrupt.
func (s *Store) Load(episodeID string) (*Trajectory, error) {
	if !ValidID(episodeID) {
		return nil, fmt.Errorf("episode %q: invalid id: %w", episodeID, ErrNotFound)
	}
	b, err := os.ReadFile(s.episodePath(episodeID))
	if errors.Is(err, fs.ErrNotExist) {
		// A live episode: its journal so far.
		t, jerr := readJournal(s.journalPath(episodeID))
		if jerr == nil && t.EpisodeID == episodeID {
			return t, nil
		}
		return nil, fmt.Errorf("episode %q: %w", episodeID, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	var t Trajectory
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("episode %q: corrupt file: %w", episodeID, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("episode %q: corrupt file: trailing data", episodeID)
	}
	if t.EpisodeID != episodeID {
		return nil, fmt.Errorf("episode %q: file holds episode %q", episodeID, t.EpisodeID)
	}
	return &t, nil
}

// List returns the stored episode ids, sorted.
func (s *Store) List() ([]string, error) {
	ents, err := os.ReadDir(s.episodeDir())
	if err != nil {
		return nil, err
	}
	var ids []string
	seen := map[string]bool{}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			id, ok = strings.CutSuffix(e.Name(), ".journal")
		}
		if ok && ValidID(id) && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// PutFrame stores an encoded frame under its hash and format, once: a frame
// already stored is left as is.
func (s *Store) PutFrame(hash, format string, data []byte) error {
	if !hashRE.MatchString(hash) || !fmtRE.MatchString(format) {
		return fmt.Errorf("trajectory store: invalid frame key %q.%q", hash, format)
	}
	p := s.framePath(hash, format)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("trajectory store: %w", err)
	}
	if err := atomicfile.Write(p, data, 0o600); err != nil {
		return fmt.Errorf("trajectory store: frame %s: %w", hash, err)
	}
	return nil
}

// Frame reads a stored frame; a missing one is an error wrapping ErrNotFound.
func (s *Store) Frame(hash, format string) ([]byte, error) {
	if !hashRE.MatchString(hash) || !fmtRE.MatchString(format) {
		return nil, fmt.Errorf("frame %q.%q: invalid key: %w", hash, format, ErrNotFound)
	}
	b, err := os.ReadFile(s.framePath(hash, format))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("frame %s.%s: %w", hash, format, ErrNotFound)
	}
	return b, err
}
