package tcsession

import (
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
)

// The session's root filesystem is read-only and testcontainers copies files through "/", which
// the engine refuses; these copy through the session library instead (into /workspace, the
// session's volume, owned by the session's user), with testcontainers' signatures. A relative
// container path is under /workspace; a path outside it is refused.

// CopyToContainer writes fileContent as the file containerFilePath in the session, with the
// permissions of fileMode.
func (c *Container) CopyToContainer(ctx context.Context, fileContent []byte, containerFilePath string, fileMode int64) error {
	dir, err := os.MkdirTemp("", "tcsession-copy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, path.Base(containerFilePath))
	if err := os.WriteFile(src, fileContent, 0o600); err != nil {
		return err
	}
	if err := os.Chmod(src, os.FileMode(fileMode).Perm()); err != nil {
		return err
	}
	if err := c.client.CopyTo(ctx, c.name, src, containerFilePath); err != nil {
		return fmt.Errorf("copy to %s in session %q: %w", containerFilePath, c.name, err)
	}
	return nil
}

// CopyFileToContainer copies the host file hostFilePath to containerFilePath in the session,
// with the permissions of fileMode.
func (c *Container) CopyFileToContainer(ctx context.Context, hostFilePath string, containerFilePath string, fileMode int64) error {
	b, err := os.ReadFile(hostFilePath)
	if err != nil {
		return fmt.Errorf("copy %s to session %q: %w", hostFilePath, c.name, err)
	}
	return c.CopyToContainer(ctx, b, containerFilePath, fileMode)
}

// CopyDirToContainer copies the host folder hostDirPath into the session's folder
// containerParentPath, keeping its files' permissions (fileMode is not used).
func (c *Container) CopyDirToContainer(ctx context.Context, hostDirPath string, containerParentPath string, fileMode int64) error {
	if err := c.client.CopyTo(ctx, c.name, hostDirPath, containerParentPath); err != nil {
		return fmt.Errorf("copy %s into %s in session %q: %w", hostDirPath, containerParentPath, c.name, err)
	}
	return nil
}
