package session

import (
	"context"
	"errors"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/volumes"
)

// ownerLabels are the container labels that name a session's owner.
func ownerLabels(owner string) map[string]string {
	if owner == "" {
		return nil
	}
	return map[string]string{containers.LabelOwner: owner}
}

// RecordedSettings returns the settings recorded on the session's volume when it was made
// (language, image, limits, owner); ErrNotFound when the session has no volume. It starts
// nothing.
func (c *Client) RecordedSettings(ctx context.Context, name string) (Settings, error) {
	if err := ValidateName(name); err != nil {
		return Settings{}, err
	}
	vol, err := c.vol.Inspect(ctx, name)
	if errors.Is(err, volumes.ErrNotFound) {
		return Settings{}, advice.Errorf("%w %q: %s", ErrNotFound, name, adviseStart(name))
	}
	if err != nil {
		return Settings{}, err
	}
	return decodeSettings(vol.Settings)
}
