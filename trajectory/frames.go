package trajectory

import (
	"fmt"
	"os"
	"path/filepath"
)

// FrameFile is one encoded frame to store under its hash and format.
type FrameFile struct {
	Hash, Format string
	Data         []byte
}

// PutFrames stores a batch of frames crash-safely, each once (a frame
// already stored is left as is): every file is written to a temp file and
// fsynced, renamed into place, and each directory touched is fsynced once
// for the whole batch. It returns the first error and stores what it can.
func (s *Store) PutFrames(frames []FrameFile) error {
	var first error
	fail := func(err error) {
		if first == nil {
			first = err
		}
	}
	type pending struct{ tmp, path string }
	var done []pending
	dirs := map[string]bool{}
	for _, f := range frames {
		if !hashRE.MatchString(f.Hash) || !fmtRE.MatchString(f.Format) {
			fail(fmt.Errorf("trajectory store: invalid frame key %q.%q", f.Hash, f.Format))
			continue
		}
		p := s.framePath(f.Hash, f.Format)
		if _, err := os.Stat(p); err == nil {
			continue
		}
		dir := filepath.Dir(p)
		if err := s.frameSubdir(dir); err != nil {
			fail(fmt.Errorf("trajectory store: %w", err))
			continue
		}
		tmp, err := writeSynced(dir, filepath.Base(p), f.Data)
		if err != nil {
			fail(fmt.Errorf("trajectory store: frame %s: %w", f.Hash, err))
			continue
		}
		done = append(done, pending{tmp, p})
	}
	for _, d := range done {
		if err := os.Rename(d.tmp, d.path); err != nil {
			os.Remove(d.tmp)
			fail(fmt.Errorf("trajectory store: %w", err))
			continue
		}
		dirs[filepath.Dir(d.path)] = true
	}
	for dir := range dirs {
		d, err := os.Open(dir)
		if err != nil {
			fail(err)
			continue
		}
		if err := d.Sync(); err != nil {
			fail(err)
		}
		d.Close()
	}
	return first
}

// frameSubdir makes dir, one of the at most 256 hash-prefix directories
// of frames, once: the store never removes them, so after the first frame
// in each a step's write costs no mkdir.
func (s *Store) frameSubdir(dir string) error {
	if _, ok := s.subdirs.Load(dir); ok {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	s.subdirs.Store(dir, true)
	return nil
}

// writeSynced writes data to a new temp file in dir, fsyncs and closes it,
// and returns its path.
func writeSynced(dir, base string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return "", err
	}
	// CreateTemp makes the file 0600 already: the store is private.
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}
