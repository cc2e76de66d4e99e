package trajectory

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FrameFile is one encoded frame to store under its hash and format.
type FrameFile struct {
	Hash, Format string
	Data         []byte
}

// PutFrames stores a batch of frames crash-safely, each once (a frame
// already stored is left as is). It goes in phases: every frame is written
// to a temp file; one syncfs of the store's filesystem makes them all
// durable; each is renamed into place; a second syncfs makes the names
// durable. A crash leaves a frame either whole under its name or absent (a
// stray temp file at worst). It returns the first error and stores what it
// can.
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
	if len(todo) == 0 {
		return first
	}
	// One syncfs makes every temp file's data durable, a second, after the
	// renames, their names: two journal commits a batch, where an fsync of
	// each file and of each (hash-prefix) directory took two a frame.
	fd := int(todo[0].f.Fd())
	synced := unix.Syncfs(fd)
	if synced != nil {
		fail(fmt.Errorf("trajectory store: syncfs: %w", synced))
	}
	renamed := 0
	for _, d := range todo {
		err := synced
		if err == nil {
			err = os.Rename(d.tmp, d.path)
		}
		if err != nil {
			os.Remove(d.tmp)
			if synced == nil {
				fail(fmt.Errorf("trajectory store: %w", err))
			}
			continue
		}
		renamed++
	}
	if renamed > 0 {
		if err := unix.Syncfs(fd); err != nil {
			fail(fmt.Errorf("trajectory store: syncfs: %w", err))
		}
	}
	for _, d := range todo {
		d.f.Close()
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
