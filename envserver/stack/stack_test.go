package stack_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/stack"
)

// TestOpenWithoutGuestdSaysWhy: a provider that cannot start (no guestd
// binary) fails Open with its own error, and the teardown of the partly
// built stack does not reach the provider that never was.
func TestOpenWithoutGuestdSaysWhy(t *testing.T) {
	cfg, err := configs.LoadServer("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.State = t.TempDir()
	cfg.Pool = 1
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := stack.Open(ctx, cfg, stack.Options{GuestdPath: filepath.Join(t.TempDir(), "no-guestd")})
	if err == nil {
		st.Close(ctx)
		t.Fatal("opened without a guestd binary")
	}
	if !strings.Contains(err.Error(), "guestd") {
		t.Fatalf("error %q does not name guestd", err)
	}
}
