package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A folder deeper than PATH_MAX is measured, with what it holds at the bottom; holes take
// nothing; a file linked twice counts once; a link is not followed.
func TestMeasureTreeDeepSparseAndLinked(t *testing.T) {
	dir := t.TempDir()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	require.NoError(t, err)
	const depth = 3000
	name := "level-dir" // 3000 × 10 characters: far past PATH_MAX (4096)
	for i := 0; i < depth; i++ {
		require.NoError(t, unix.Mkdirat(fd, name, 0o755))
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		require.NoError(t, err)
		unix.Close(fd)
		fd = sub
	}
	f, err := unix.Openat(fd, "data", unix.O_WRONLY|unix.O_CREAT, 0o644)
	require.NoError(t, err)
	_, err = unix.Write(f, make([]byte, 1<<20))
	require.NoError(t, err)
	unix.Fsync(f)
	unix.Close(f)
	unix.Close(fd)

	empty, err := MeasureTree(dir)
	require.NoError(t, err)
	assert.Equal(t, depth, empty.Depth)
	assert.Zero(t, empty.Skipped)
	assert.GreaterOrEqual(t, empty.Bytes, int64(1<<20), "the file at the bottom is counted")

	big := filepath.Join(dir, "big")
	writeFile(t, big, 4<<20)
	require.NoError(t, os.Link(big, filepath.Join(dir, "big-again")))
	sparse, err := os.Create(filepath.Join(dir, "sparse"))
	require.NoError(t, err)
	require.NoError(t, sparse.Truncate(10<<30))
	sparse.Close()
	require.NoError(t, os.Symlink("/", filepath.Join(dir, "root-link")))
	u, err := MeasureTree(dir)
	require.NoError(t, err)
	grew := u.Bytes - empty.Bytes
	assert.GreaterOrEqual(t, grew, int64(4<<20), "the 4 MiB file")
	assert.Less(t, grew, int64(5<<20), "counted once, the holes and the link's target not at all")
	assert.Equal(t, empty.Entries+3+1, u.Entries)
}

func writeFile(t *testing.T, path string, n int) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, make([]byte, n), 0o644))
	f, err := os.Open(path)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	f.Close()
}

func TestMeasureTreeRefusesALink(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Symlink(dir, filepath.Join(dir, "l")))
	_, err := MeasureTree(filepath.Join(dir, "l"))
	assert.Error(t, err)
}
