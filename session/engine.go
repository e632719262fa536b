package session

import (
	"context"

	"github.com/runtimectl/runtimectl/engine"
)

// Engine is what runtimectl shows of the engine.
type Engine = engine.About

// Engine asks the engine for its version (for `runtimectl version` and `doctor`); an engine
// that cannot be reached is engine.ErrUnreachable.
func (c *Client) Engine(ctx context.Context) (Engine, error) {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	return c.ctr.About(ctx)
}

// Host returns the address of the engine as the client dials it.
func (c *Client) Host() string { return c.ctr.Host() }
