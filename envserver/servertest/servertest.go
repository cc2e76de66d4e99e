// Package servertest starts real env servers for tests and benchmarks: the
// process provider, a warm pool, real guestd sandboxes on real Xvfb, and the
// HTTP server on a loopback port. Test packages that use it call Main from
// their TestMain, because each sandbox's init re-executes the test binary.
package servertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/stack"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool/pooltest"
	"github.com/shinken-rl/shinken/pool/process"
	"github.com/vmihailenco/msgpack/v5"
)

// Main runs a test binary's tests, serving as a sandbox init when re-executed
// as one. Call it from TestMain.
func Main(m *testing.M) {
	process.MaybeRunInit()
	code := m.Run()
	sharedMu.Lock()
	for _, f := range sharedClose {
		if err := f(); err != nil {
			fmt.Fprintf(os.Stderr, "servertest: closing a shared server: %v\n", err)
			code = max(code, 1)
		}
	}
	sharedMu.Unlock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

var (
	sharedMu    sync.Mutex
	shared      = map[string]*Server{}
	sharedErr   = map[string]string{}
	sharedClose []func() error
)

// Shared returns a server shared by every test of the binary that asks for
// the same name; booting sandboxes is the slow part of end-to-end tests.
// Main stops it after the last test. Tests sharing it use their own envs.
func Shared(t testing.TB, name string, opts Options) *Server {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if s := shared[name]; s != nil {
		s.dumpOnFailure(t)
		return s
	}
	if msg := sharedErr[name]; msg != "" {
		t.Fatalf("shared server %s failed to start earlier: %s", name, msg)
	}
	s, err := start(t, opts, func(f func() error) { sharedClose = append(sharedClose, f) })
	if err != nil {
		sharedErr[name] = err.Error()
		t.Fatal(err)
	}
	shared[name] = s
	s.dumpOnFailure(t)
	return s
}

var (
	buildOnce sync.Once
	buildDir  string
	guestd    string
	buildErr  error
)

// Guestd builds cmd/guestd once per test binary and returns its path.
func Guestd(t testing.TB) string {
	t.Helper()
	skipShort(t)
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "shinken-guestd-"); buildErr == nil {
			guestd, buildErr = pooltest.BuildGuestd(buildDir)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return guestd
}

// skipShort skips an end-to-end test under -short: it boots real
// desktops, and -short is the unit tier (envserver's runs against an
// in-memory provider and guest).
func skipShort(t testing.TB) {
	if testing.Short() {
		t.Skip("end-to-end (real Xvfb desktops): skipped under -short")
	}
}

// Options tune a test server; zero values are small and fast.
type Options struct {
	Pool     int    // warm sandboxes; default 2
	Replicas int    // warm replicas per task checkpoint; default 1
	Token    string // bearer token
	Tasks    string // task dir; default the shipped suite
	// AllowUnchecked serves task families without a passing check record
	// (the shipped suite has one; a test's own families may not).
	AllowUnchecked bool
	Edit           func(*configs.Server)
	Logf           func(format string, args ...any) // also receives the server's logs (they are always kept in a ring that failing tests print)
}

// Server is a running test server.
type Server struct {
	*stack.Stack
	Token string
	State string // the server's state directory
	ring  *logRing
}

// Start starts a server and stops it (and every sandbox) when the test ends.
// It skips the test when Xvfb is not installed.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := start(t, opts, closeWithTest(t))
	if err != nil {
		t.Fatal(err)
	}
	s.dumpOnFailure(t)
	return s
}

// closeWithTest closes a server when t ends and fails t if closing fails.
func closeWithTest(t testing.TB) func(func() error) {
	return func(f func() error) {
		t.Cleanup(func() {
			if err := f(); err != nil {
				t.Errorf("closing the test server: %v", err)
			}
		})
	}
}

// TryStart is Start that returns the error instead of failing the test, for
// tests that skip when an optional provider is unavailable.
func TryStart(t testing.TB, opts Options) (*Server, error) {
	t.Helper()
	s, err := start(t, opts, closeWithTest(t))
	if err == nil {
		s.dumpOnFailure(t)
	}
	return s, err
}

// start starts a server whose teardown (and state dir removal) is handed to
// onClose. It skips the test when Xvfb is not installed.
func start(t testing.TB, opts Options, onClose func(func() error)) (*Server, error) {
	t.Helper()
	skipShort(t)
	for _, bin := range []string{"Xvfb", "openbox"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not installed (make deps installs it): %v", bin, err)
		}
	}
	cfg, err := configs.LoadServer("")
	if err != nil {
		return nil, err
	}
	cfg.Pool = 2
	if opts.Pool > 0 {
		cfg.Pool = opts.Pool
	}
	cfg.ReplicasPerGolden = 1
	if opts.Replicas > 0 {
		cfg.ReplicasPerGolden = opts.Replicas
	}
	cfg.Token = opts.Token
	cfg.Tasks = opts.Tasks
	cfg.AllowUnchecked = opts.AllowUnchecked
	if cfg.State, err = os.MkdirTemp("", "shinken-test-"); err != nil {
		return nil, err
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.LeaseTimeout = configs.Duration(60 * time.Second)
	if opts.Edit != nil {
		opts.Edit(cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ring := &logRing{}
	logf := ring.logf
	if opts.Logf != nil {
		logf = func(format string, args ...any) {
			ring.logf(format, args...)
			opts.Logf(format, args...)
		}
	}
	st, err := stack.Open(ctx, cfg, stack.Options{GuestdPath: Guestd(t), Logf: logf})
	if err == nil {
		err = st.Serve(cfg.Listen, cfg.Token)
	}
	stop := func() error {
		var err error
		if st != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err = st.Close(ctx)
		}
		os.RemoveAll(cfg.State)
		return err
	}
	if err != nil {
		stop()
		return nil, fmt.Errorf("%w\nserver log:\n%s", err, strings.Join(ring.tail(40), "\n"))
	}
	onClose(stop)
	return &Server{Stack: st, Token: cfg.Token, State: cfg.State, ring: ring}, nil
}

// Call posts req as msgpack to path and decodes the reply into resp (when
// the status is 200) or returns the typed error. It returns the status and
// the reply body's size.
func (s *Server) Call(path string, req, resp any) (status, size int, err error) {
	body, err := msgpack.Marshal(req)
	if err != nil {
		return 0, 0, err
	}
	return s.Raw(path, "application/msgpack", body, resp)
}

// Client is the HTTP client every call of a test goes through. Its deadline
// is past any the server applies to a request (reset_timeout, a batch's
// step budget), so a stalled server fails the test instead of hanging it.
var Client = &http.Client{Timeout: 5 * time.Minute}

// Raw posts a body as is; resp is decoded from msgpack or JSON by the reply's
// content type.
func (s *Server) Raw(path, contentType string, body []byte, resp any) (status, size int, err error) {
	req, err := http.NewRequest(http.MethodPost, s.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", contentType)
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	r, err := Client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return r.StatusCode, 0, err
	}
	isJSON := strings.Contains(r.Header.Get("Content-Type"), "json")
	if r.StatusCode != http.StatusOK {
		var e struct {
			Error *aci.Error `msgpack:"error" json:"error"`
		}
		if derr := decode(isJSON, b, &e); derr != nil || e.Error == nil {
			return r.StatusCode, len(b), fmt.Errorf("status %d: %q", r.StatusCode, b)
		}
		return r.StatusCode, len(b), e.Error
	}
	if resp != nil {
		if err := decode(isJSON, b, resp); err != nil {
			return r.StatusCode, len(b), err
		}
	}
	return r.StatusCode, len(b), nil
}

func decode(isJSON bool, b []byte, v any) error {
	if isJSON {
		return json.Unmarshal(b, v)
	}
	return msgpack.Unmarshal(b, v)
}

// WaitEnv waits, up to 20 s, until the shell condition cond holds inside
// env's sandbox (a file written, a process gone): tests gate on the state
// they need rather than on a fixed wait.
func (s *Server) WaitEnv(t testing.TB, envID, cond string) {
	t.Helper()
	c, ok := s.Server.EnvGuest(envID)
	if !ok {
		t.Fatalf("wait in env %s: no live sandbox", envID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script := "i=0; while [ $i -lt 400 ]; do if " + cond + "; then exit 0; fi; sleep 0.05; i=$((i+1)); done; exit 1"
	r, err := c.Exec(ctx, wire.ExecArgs{Shell: script, TimeoutMS: 25000})
	if err != nil {
		t.Fatalf("wait in env %s for %q: %v", envID, cond, err)
	}
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("env %s: %q did not hold within 20 s", envID, cond)
	}
}
