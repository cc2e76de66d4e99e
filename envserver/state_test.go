package envserver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/envserver/stack"
)

// TestSecondServerOnStateDirRefused: a second server on a live server's
// state directory is refused before it touches anything there (it would
// sweep the first one's sandboxes), with an error that says what to do.
func TestSecondServerOnStateDirRefused(t *testing.T) {
	s := server(t)
	cfg, err := configs.LoadServer("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.State = s.State
	cfg.Pool = 1
	before, _ := filepath.Glob(filepath.Join(s.State, "sandboxes", "runs", "*.lock"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := stack.Open(ctx, cfg, stack.Options{GuestdPath: servertest.Guestd(t)})
	if err == nil {
		st.Close(ctx)
		t.Fatal("second server on a live state dir: opened; want ErrStateInUse")
	}
	if !errors.Is(err, stack.ErrStateInUse) {
		t.Fatalf("second server: got %v; want ErrStateInUse", err)
	}
	if want := fmt.Sprintf("pid %d", os.Getpid()); !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--state") {
		t.Errorf("error %q: want it to name the owner (%s) and the --state flag", err, want)
	}
	after, _ := filepath.Glob(filepath.Join(s.State, "sandboxes", "runs", "*.lock"))
	if len(after) != len(before) {
		t.Errorf("provider runs before/after the refused open: %v / %v; want nothing claimed", before, after)
	}
	// The first server still serves.
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	closeEnvs(s, r.Results[0].EnvID)
}
