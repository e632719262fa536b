package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
)

// The agent never writes through a state folder that is a link: it names the path and stops.
func TestStateDirThatIsALinkIsRefused(t *testing.T) {
	cfg := stubConfig(t)
	elsewhere := t.TempDir()
	require.NoError(t, os.Symlink(elsewhere, cfg.StateDir))
	_, err := New(cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), cfg.StateDir)
	entries, _ := os.ReadDir(elsewhere)
	assert.Empty(t, entries, "nothing was written where the link leads")
}

// Once the controller has moved a legacy session's state (MigratedFile), the agent removes the
// old folder in the workspace; without the mark, or when the folder is a link, it leaves it.
func TestLegacyStateFolderRemovedOnlyAfterTheMove(t *testing.T) {
	legacyName := filepath.Base(contract.LegacyStateDir)

	cfg := stubConfig(t)
	legacy := filepath.Join(cfg.Workdir, legacyName)
	require.NoError(t, os.MkdirAll(filepath.Join(legacy, "snapshots"), 0o700))
	startStub(t, cfg).stop()
	assert.DirExists(t, legacy, "no move recorded: the folder stays")

	require.NoError(t, os.WriteFile(filepath.Join(cfg.StateDir, contract.MigratedFile), []byte("moved\n"), 0o600))
	startStub(t, cfg).stop()
	assert.NoDirExists(t, legacy, "moved: the old folder is removed")

	cfg = stubConfig(t)
	require.NoError(t, os.MkdirAll(cfg.StateDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(cfg.StateDir, contract.MigratedFile), []byte("moved\n"), 0o600))
	target := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(target, "keep"), nil, 0o600))
	require.NoError(t, os.Symlink(target, filepath.Join(cfg.Workdir, legacyName)))
	startStub(t, cfg).stop()
	assert.FileExists(t, filepath.Join(target, "keep"), "a link in its place is not followed")
}

// Snapshots deleted from the state volume are reported as gone, not as "no snapshot yet":
// the history says there were some.
func TestSnapshotsGoneFromTheStateAreReported(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	r := execStub(t, c, "set hello", 0)
	require.Equal(t, "ok", string(r.Status))
	drain(t, c)
	s.stop()
	for _, d := range []string{"snapshots", "snapdata"} {
		require.NoError(t, os.RemoveAll(filepath.Join(s.cfg.StateDir, d)))
	}
	s = startStub(t, s.cfg)
	info := s.Hello().Restore
	require.NotNil(t, info)
	assert.Empty(t, info.Snapshot)
	assert.Contains(t, strings.Join(info.Messages, "; "), "snapshots are gone")
}
