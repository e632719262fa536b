package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// A session past its disk cap (--disk 64m; the engine's local volumes have no quota, so the
// agent measures the workspace) has its executions refused with ErrDiskCap and a message
// that says how to go on; code run with IgnoreDiskCap frees space; the session and its state
// go on, across a stop and start too.
func TestDiskCapRefusesExecutionsPastIt(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{Disk: 64 << 20})
	name := s.Name()
	require.Equal(t, "ok", string(run(t, s, "kept = 41").Status))
	r := run(t, s, "with open('/workspace/big', 'wb') as f:\n    f.write(b'x' * (80 << 20))")
	require.Equal(t, "ok", string(r.Status), r.Stderr)

	var err error
	require.Eventually(t, func() bool {
		_, err = s.Exec(context.Background(), "kept", session.ExecOptions{})
		return err != nil
	}, 30*time.Second, 50*time.Millisecond, "an execution past the cap was not refused")
	require.ErrorIs(t, err, session.ErrDiskCap)
	assert.Contains(t, err.Error(), "past the session's disk cap of 64.0 MiB")
	assert.Contains(t, err.Error(), "ExecOptions.IgnoreDiskCap", "the library names its option")
	assert.Contains(t, advice.CLI(err), "`runtimectl session exec "+name+" --ignore-disk-cap CODE`", "the CLI names its flag")

	// Still refused after a stop and start: the cap is in the session's settings.
	require.NoError(t, c.Stop(context.Background(), name))
	s2, _, err := c.Start(context.Background(), session.Spec{Name: name})
	require.NoError(t, err)
	defer s2.Close()
	require.Eventually(t, func() bool {
		_, err = s2.Exec(context.Background(), "kept", session.ExecOptions{})
		return err != nil
	}, 30*time.Second, 50*time.Millisecond, "the cap did not hold after a restart")
	require.ErrorIs(t, err, session.ErrDiskCap)

	r, err = s2.Exec(context.Background(), "import os; os.remove('/workspace/big')", session.ExecOptions{IgnoreDiskCap: true})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.Eventually(t, func() bool {
		r, err = s2.Exec(context.Background(), "kept + 1", session.ExecOptions{})
		return err == nil
	}, 30*time.Second, 50*time.Millisecond, "executions did not run again once space was freed: %v", err)
	assert.Equal(t, "42", *r.Result, "the state is intact")
}

// A disk cap below 64 MiB is refused as invalid, before anything is made.
func TestDiskCapTooSmallIsRefused(t *testing.T) {
	c := testenv.Client(t)
	_, _, err := c.Start(context.Background(), session.Spec{Name: testenv.Name(t), Disk: 1 << 20})
	require.ErrorIs(t, err, session.ErrInvalid)
	assert.Contains(t, err.Error(), "give at least 64m")
}

// `volume ls` sizes a workspace that holds a folder thousands of levels deep, which the
// engine's own measure gives up on: a helper container measures it with folder descriptors.
func TestVolumeSizeOfAFolderThousandsOfLevelsDeep(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	r := run(t, s, `import os
fd = os.open('/workspace', os.O_RDONLY)
for i in range(3000):
    os.mkdir('level-dir', dir_fd=fd)
    sub = os.open('level-dir', os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = sub
w = os.open('bottom', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
os.write(w, os.urandom(4 << 20))
os.close(w)
os.close(fd)`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.NoError(t, c.Stop(context.Background(), name))

	engine, err := docker.From(c).Volumes().List(context.Background(), true)
	require.NoError(t, err)
	for _, v := range engine {
		if v.Session == name {
			t.Logf("the engine's own size of %s: %d", v.Name, v.Size)
		}
	}
	list, err := c.VolumeList(context.Background(), true)
	require.NoError(t, err)
	var found bool
	for _, v := range list {
		if v.Session == name {
			found = true
			assert.GreaterOrEqual(t, v.Size, int64(4<<20), "the file at the bottom is counted")
			assert.Less(t, v.Size, int64(100<<20))
		}
	}
	assert.True(t, found, "the session's volume is listed")
}
