package envserver_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver"
	"github.com/shinken-rl/shinken/pool"
)

// failingProvider boots nothing: every Create fails, as under a missing
// privilege.
type failingProvider struct{}

func (failingProvider) Capabilities() pool.Capabilities {
	return pool.Capabilities{Provider: "failing"}
}
func (failingProvider) Create(context.Context, pool.Spec) (*pool.Sandbox, error) {
	return nil, errors.New("loopback up: operation not permitted")
}
func (failingProvider) Destroy(context.Context, string) error { return nil }
func (failingProvider) Alive(context.Context, string) error   { return pool.ErrNotFound }
func (failingProvider) Close(context.Context) error           { return nil }

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b)
}

// TestReadyzFollowsThePool: /healthz says the server serves; /readyz
// says it should be given envs, which a server whose every boot fails
// should not be (it answers 503 naming why), and a serving pool is.
func TestReadyzFollowsThePool(t *testing.T) {
	p, err := pool.New(context.Background(), failingProvider{}, pool.Config{Size: 1, LeaseTimeout: time.Second, Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	tasks, err := configs.LoadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	s, err := envserver.New(envserver.Config{Pool: p, Tasks: tasks, Logf: func(string, ...any) {}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	defer s.Shutdown(context.Background())
	url := "http://" + ln.Addr().String()
	if code, body := get(t, url+"/healthz"); code != 200 || body != "ok" {
		t.Errorf("healthz: %d %q", code, body)
	}
	if code, body := get(t, url+"/readyz"); code != 503 || !strings.HasPrefix(body, "not ready") {
		t.Errorf("readyz before any boot: %d %q; want 503 not ready", code, body)
	}
	// The pool's boots fail with a backoff of 100, 200, 400 ms: three in
	// a row well within the deadline.
	deadline := time.Now().Add(30 * time.Second)
	for p.Stats().BootFailStreak < 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if code, body := get(t, url+"/readyz"); code != 503 || !strings.Contains(body, "boots failed") {
		t.Errorf("readyz after %d failed boots: %d %q; want 503 naming the failed boots", p.Stats().BootFailStreak, code, body)
	}

	// A real pool is ready once its first sandbox has booted.
	srv := server(t)
	code, body := get(t, srv.URL+"/readyz")
	for end := time.Now().Add(60 * time.Second); code != 200 && time.Now().Before(end); {
		time.Sleep(100 * time.Millisecond)
		code, body = get(t, srv.URL+"/readyz")
	}
	if code != 200 || body != "ready" {
		t.Errorf("readyz of a serving pool: %d %q", code, body)
	}
}
