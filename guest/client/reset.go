package client

import (
	"context"

	"github.com/shinken-rl/shinken/guest/wire"
)

// Reset runs one phase of an in-place reset (wire.MethodReset).
func (c *Client) Reset(ctx context.Context, phase string) (*wire.ResetResult, error) {
	var r wire.ResetResult
	if err := c.call(ctx, wire.MethodReset, wire.ResetArgs{Phase: phase}, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}
