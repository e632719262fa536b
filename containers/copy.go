package containers

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/docker/docker/api/types/container"
)

// CopyFrom returns a tar stream of path in the session's container (running or not; the
// volume is read through the container's mounts).
func (m *Manager) CopyFrom(ctx context.Context, session, path string) (io.ReadCloser, error) {
	rc, _, err := m.api.CopyFromContainer(ctx, Name(session), path)
	if err != nil {
		return nil, fmt.Errorf("copy %s from session %q: %w", path, session, classify(err))
	}
	return rc, nil
}

// CopyTo extracts the tar stream content into dir in the session's container.
func (m *Manager) CopyTo(ctx context.Context, session, dir string, content io.Reader) error {
	if err := m.api.CopyToContainer(ctx, Name(session), dir, content, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("copy into %s of session %q: %w", dir, session, classify(err))
	}
	return nil
}

// PathInfo describes a path in a session's container.
type PathInfo struct {
	Exists bool
	IsDir  bool
	Size   int64
}

// Stat describes path in the session's container (running or not).
func (m *Manager) Stat(ctx context.Context, session, path string) (PathInfo, error) {
	st, err := m.api.ContainerStatPath(ctx, Name(session), path)
	if err != nil {
		if err = classify(err); errors.Is(err, ErrNotFound) {
			return PathInfo{}, nil
		}
		return PathInfo{}, fmt.Errorf("stat %s in session %q: %w", path, session, err)
	}
	return PathInfo{Exists: true, IsDir: st.Mode.IsDir(), Size: st.Size}, nil
}
