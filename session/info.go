package session

import (
	"context"
	"errors"

	"github.com/runtimectl/runtimectl/engine"
)

// noRuntime is the state of a session that has volumes and no runtime: its container was
// removed (Docker), or it was stopped (where a stop removes the runtime: Kubernetes deletes the
// pod and keeps the claims).
func (c *Client) noRuntime() State {
	if c.ctr.StopRemoves() {
		return StateStopped
	}
	return StateRemoved
}

// Info returns session name's line of List without starting it or reaching its agent: the
// language, image, creation time and owner recorded on its volume, and its runtime's state
// (see List for a session without a runtime). Executions is -1: Session.Status counts them.
// ErrNotFound when the session has no volume.
func (c *Client) Info(ctx context.Context, name string) (Info, bool, error) {
	st, err := c.RecordedSettings(ctx, name)
	if err != nil {
		return Info{}, false, err
	}
	in := Info{Name: name, Lang: st.Lang, Image: st.Image, Created: st.Created, Executions: -1, Owner: st.Owner, State: c.noRuntime()}
	ci, err := c.ctr.Inspect(ctx, name)
	switch {
	case err == nil:
		in.State = ci.State
	case !errors.Is(err, engine.ErrNotFound):
		return in, false, err
	}
	return in, ci.Running, nil
}
