package session

import (
	"context"
	"errors"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// ownerLabels are the container labels that name a session's owner.
func ownerLabels(owner string) map[string]string {
	if owner == "" {
		return nil
	}
	return map[string]string{contract.LabelOwner: owner}
}

// RecordedSettings returns the settings recorded on the session's volume when it was made
// (language, image, limits, owner); ErrNotFound when the session has no volume. It starts
// nothing.
func (c *Client) RecordedSettings(ctx context.Context, name string) (Settings, error) {
	if err := ValidateName(name); err != nil {
		return Settings{}, err
	}
	vol, err := c.vol.Inspect(ctx, name)
	if errors.Is(err, engine.ErrNotFound) {
		return Settings{}, advice.Errorf("%w %q: %s", ErrNotFound, name, adviseStart(name))
	}
	if err != nil {
		return Settings{}, err
	}
	return decodeSettings(vol.Settings)
}
