package session_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// Sparse data counts at its apparent size against --disk (issue 28): the copy into a session
// writes a hole's zeros, so a copy in (cp, WriteFile, the server's files route) or a fork
// whose files' apparent size passes the destination's cap is refused before it passes it, and
// leaves nothing behind.
func TestSparseDataCountsAgainstTheDiskCap(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	s := testenv.Start(t, c, session.Spec{Disk: 64 << 20})

	dir := t.TempDir()
	sparse := filepath.Join(dir, "holes.bin")
	f, err := os.Create(sparse)
	require.NoError(t, err)
	_, err = f.WriteString("head")
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30)) // 1 GiB apparent, a few KB of blocks
	require.NoError(t, f.Close())
	err = c.CopyTo(ctx, s.Name(), sparse, "holes.bin")
	require.ErrorIs(t, err, session.ErrInvalid)
	assert.Contains(t, err.Error(), "the copy holds 1GiB (sparse files count at their full size: that is what the copy writes), more than the")
	assert.Contains(t, err.Error(), "disk cap of 64MiB")
	small := filepath.Join(dir, "small.txt")
	require.NoError(t, os.WriteFile(small, []byte("fits\n"), 0o644))
	require.NoError(t, c.CopyTo(ctx, s.Name(), small, "small.txt"), "what fits is copied")

	// A fork of a session that holds a hole its own cap allows (its blocks are few) but whose
	// copy would write 1 GiB into the fork's 64 MiB.
	r, err := s.Exec(ctx, "import os\nwith open('hole.bin', 'wb') as f:\n    f.truncate(1 << 30)\n'holes.bin' in os.listdir('.')", session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "False", *r.Result, "the big copy left nothing")
	fork := s.Name() + "-fork"
	t.Cleanup(func() { _ = c.Remove(ctx, fork, true) })
	_, err = c.Fork(ctx, s.Name(), fork, "")
	require.ErrorIs(t, err, session.ErrInvalid)
	assert.Contains(t, err.Error(), "sparse files count at their full size")
	_, err = c.RecordedSettings(ctx, fork)
	assert.ErrorIs(t, err, session.ErrNotFound, "the fork was undone")
}
