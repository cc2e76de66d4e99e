// Package client is the Go client of the trainer-facing API
// (docs/api.md): msgpack bodies over keep-alive HTTP, the way the Python
// client speaks it, with every byte that crosses its TCP connections
// counted (headers included). rollout and bench both drive servers through
// it.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

// Client calls one env server.
type Client struct {
	base  string
	token string
	http  *http.Client
	sent  atomic.Int64
	recv  atomic.Int64
}

// New returns a client of the server at baseURL ("http://host:port"). A nil
// hc means a keep-alive client with a 5-minute timeout per call (a fork of
// 16 or a cold reset can take a while) whose connections count their bytes
// (WireBytes); a caller's own hc is used as is and counts nothing.
func New(baseURL, token string, hc *http.Client) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: hc}
	if hc != nil {
		return c
	}
	d := &net.Dialer{Timeout: 10 * time.Second}
	c.http = &http.Client{
		Timeout: 5 * time.Minute,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := d.DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &countingConn{Conn: conn, c: c}, nil
			},
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
	return c
}

// WireBytes returns the bytes sent and received on the client's
// connections so far (0, 0 for a client built on the caller's http.Client).
func (c *Client) WireBytes() (sent, recv int64) { return c.sent.Load(), c.recv.Load() }

// CloseIdle drops the client's idle connections.
func (c *Client) CloseIdle() { c.http.CloseIdleConnections() }

type countingConn struct {
	net.Conn
	c *Client
}

func (cc *countingConn) Read(p []byte) (int, error) {
	n, err := cc.Conn.Read(p)
	cc.c.recv.Add(int64(n))
	return n, err
}

func (cc *countingConn) Write(p []byte) (int, error) {
	n, err := cc.Conn.Write(p)
	cc.c.sent.Add(int64(n))
	return n, err
}

// Spec is GET /v1/spec.
func (c *Client) Spec(ctx context.Context) (*api.Spec, error) {
	var s api.Spec
	return &s, c.Do(ctx, http.MethodGet, "/v1/spec", nil, &s)
}

// Reset is POST /v1/reset. Per-env failures stay in their slots (see
// FirstError).
func (c *Client) Reset(ctx context.Context, req *api.ResetRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	if err := c.Do(ctx, http.MethodPost, "/v1/reset", req, &r); err != nil {
		return nil, err
	}
	return &r, wantResults(&r, len(req.Envs))
}

// Step is POST /v1/step. Per-env failures stay in their slots.
func (c *Client) Step(ctx context.Context, req *api.StepRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	if err := c.Do(ctx, http.MethodPost, "/v1/step", req, &r); err != nil {
		return nil, err
	}
	return &r, wantResults(&r, len(req.Steps))
}

// Fork is POST /v1/fork. Per-child failures stay in their slots.
func (c *Client) Fork(ctx context.Context, req *api.ForkRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	return &r, c.Do(ctx, http.MethodPost, "/v1/fork", req, &r)
}

// Close is POST /v1/close; no ids is no call.
func (c *Client) Close(ctx context.Context, envIDs ...string) error {
	if len(envIDs) == 0 {
		return nil
	}
	var r api.CloseReply
	return c.Do(ctx, http.MethodPost, "/v1/close", &api.CloseRequest{EnvIDs: envIDs}, &r)
}

// Episode is GET /v1/episodes/{id}.
func (c *Client) Episode(ctx context.Context, id string) (*trajectory.Trajectory, error) {
	var t trajectory.Trajectory
	return &t, c.Do(ctx, http.MethodGet, "/v1/episodes/"+url.PathEscape(id), nil, &t)
}

// Metrics fetches /metrics and returns each sample keyed by its series as
// the exposition writes it, e.g. `shinken_frames_total{result="encoded"}`.
func (c *Client) Metrics(ctx context.Context) (map[string]float64, error) {
	b, status, _, err := c.roundTrip(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("metrics: status %d", status)
	}
	return ParseMetrics(b), nil
}

// Do sends req (msgpack; nil for none) and decodes a 200 reply into resp. A
// whole-request failure the server reports comes back as its *aci.Error; a
// transport failure is wrapped as is.
func (c *Client) Do(ctx context.Context, method, path string, req, resp any) error {
	var body []byte
	if req != nil {
		var err error
		if body, err = msgpack.Marshal(req); err != nil {
			return fmt.Errorf("%s: encoding request: %w", path, err)
		}
	}
	b, status, ctype, err := c.roundTrip(ctx, method, path, body)
	if err != nil {
		return err
	}
	isJSON := strings.Contains(ctype, "json")
	if status != http.StatusOK {
		var e api.ErrorReply
		if decode(isJSON, b, &e) == nil && e.Error != nil {
			return e.Error
		}
		return fmt.Errorf("%s: status %d: %.200q", path, status, b)
	}
	if resp == nil {
		return nil
	}
	if err := decode(isJSON, b, resp); err != nil {
		return fmt.Errorf("%s: decoding reply: %w", path, err)
	}
	return nil
}

func (c *Client) roundTrip(ctx context.Context, method, path string, body []byte) ([]byte, int, string, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, 0, "", err
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/msgpack")
	}
	hr.Header.Set("Accept", "application/msgpack")
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	r, err := c.http.Do(hr)
	if err != nil {
		return nil, 0, "", fmt.Errorf("%s: %w", path, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, r.StatusCode, "", fmt.Errorf("%s: reading reply: %w", path, err)
	}
	return b, r.StatusCode, r.Header.Get("Content-Type"), nil
}

func decode(isJSON bool, b []byte, v any) error {
	if isJSON {
		return json.Unmarshal(b, v)
	}
	return msgpack.Unmarshal(b, v)
}

func wantResults(r *api.BatchReply, want int) error {
	if len(r.Results) != want {
		return fmt.Errorf("got %d results; want %d", len(r.Results), want)
	}
	return nil
}

// FirstError returns the first slot error of a reply that should hold want
// results, or an error when it holds another count.
func FirstError(r *api.BatchReply, want int) error {
	if err := wantResults(r, want); err != nil {
		return err
	}
	for _, res := range r.Results {
		if res.Error != nil {
			return fmt.Errorf("env %s: %w", res.EnvID, res.Error)
		}
	}
	return nil
}

// ParseMetrics reads Prometheus text exposition: one "series value" a line.
func ParseMetrics(b []byte) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i <= 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}
