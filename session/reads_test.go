package session_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// The third attack's link into the state: with /workspace/st -> /var/lib/runtimectl (and
// links to it further down, chained, and to a folder of the image), reads out of the session
// (cp NAME:st/..., ReadFile) resolve inside /workspace only and give nothing of the state,
// while links that stay inside the workspace still read as the session's code would.
func TestReadsThroughALinkStayInTheWorkspace(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	r := execWith(t, s, `import os
os.symlink("/var/lib/runtimectl", "st")
os.makedirs("d/e")
os.symlink("../../st", "d/e/up")
os.symlink("d/e/up", "chain")
os.symlink("/etc", "etc")
os.makedirs("real")
open("real/f.txt", "w").write("mine")
os.symlink("real", "inside")
os.symlink("d/../real", "inside2")`, session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	ctx := testenv.Ctx(t, 2*time.Minute)
	for _, p := range []string{"st/history.jsonl", "st/session.json", "d/e/up/history.jsonl", "chain/history.jsonl", "chain/snapshots", "etc/passwd", "/workspace/st/history.jsonl"} {
		dst := filepath.Join(t.TempDir(), "out")
		err := c.CopyFrom(ctx, name, p, dst)
		require.Error(t, err, "cp %s:%s", name, p)
		assert.ErrorIs(t, err, session.ErrInvalid, p)
		_, serr := os.Lstat(dst)
		assert.True(t, os.IsNotExist(serr), "nothing written for %s", p)
		var buf bytes.Buffer
		_, err = c.ReadFile(ctx, name, p, &buf)
		assert.Error(t, err, "ReadFile %s", p)
		assert.NotContains(t, buf.String(), `"seq"`, p)
	}
	for _, p := range []string{"inside/f.txt", "inside2/f.txt", "real/f.txt", "d/e/../../real/f.txt"} {
		var buf bytes.Buffer
		_, err := c.ReadFile(ctx, name, p, &buf)
		require.NoError(t, err, p)
		assert.Equal(t, "mine", buf.String(), p)
	}
	// The final element that is a link is copied as a link, which the host side refuses when
	// it leads out of the destination: nothing of the state either way.
	dir := t.TempDir()
	err := c.CopyFrom(ctx, name, "st", dir)
	require.Error(t, err)
	entries, _ := os.ReadDir(dir)
	assert.Empty(t, entries)
}
