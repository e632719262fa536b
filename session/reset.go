package session

import (
	"context"
	"fmt"

	"github.com/runtimectl/runtimectl/execproto"
)

// Reset restarts the session's interpreter with an empty state and saves that state as its
// latest snapshot, so that a restart after it comes back empty too; the workspace's files, the
// history and the older snapshots stay (RestoreSnapshot goes back to one). It is a Jupyter
// kernel's clean restart.
func (s *Session) Reset(ctx context.Context) (RestoreInfo, error) {
	info, err := s.RestoreSnapshot(ctx, execproto.EmptyState)
	if err != nil {
		return info, fmt.Errorf("reset session %q: %w", s.name, err)
	}
	if _, err := s.Snapshot(ctx); err != nil {
		return info, fmt.Errorf("reset session %q: save the empty state: %w", s.name, err)
	}
	return info, nil
}
