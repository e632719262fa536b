package session

import (
	"context"
	"fmt"

	"github.com/runtimectl/runtimectl/engine"
)

// The engine seam is package engine: everything session asks of an engine goes through
// engine.Runtimes (a session's runtime: a container on Docker, a pod on Kubernetes),
// engine.Storage (its volumes: a named volume pair on Docker, two PersistentVolumeClaims on
// Kubernetes) and engine.Pools, in the engine's neutral types and errors, and the abilities
// that not every engine has (engine.Measurer, engine.LogReader, engine.StatsReader,
// engine.Networker, engine.Installer, engine.Egress) are found by type assertion. Nothing else in session
// knows which engine it talks to; where the engines differ (Kubernetes deletes the pod on stop,
// so a start makes it again from the volumes' settings) the common path already covers both.

// Runtimes drives sessions' runtimes (engine.Runtimes).
type Runtimes = engine.Runtimes

// Storage manages sessions' volumes, with the session's settings on them (engine.Storage).
type Storage = engine.Storage

// Pools is what warm pools need of an engine beyond Runtimes and Storage (engine.Pools).
type Pools = engine.Pools

// Egress runs the egress proxies of sessions with allowed hosts (engine.Egress), an ability
// found on the engine.
type Egress = engine.Egress

// ensureNetwork makes the network a --network setting needs, where the engine makes networks.
func (c *Client) ensureNetwork(ctx context.Context, setting string) error {
	if n, ok := c.eng.(engine.Networker); ok {
		return n.EnsureNetwork(ctx, setting)
	}
	return nil
}

// unsupported is the error of a verb that needs an ability the engine does not have.
func (c *Client) unsupported(what string) error {
	return fmt.Errorf("%w: %s: the %s engine does not offer it", ErrInvalid, what, c.backend)
}
