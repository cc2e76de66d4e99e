package envserver_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
)

// TestConnectionLimits: the token is checked before a body is read, a
// slow client is cut off at the read timeout, and connections from one
// address are capped; the server keeps serving through all of it. Every
// wait is bounded; nothing leaves loopback.
func TestConnectionLimits(t *testing.T) {
	const perIP = 8
	s := servertest.Start(t, servertest.Options{Pool: 1, Token: "s3cret", Edit: func(c *configs.Server) {
		c.ReadTimeout = configs.Duration(time.Second)
		c.MaxConnsPerIP = perIP
	}})
	// A second server whose read timeout outlasts the client's deadline:
	// there, only a server that did not wait for the body can answer.
	patient := servertest.Start(t, servertest.Options{Pool: 1, Token: "s3cret", Edit: func(c *configs.Server) {
		c.ReadTimeout = configs.Duration(10 * time.Minute)
	}})
	dialTo := func(t *testing.T, s *servertest.Server) net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.URL, "http://"), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	addr := strings.TrimPrefix(s.URL, "http://")
	dial := func(t *testing.T) net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(20 * time.Second))
		return c
	}
	serving := func(t *testing.T) {
		t.Helper()
		if _, _, err := s.Call("/v1/close", api.CloseRequest{EnvIDs: []string{"none"}}, nil); err != nil {
			t.Fatalf("server stopped serving: %v", err)
		}
	}

	t.Run("unauthorized body never read", func(t *testing.T) {
		c := dialTo(t, patient)
		defer c.Close()
		// Headers announce 8 MB that are never sent: a server that read
		// the body first would wait for it for its 10-minute read
		// timeout, past the client's 20 s deadline.
		fmt.Fprintf(c, "POST /v1/step HTTP/1.1\r\nHost: x\r\nContent-Type: application/msgpack\r\nContent-Length: 8000000\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no reply to unauthenticated headers (the server waits for the body?): %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("status %d; want 401", resp.StatusCode)
		}
		serving(t)
	})

	t.Run("slow loris cut off", func(t *testing.T) {
		c := dial(t)
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/step HTTP/1.1\r\nHost: x\r\n")
		// Never finish the headers: the server must close the connection
		// (the read fails) within the deadline set by dial.
		_, err := io.ReadAll(c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("a connection with unfinished headers stayed open 20 s; want it closed after the 1 s read timeout")
		}
		serving(t)
	})

	t.Run("connections per address capped", func(t *testing.T) {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		servertest.Client.CloseIdleConnections()
		refusedAt := 0
		for i := 1; i <= perIP+1 && refusedAt == 0; i++ {
			c := dial(t)
			conns = append(conns, c)
			// A complete request each, so the server holds the connection.
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 200 {
				refusedAt = i
				continue
			}
			resp.Body.Close()
		}
		if refusedAt == 0 {
			t.Fatalf("%d connections from one address all served; want at most max_conns_per_ip %d", perIP+1, perIP)
		}
		if refusedAt == 1 {
			t.Fatalf("the first connection was refused")
		}
		for _, c := range conns {
			c.Close()
		}
		conns = nil
		// Once they are closed, the address is served again.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, _, err := s.Call("/v1/close", api.CloseRequest{EnvIDs: []string{"none"}}, nil)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("not served again after closing the connections: %v", err)
			}
		}
	})
}

// TestTokenFile: the token is read from a file, trimmed; an empty or
// missing file is an error, not an open server.
func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "token")
	os.WriteFile(path, []byte("s3cret\n"), 0o600)
	c := &configs.Server{TokenFile: path}
	if err := c.ReadToken(); err != nil || c.Token != "s3cret" {
		t.Errorf("token file: got %q, %v; want s3cret", c.Token, err)
	}
	os.WriteFile(path, []byte("\n"), 0o600)
	if err := (&configs.Server{TokenFile: path}).ReadToken(); err == nil {
		t.Errorf("empty token file: got no error")
	}
	if err := (&configs.Server{TokenFile: filepath.Join(dir, "none")}).ReadToken(); err == nil {
		t.Errorf("missing token file: got no error")
	}
}
