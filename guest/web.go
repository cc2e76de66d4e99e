package guest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/webapp"
	"github.com/shinken-rl/shinken/guest/wire"
)

// The sandbox's web host (docs/architecture.md, "Web apps"): guestd serves
// the task's offline web apps on the sandbox's loopback, one listener for
// all of them, routed by the Host header (shop.test, mail.test, ...). It is
// guestd's own code, under guestd's identity: the agent cannot signal,
// trace or restart it, the scoring freeze does not stop it, and the apps'
// state never touches a file the agent can write. At scoring guestd hands
// each app's State to the verifier as $SK_WEB/<app>.json.

// WebPort is the loopback port the web host listens on where it can (a
// sandbox's own network namespace, guestd root); elsewhere it takes any
// free port and reports it.
const WebPort = 80

// webMaxConns bounds the connections the web host serves at once; past it
// new ones wait in the kernel's backlog.
const webMaxConns = 64

// webHost is the web host: its listener (started on first use) and the
// apps it serves.
type webHost struct {
	mu   sync.Mutex
	apps map[string]webapp.App
	srv  *http.Server
	addr string // host:port it listens on; "" until started
}

// serve is the web method: it starts (or replaces) app a.App built from
// a.Data and reports its URL.
func (w *webHost) serve(a wire.WebArgs, logf func(string, ...any)) (*wire.WebResult, error) {
	if a.App == "" {
		return nil, aci.Errorf(aci.CodeBadRequest, "web: need app (one of %v)", webapp.Names())
	}
	app, err := webapp.New(a.App, a.Data, nil)
	if err != nil {
		return nil, aci.Errorf(aci.CodeBadRequest, "%v", err)
	}
	if _, err := w.ensure(logf); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.apps == nil {
		w.apps = map[string]webapp.App{}
	}
	w.apps[a.App] = app
	return &wire.WebResult{URL: "http://" + webapp.Host(a.App) + w.portSuffix() + "/", Addr: w.addr}, nil
}

// ensure starts the web host if it is not running and returns the
// address it listens on.
func (w *webHost) ensure(logf func(string, ...any)) (string, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.srv == nil {
		if err := w.start(logf); err != nil {
			return "", err
		}
	}
	return w.addr, nil
}

// start binds the listener (mu held).
func (w *webHost) start(logf func(string, ...any)) error {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", WebPort))
	if err != nil {
		// Not root in a namespace of its own (an unconfined sandbox, a
		// test): any free port.
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return aci.Errorf(aci.CodeInternal, "web: listen: %v", err)
		}
	}
	w.addr = ln.Addr().String()
	w.srv = &http.Server{
		Handler:           w,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          nil,
	}
	go func() {
		if err := w.srv.Serve(limitListener(ln, webMaxConns)); err != nil && !errors.Is(err, http.ErrServerClosed) && logf != nil {
			logf("guest: web host: %v", err)
		}
	}()
	return nil
}

// portSuffix is ":port" when the host is not on WebPort (mu held).
func (w *webHost) portSuffix() string {
	if _, port, _ := net.SplitHostPort(w.addr); port != "" && port != fmt.Sprint(WebPort) {
		return ":" + port
	}
	return ""
}

// ServeHTTP routes a request to the app its Host names.
func (w *webHost) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	name, ok := strings.CutSuffix(strings.ToLower(host), ".test")
	w.mu.Lock()
	app := w.apps[name]
	w.mu.Unlock()
	if !ok || app == nil {
		rw.Header().Set("Content-Type", "text/html; charset=utf-8")
		rw.WriteHeader(http.StatusNotFound)
		fmt.Fprint(rw, "<!doctype html><title>Site not found</title><h1>This site can’t be reached</h1><p>No site is served at this address.</p>")
		return
	}
	app.ServeHTTP(rw, r)
}

// clear drops every app (a reset in place: the next instance serves its
// own); the listener stays.
func (w *webHost) clear() {
	w.mu.Lock()
	w.apps = nil
	w.mu.Unlock()
}

// writeStates writes each app's State into dir as <app>.json, owned by
// id (the verifier's identity), and returns how many.
func (w *webHost) writeStates(dir string, id *Identity) (int, error) {
	w.mu.Lock()
	apps := make(map[string]webapp.App, len(w.apps))
	for n, a := range w.apps {
		apps[n] = a
	}
	w.mu.Unlock()
	if len(apps) == 0 {
		return 0, nil
	}
	for n, a := range apps {
		b, err := a.State()
		if err != nil {
			return 0, fmt.Errorf("web: %s state: %w", n, err)
		}
		if err := handOver(dir, n+".json", b, id); err != nil {
			return 0, err
		}
	}
	return len(apps), nil
}

// handOver writes name into dir, a directory of the verifier's own home
// (created 0700 on first use), as a 0600 file; both are owned by id, the
// verifier's identity, so only the verifier reads them.
func handOver(dir, name string, data []byte, id *Identity) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return err
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return err
	}
	if !id.distinct() {
		return nil
	}
	if err := os.Chown(p, id.UID, id.GID); err != nil {
		return err
	}
	return os.Chown(dir, id.UID, id.GID)
}

// close stops the listener.
func (w *webHost) close() {
	w.mu.Lock()
	srv := w.srv
	w.srv = nil
	w.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		srv.Close()
	}
}

// limitListener accepts at most n connections at once.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limitedListener{Listener: ln, sem: make(chan struct{}, n)}
}

type limitedListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitedListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
