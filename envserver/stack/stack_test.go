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

// TestProviderRegistry: both providers are registered by name, an unknown
// one fails Open naming the registered ones, and a second registration of
// a name panics instead of replacing the first.
func TestProviderRegistry(t *testing.T) {
	if got := strings.Join(stack.Providers(), ","); got != "docker,process" {
		t.Errorf("providers %q; want docker,process", got)
	}
	cfg, err := configs.LoadServer("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.State, cfg.Pool, cfg.Provider = t.TempDir(), 1, "vm"
	_, err = stack.Open(context.Background(), cfg, stack.Options{})
	if err == nil || !strings.Contains(err.Error(), "docker, process") {
		t.Errorf("open with provider vm: %v; want an error naming docker and process", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("a second registration of process did not panic")
		}
	}()
	stack.Register("process", nil)
}
