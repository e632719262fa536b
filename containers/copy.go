package containers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/runtimectl/runtimectl/engine"
)

// CopyFrom returns a tar stream of path in the session's container (running or not; the
// volume is read through the container's mounts).
func (m *Manager) CopyFrom(ctx context.Context, session, path string) (io.ReadCloser, error) {
	rc, _, err := m.api.CopyFromContainer(ctx, Name(session), path)
	if err != nil {
		return nil, fmt.Errorf("copy %s from session %q: %w", path, session, m.classify(err))
	}
	return rc, nil
}

// CopyTo extracts the tar stream content into dir in the session's container.
func (m *Manager) CopyTo(ctx context.Context, session, dir string, content io.Reader) error {
	if err := m.api.CopyToContainer(ctx, Name(session), dir, content, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("copy into %s of session %q: %w", dir, session, m.classify(err))
	}
	return nil
}

// PathInfo describes a path in a session's container (engine.PathInfo).
type PathInfo = engine.PathInfo

// Stat describes path in the session's container (running or not).
func (m *Manager) Stat(ctx context.Context, session, path string) (PathInfo, error) {
	st, err := m.api.ContainerStatPath(ctx, Name(session), path)
	if err != nil {
		if err = m.classify(err); errors.Is(err, ErrNotFound) {
			return PathInfo{}, nil
		}
		return PathInfo{}, fmt.Errorf("stat %s in session %q: %w", path, session, err)
	}
	info := PathInfo{Exists: true, IsDir: st.Mode.IsDir(), Size: st.Size}
	if st.Mode&os.ModeSymlink != 0 {
		info.Link = st.LinkTarget
		if info.Link == "" {
			info.Link = "?" // a link whose target the engine did not say: never taken for a folder
		}
	}
	return info, nil
}

// Logs returns what `docker logs` shows of the session's container (the agent's own stdout and
// stderr, never the code's output), at most max bytes of it.
func (m *Manager) Logs(ctx context.Context, session string, max int64) ([]byte, error) {
	rc, err := m.api.ContainerLogs(ctx, Name(session), container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return nil, fmt.Errorf("logs of session %q: %w", session, m.classify(err))
	}
	defer rc.Close()
	var buf bytes.Buffer
	w := &capWriter{w: &buf, left: max}
	if _, err := stdcopy.StdCopy(w, w, rc); err != nil && !errors.Is(err, errCapReached) {
		return buf.Bytes(), fmt.Errorf("logs of session %q: %w", session, err)
	}
	return buf.Bytes(), nil
}

var errCapReached = errors.New("cap reached")

// capWriter passes on at most left bytes, then fails with errCapReached.
type capWriter struct {
	w    io.Writer
	left int64
}

func (c *capWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		n, _ := c.w.Write(p[:c.left])
		c.left = 0
		return n, errCapReached
	}
	c.left -= int64(len(p))
	return c.w.Write(p)
}
