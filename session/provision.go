package session

import (
	"context"
	"errors"
	"fmt"

	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// createVolumes creates the volumes of a new session from its settings: what Start and Prepare
// both make, so that a session is the same set of objects whoever creates its container.
func (c *Client) createVolumes(ctx context.Context, st Settings, o engine.VolumeOptions) error {
	_, err := c.vol.Create(ctx, st.Session, st.Lang, st.Encode(), o)
	return err
}

// Prepare makes a new session ready for a container that the caller creates itself (tcsession
// does, through testcontainers-go): it checks spec and the image as Start does, creates the
// session's volumes (volumeLabels are added to runtimectl's own labels on them) and returns the
// container's spec, from which containers.Config (Docker) builds the same hardened configuration that
// Start creates. A session of that name that exists already (container or volume) is refused.
// Remove(ctx, spec.Name, true) undoes it.
func (c *Client) Prepare(ctx context.Context, spec Spec, volumeLabels map[string]string) (engine.Spec, error) {
	st, err := spec.settings()
	if err != nil {
		return engine.Spec{}, err
	}
	switch err := c.exists(ctx, st.Session); {
	case err == nil:
		return engine.Spec{}, advice.Errorf("%w: session %q exists already; pick another name or %s", ErrInvalid, st.Session, adviseRemove(st.Session))
	case !errors.Is(err, ErrNotFound):
		return engine.Spec{}, err
	}
	if err := c.checkImage(ctx, st); err != nil {
		return engine.Spec{}, err
	}
	if err := c.ensureNetwork(ctx, st.Network); err != nil {
		return engine.Spec{}, err
	}
	if err := c.createVolumes(ctx, st, engine.VolumeOptions{Driver: spec.VolumeOpts, StateDriver: spec.StateVolumeOpts, Labels: volumeLabels}); err != nil {
		return engine.Spec{}, err
	}
	if err := c.startEgress(ctx, st); err != nil { // removed by Remove, with the session
		return engine.Spec{}, err
	}
	return containerSpec(st), nil
}

// Attach returns a handle on the agent of a running session once it answers its hello. Unlike
// Open it never starts the container: a session that is not running is an error that says its
// state.
func (c *Client) Attach(ctx context.Context, name string) (*Session, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	ci, err := c.ctr.Inspect(ctx, name)
	if err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return nil, fmt.Errorf("%w %q: it has no container", ErrNotFound, name)
		}
		return nil, err
	}
	if !ci.Running {
		return nil, fmt.Errorf("session %q is not running (container %s, exit code %d, out of memory: %t); `docker logs %s` may say why", name, ci.State, ci.ExitCode, ci.OOMKilled, ci.Name)
	}
	s := &Session{c: c, name: name, lang: ci.Lang}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s, nil
}
