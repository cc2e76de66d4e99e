package bench

import (
	"context"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/api/client"
	"github.com/shinken-rl/shinken/rollout"
)

// Client is the trainer API's Go client that rollout drives: bench counts
// the bytes on the wire through it.
type Client = rollout.Client

// NewClient returns a counting client for the server at base.
func NewClient(base, token string) *Client { return client.New(base, token) }

// resetAll resets and fails on the first env whose slot holds an error.
func resetAll(ctx context.Context, c *Client, req *api.ResetRequest) (*api.BatchReply, error) {
	r, err := c.Reset(ctx, req)
	if err != nil {
		return nil, err
	}
	return r, client.FirstError(r)
}

// forkAll forks and fails on the first child whose slot holds an error.
func forkAll(ctx context.Context, c *Client, req *api.ForkRequest) (*api.BatchReply, error) {
	r, err := c.Fork(ctx, req)
	if err != nil {
		return nil, err
	}
	return r, client.FirstError(r)
}

// frameBytes is the size of the frame an observation shows, 0 when the reply
// did not carry it.
func frameBytes(r *api.BatchReply, obs *aci.Observation) int {
	if obs == nil {
		return 0
	}
	return len(r.Frames[obs.Frame])
}
