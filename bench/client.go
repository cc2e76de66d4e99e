package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/vmihailenco/msgpack/v5"
)

// Client speaks the trainer-facing API with msgpack bodies over keep-alive
// HTTP, the way the Python client does, and counts every byte that crosses
// its TCP connections (headers included): that count is "bytes on the wire".
type Client struct {
	base  string
	token string
	http  *http.Client
	sent  atomic.Int64
	recv  atomic.Int64
}

// NewClient returns a client for the server at base (http://host:port).
func NewClient(base, token string) *Client {
	c := &Client{base: strings.TrimRight(base, "/"), token: token}
	d := &net.Dialer{Timeout: 10 * time.Second}
	c.http = &http.Client{
		Timeout: 5 * time.Minute, // a fork of 16 or a cold reset can take a while
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

// Call posts req as msgpack to path and decodes a 200 reply into resp. A
// non-200 reply comes back as its typed *aci.Error.
func (c *Client) Call(ctx context.Context, path string, req, resp any) error {
	body, err := msgpack.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	b, status, err := c.do(ctx, http.MethodPost, path, body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		var e api.ErrorReply
		if derr := msgpack.Unmarshal(b, &e); derr != nil || e.Error == nil {
			return fmt.Errorf("%s: status %d: %.200q", path, status, b)
		}
		return fmt.Errorf("%s: %w", path, e.Error)
	}
	if resp == nil {
		return nil
	}
	if err := msgpack.Unmarshal(b, resp); err != nil {
		return fmt.Errorf("decode %s reply: %w", path, err)
	}
	return nil
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) ([]byte, int, error) {
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

// Reset posts /v1/reset and fails on the first env whose slot holds an error.
func (c *Client) Reset(ctx context.Context, req *api.ResetRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	if err := c.Call(ctx, "/v1/reset", req, &r); err != nil {
		return nil, err
	}
	return &r, firstError(&r, len(req.Envs))
}

// Step posts /v1/step. Per-env errors stay in their slots: a rollout counts
// them rather than stopping.
func (c *Client) Step(ctx context.Context, req *api.StepRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	if err := c.Call(ctx, "/v1/step", req, &r); err != nil {
		return nil, err
	}
	if len(r.Results) != len(req.Steps) {
		return nil, fmt.Errorf("step: got %d results; want %d", len(r.Results), len(req.Steps))
	}
	return &r, nil
}

// Fork posts /v1/fork and fails on the first child whose slot holds an error.
func (c *Client) Fork(ctx context.Context, req *api.ForkRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	if err := c.Call(ctx, "/v1/fork", req, &r); err != nil {
		return nil, err
	}
	return &r, firstError(&r, req.N)
}

// Close posts /v1/close.
func (c *Client) Close(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	return c.Call(ctx, "/v1/close", &api.CloseRequest{EnvIDs: ids}, nil)
}

// Spec fetches /v1/spec.
func (c *Client) Spec(ctx context.Context) (*api.Spec, error) {
	b, status, err := c.do(ctx, http.MethodGet, "/v1/spec", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("spec: status %d", status)
	}
	var s api.Spec
	if err := msgpack.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	return &s, nil
}

// Metrics fetches /metrics and returns each sample keyed by its series as
// the exposition writes it, e.g. `shinken_frames_total{result="encoded"}`.
func (c *Client) Metrics(ctx context.Context) (map[string]float64, error) {
	b, status, err := c.do(ctx, http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("metrics: status %d", status)
	}
	return parseMetrics(b), nil
}

// parseMetrics reads Prometheus text exposition: one "series value" a line.
func parseMetrics(b []byte) map[string]float64 {
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

// firstError returns the first slot error of a reply that should hold want
// results.
func firstError(r *api.BatchReply, want int) error {
	if len(r.Results) != want {
		return fmt.Errorf("got %d results; want %d", len(r.Results), want)
	}
	for _, res := range r.Results {
		if res.Error != nil {
			return fmt.Errorf("env %s: %w", res.EnvID, res.Error)
		}
	}
	return nil
}

// frameBytes is the size of the frame an observation shows, 0 when the reply
// did not carry it.
func frameBytes(r *api.BatchReply, obs *aci.Observation) int {
	if obs == nil {
		return 0
	}
	return len(r.Frames[obs.Frame])
}
