package images

import (
	"os/exec"
	"strings"
	"testing"
)

// TestRefMatchesBuildScript checks that Go and build.sh compute the same tag.
func TestRefMatchesBuildScript(t *testing.T) {
	out, err := exec.Command("sh", "build.sh", "--print-ref").Output()
	if err != nil {
		t.Fatalf("build.sh --print-ref: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), Ref(); got != want {
		t.Fatalf("build.sh ref: got %q; want %q", got, want)
	}
}
