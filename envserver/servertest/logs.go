package servertest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// logRing keeps the last lines a server logged, so that a failing test can
// print them (a shared server outlives the test that started it, so its logs
// cannot go to t.Logf).
type logRing struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

const ringLines = 400

func (r *logRing) logf(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lines == nil {
		r.lines = make([]string, ringLines)
	}
	r.lines[r.next] = line
	r.next = (r.next + 1) % ringLines
	if r.next == 0 {
		r.full = true
	}
}

// tail returns up to n of the last lines.
func (r *logRing) tail(n int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []string
	if r.full {
		all = append(all, r.lines[r.next:]...)
	}
	all = append(all, r.lines[:r.next]...)
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all
}

// LogTail returns the server's last n log lines.
func (s *Server) LogTail(n int) []string { return s.ring.tail(n) }

// dumpOnFailure prints, when t has failed, the tail of the server's log and
// of every live sandbox's log (the sandbox logs are removed with their
// sandbox, so they are read now).
func (s *Server) dumpOnFailure(t testing.TB) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Logf("server log (last 60 lines):\n%s", strings.Join(s.ring.tail(60), "\n"))
		logs, _ := filepath.Glob(filepath.Join(s.State, "sandboxes", "runs", "*", "sandboxes", "*", "log"))
		for _, l := range logs {
			t.Logf("sandbox log %s (tail):\n%s", filepath.Base(filepath.Dir(l)), fileTail(l, 1500))
		}
	})
}

// fileTail returns the last max bytes of a file.
func fileTail(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := max64(0, st.Size()-max)
	b := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(b, off)
	return string(b[:n])
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}
