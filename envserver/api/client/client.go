// Package client is the one Go client of the trainer-facing API (package
// api): msgpack bodies over keep-alive HTTP, the way the Python client
// speaks it, counting every byte that crosses its connections (headers
// included). rollout, bench and the tests use it.
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

// Client calls one env server. It is safe for concurrent use.
type Client struct {
	base  string
	token string
	http  *http.Client
	sent  atomic.Int64
	recv  atomic.Int64
}

// New returns a client of the server at base ("http://host:port") with its
// own keep-alive transport, whose bytes WireBytes counts. Each call may take
// up to 5 minutes (a fork of 16 or a cold reset can take a while).
func New(base, token string) *Client {
	c := &Client{base: strings.TrimRight(base, "/"), token: token}
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

// NewWithHTTP returns a client that sends through hc (its bytes are not
// counted).
func NewWithHTTP(base, token string, hc *http.Client) *Client {
	return &Client{base: strings.TrimRight(base, "/"), token: token, http: hc}
}

// WireBytes returns the bytes sent and received on the client's
// connections so far.
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

// Reset is POST /v1/reset. One env's failure stays in its slot.
func (c *Client) Reset(ctx context.Context, req *api.ResetRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	if err := c.Do(ctx, http.MethodPost, "/v1/reset", req, &r); err != nil {
		return nil, err
	}
	return &r, count(&r, len(req.Envs))
}

// Step is POST /v1/step. One env's failure stays in its slot.
func (c *Client) Step(ctx context.Context, req *api.StepRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	if err := c.Do(ctx, http.MethodPost, "/v1/step", req, &r); err != nil {
		return nil, err
	}
	return &r, count(&r, len(req.Steps))
}

// Fork is POST /v1/fork. One child's failure stays in its slot.
func (c *Client) Fork(ctx context.Context, req *api.ForkRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	if err := c.Do(ctx, http.MethodPost, "/v1/fork", req, &r); err != nil {
		return nil, err
	}
	return &r, count(&r, req.N)
}

// Close is POST /v1/close.
func (c *Client) Close(ctx context.Context, envIDs ...string) error {
	if len(envIDs) == 0 {
		return nil
	}
	var r api.CloseReply
	return c.Do(ctx, http.MethodPost, "/v1/close", &api.CloseRequest{EnvIDs: envIDs}, &r)
}

// Checkpoint is POST /v1/checkpoint.
func (c *Client) Checkpoint(ctx context.Context, envID string) (*api.CheckpointReply, error) {
	var r api.CheckpointReply
	return &r, c.Do(ctx, http.MethodPost, "/v1/checkpoint", &api.CheckpointRequest{EnvID: envID}, &r)
}

// DeleteCheckpoints is POST /v1/checkpoint/delete.
func (c *Client) DeleteCheckpoints(ctx context.Context, ids ...string) (*api.CheckpointDeleteReply, error) {
	var r api.CheckpointDeleteReply
	return &r, c.Do(ctx, http.MethodPost, "/v1/checkpoint/delete", &api.CheckpointDeleteRequest{Checkpoints: ids}, &r)
}

// Episode is GET /v1/episodes/{id}.
func (c *Client) Episode(ctx context.Context, id string) (*trajectory.Trajectory, error) {
	var t trajectory.Trajectory
	return &t, c.Do(ctx, http.MethodGet, "/v1/episodes/"+url.PathEscape(id), nil, &t)
}

// Metrics fetches /metrics and returns each sample keyed by its series as
// the exposition writes it, e.g. `shinken_frames_total{result="encoded"}`.
func (c *Client) Metrics(ctx context.Context) (map[string]float64, error) {
	b, status, err := c.roundTrip(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("metrics: status %d", status)
	}
	return ParseMetrics(b), nil
}

// Do sends req (msgpack; nil for none) to path and decodes a 200 reply into
// resp (nil to drop it). A whole-request failure the server reports comes
// back as its typed *aci.Error (wrapped with the path); a transport failure
// is wrapped as is.
func (c *Client) Do(ctx context.Context, method, path string, req, resp any) error {
	var body []byte
	if req != nil {
		var err error
		if body, err = msgpack.Marshal(req); err != nil {
			return fmt.Errorf("%s: encoding request: %w", path, err)
		}
	}
	b, status, err := c.roundTrip(ctx, method, path, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		var e api.ErrorReply
		if derr := msgpack.Unmarshal(b, &e); derr != nil || e.Error == nil {
			if derr := json.Unmarshal(b, &e); derr != nil || e.Error == nil {
				return fmt.Errorf("%s: status %d: %.200q", path, status, b)
			}
		}
		return fmt.Errorf("%s: %w", path, e.Error)
	}
	if resp == nil {
		return nil
	}
	if err := msgpack.Unmarshal(b, resp); err != nil {
		return fmt.Errorf("%s: decoding reply: %w", path, err)
	}
	return nil
}

func (c *Client) roundTrip(ctx context.Context, method, path string, body []byte) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/msgpack")
	}
	req.Header.Set("Accept", "application/msgpack")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	r, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, r.StatusCode, fmt.Errorf("%s: reading reply: %w", path, err)
	}
	return b, r.StatusCode, nil
}

func count(r *api.BatchReply, want int) error {
	if len(r.Results) != want {
		return fmt.Errorf("got %d results; want %d", len(r.Results), want)
	}
	return nil
}

// FirstError returns the first slot error of a reply, nil when every slot
// succeeded.
func FirstError(r *api.BatchReply) error {
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
