// Package rollout drives policies against an env server: through the Go
// client of the trainer-facing API (envserver/api/client), policies (a
// task's scripted solution, random valid actions, any OpenAI-compatible
// chat-completions endpoint), and a
// batch runner that runs a matrix of tasks × seeds × replicas with bounded
// concurrency, retries infrastructure failures on a fresh env, resumes a
// half-done run from the trajectories it already wrote, and summarizes.
package rollout

import (
	"net/http"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api/client"
)

// Client calls one env server over HTTP with msgpack bodies: the one Go
// client of the API, shared with bench.
type Client = client.Client

// NewClient returns a client of the server at baseURL ("http://host:port").
// A nil hc means a client with a 5-minute overall timeout per call that
// counts its bytes on the wire.
func NewClient(baseURL, token string, hc *http.Client) *Client {
	return client.New(baseURL, token, hc)
}

// isInfra reports whether a failure belongs to the infrastructure (the
// sandbox died, setup failed, the pool or a deadline ran out) rather than to
// the agent or the request.
func isInfra(code aci.Code) bool { return code.Retryable() }
