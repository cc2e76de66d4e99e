package bench

import (
	"context"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/api/client"
)

// reset posts /v1/reset through the shared client and fails on the first
// env whose slot holds an error.
func reset(ctx context.Context, c *client.Client, req *api.ResetRequest) (*api.BatchReply, error) {
	r, err := c.Reset(ctx, req)
	if err != nil {
		return nil, err
	}
	return r, client.FirstError(r, len(req.Envs))
}

// fork posts /v1/fork and fails on the first child whose slot holds an error.
func fork(ctx context.Context, c *client.Client, req *api.ForkRequest) (*api.BatchReply, error) {
	r, err := c.Fork(ctx, req)
	if err != nil {
		return nil, err
	}
	return r, client.FirstError(r, req.N)
}

// frameBytes is the size of the frame an observation shows, 0 when the reply
// did not carry it.
func frameBytes(r *api.BatchReply, obs *aci.Observation) int {
	if obs == nil {
		return 0
	}
	return len(r.Frames[obs.Frame])
}
