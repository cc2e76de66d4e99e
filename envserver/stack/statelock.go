package stack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrStateInUse is returned by Open when another live server owns the
// state directory.
var ErrStateInUse = errors.New("state directory in use by another server")

// lockState makes this process the one owner of the state directory: an
// exclusive flock on <state>/owner.lock, held until Close (or until the
// process dies, when the kernel drops it). A second server on the same
// directory would otherwise sweep the first one's live sandboxes and
// overwrite its episodes.
func lockState(state string) (*os.File, error) {
	if err := os.MkdirAll(state, 0o755); err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	path := filepath.Join(state, "owner.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		owner := strings.TrimSpace(string(b))
		if owner == "" {
			owner = "unknown"
		}
		return nil, fmt.Errorf("%w: %s is held by pid %s; give each server its own state directory (--state)", ErrStateInUse, state, owner)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
