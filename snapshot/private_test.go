package snapshot

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckPrivateDirRefusesLinksAndFiles(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	require.NoError(t, os.Mkdir(real, 0o700))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(real, link))
	err := CheckPrivateDir(link)
	require.Error(t, err)
	assert.Contains(t, err.Error(), link, "the error names the path")
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	require.Error(t, CheckPrivateDir(file))
	require.Error(t, CheckPrivateDir(filepath.Join(dir, "missing")))
}

func TestCheckPrivateDirMakesItPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.Mkdir(dir, 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, CheckPrivateDir(dir))
	st, err := os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())
}

func TestStoreRefusesALinkedFolder(t *testing.T) {
	dir := t.TempDir()
	elsewhere := t.TempDir()
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(dir, manifestDir)))
	_, err := OpenStore(dir, 0)
	require.Error(t, err, "a snapshots folder that is a link is never written through")
	entries, _ := os.ReadDir(elsewhere)
	assert.Empty(t, entries)
}
