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
// already stored is left as is). It goes in phases: every frame is written
// to a temp file, then each is fsynced, renamed into place, and each
// directory touched is fsynced once for the whole batch. Written first and
// synced after, the batch's files share one journal commit on a journaling
// filesystem instead of taking one each. It returns the first error and
// stores what it can.
func (s *Store) PutFrames(frames []FrameFile) error {
	var first error
	fail := func(err error) {
		if first == nil {
			first = err
		}
	}
	type pending struct {
		f         *os.File
		tmp, path string
	}
	var todo []pending
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
		// CreateTemp makes the file 0600 already: the store is private.
		tf, err := os.CreateTemp(dir, "."+filepath.Base(p)+".tmp*")
		if err == nil {
			if _, err = tf.Write(f.Data); err != nil {
				tf.Close()
				os.Remove(tf.Name())
			}
		}
		if err != nil {
			fail(fmt.Errorf("trajectory store: frame %s: %w", f.Hash, err))
			continue
		}
		todo = append(todo, pending{tf, tf.Name(), p})
	}
	dirs := map[string]bool{}
	for _, d := range todo {
		err := d.f.Sync()
		if cerr := d.f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(d.tmp, d.path)
		}
		if err != nil {
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
