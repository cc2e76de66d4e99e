// Package rollout drives policies against an env server: a small HTTP client
// of the trainer-facing API, policies (a task's scripted solution, random
// valid actions, any OpenAI-compatible chat-completions endpoint), and a
// batch runner that runs a matrix of tasks × seeds × replicas with bounded
// concurrency, retries infrastructure failures on a fresh env, resumes a
// half-done run from the trajectories it already wrote, and summarizes.
package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

// Client calls one env server over HTTP with msgpack bodies.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client of the server at baseURL ("http://host:port").
// A nil hc means a client with a 5-minute overall timeout per call.
func NewClient(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 5 * time.Minute}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, http: hc}
}

// Spec is GET /v1/spec.
func (c *Client) Spec(ctx context.Context) (*api.Spec, error) {
	var s api.Spec
	return &s, c.do(ctx, http.MethodGet, "/v1/spec", nil, &s)
}

// Reset is POST /v1/reset.
func (c *Client) Reset(ctx context.Context, req *api.ResetRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	return &r, c.do(ctx, http.MethodPost, "/v1/reset", req, &r)
}

// Step is POST /v1/step.
func (c *Client) Step(ctx context.Context, req *api.StepRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	return &r, c.do(ctx, http.MethodPost, "/v1/step", req, &r)
}

// Fork is POST /v1/fork.
func (c *Client) Fork(ctx context.Context, req *api.ForkRequest) (*api.BatchReply, error) {
	var r api.BatchReply
	return &r, c.do(ctx, http.MethodPost, "/v1/fork", req, &r)
}

// Close is POST /v1/close.
func (c *Client) Close(ctx context.Context, envIDs ...string) error {
	var r api.CloseReply
	return c.do(ctx, http.MethodPost, "/v1/close", &api.CloseRequest{EnvIDs: envIDs}, &r)
}

// Episode is GET /v1/episodes/{id}.
func (c *Client) Episode(ctx context.Context, id string) (*trajectory.Trajectory, error) {
	var t trajectory.Trajectory
	return &t, c.do(ctx, http.MethodGet, "/v1/episodes/"+url.PathEscape(id), nil, &t)
}

// do sends req (msgpack) and decodes the reply into resp. A whole-request
// failure the server reports comes back as its *aci.Error; a transport
// failure is wrapped as is.
func (c *Client) do(ctx context.Context, method, path string, req, resp any) error {
	var body io.Reader
	if req != nil {
		b, err := msgpack.Marshal(req)
		if err != nil {
			return fmt.Errorf("%s: encoding request: %w", path, err)
		}
		body = bytes.NewReader(b)
	}
	hr, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return err
	}
	if req != nil {
		hr.Header.Set("Content-Type", "application/msgpack")
	}
	hr.Header.Set("Accept", "application/msgpack")
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	r, err := c.http.Do(hr)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return fmt.Errorf("%s: reading reply: %w", path, err)
	}
	isJSON := strings.Contains(r.Header.Get("Content-Type"), "json")
	if r.StatusCode != http.StatusOK {
		var e api.ErrorReply
		if decode(isJSON, b, &e) == nil && e.Error != nil {
			return e.Error
		}
		return fmt.Errorf("%s: status %d: %.200q", path, r.StatusCode, b)
	}
	if err := decode(isJSON, b, resp); err != nil {
		return fmt.Errorf("%s: decoding reply: %w", path, err)
	}
	return nil
}

func decode(isJSON bool, b []byte, v any) error {
	if isJSON {
		return json.Unmarshal(b, v)
	}
	return msgpack.Unmarshal(b, v)
}

// isInfra reports whether a failure belongs to the infrastructure (the
// sandbox died, setup failed, the pool or a deadline ran out) rather than to
// the agent or the request.
func isInfra(code aci.Code) bool { return code.Retryable() }
