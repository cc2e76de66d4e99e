package trajectory

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPutFramesBatch stores a batch in one call: every frame readable,
// a frame already stored left as is, a bad key an error while the others
// are still stored, and no temp file left behind.
func TestPutFramesBatch(t *testing.T) {
	dir := t.TempDir()
	s, err := NewStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, b := strings.Repeat("a1", 16), strings.Repeat("b2", 16)
	if err := s.PutFrame(a, "png", []byte("first")); err != nil {
		t.Fatal(err)
	}
	err = s.PutFrames([]FrameFile{{a, "png", []byte("second")}, {b, "raws2", []byte("bee")}, {"../x", "png", []byte("bad")}})
	if err == nil {
		t.Error("a bad key: want an error")
	}
	if got, _ := s.Frame(a, "png"); !bytes.Equal(got, []byte("first")) {
		t.Errorf("stored frame rewritten: %q", got)
	}
	if got, err := s.Frame(b, "raws2"); err != nil || !bytes.Equal(got, []byte("bee")) {
		t.Errorf("batch frame: %q, %v", got, err)
	}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.Contains(filepath.Base(p), ".tmp") {
			t.Errorf("temp file left: %s", p)
		}
		return nil
	})
}
