package session

import (
	"context"

	"github.com/runtimectl/runtimectl/containers"
)

// Engine is what runtimectl shows of the Docker engine.
type Engine = containers.Engine

// Engine asks the Docker engine for its version (for `runtimectl version` and `doctor`); an
// engine that cannot be reached is containers.ErrUnreachable.
func (c *Client) Engine(ctx context.Context) (Engine, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	return c.ctr.Engine(ctx)
}

// Host returns the address of the engine as the client dials it.
func (c *Client) Host() string { return c.ctr.Host() }
