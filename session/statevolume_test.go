package session_test

// The runtime's state on a volume of its own (issue 11, part 1): out of the session user's
// reach, whatever it does to its workspace, and sessions made before it migrated on their next
// start.

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
	"github.com/runtimectl/runtimectl/volumes"
)

// The attacks that took over the state when it lived in /workspace/.runtimectl: renaming the
// folder and putting one of the session user's own in its place, with a forged history and
// links into the real one. None of it reaches the state: history, snapshots and state are
// intact after stop/start, and the state volume itself cannot be read, renamed or replaced.
func TestStateOutOfTheSessionsReach(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	r := execWith(t, s, "x = 41", session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)

	attack := `import os, json
out = {}
for what, f in [("list", lambda: os.listdir("/var/lib/runtimectl")),
                ("rename", lambda: os.rename("/var/lib/runtimectl", "/tmp/stolen")),
                ("open", lambda: open("/var/lib/runtimectl/history.jsonl", "a"))]:
    try:
        f(); out[what] = "done"
    except OSError as e:
        out[what] = type(e).__name__
os.makedirs("/workspace/.runtimectl/snapshots", exist_ok=True)
with open("/workspace/.runtimectl/history.jsonl", "w") as f:
    f.write(json.dumps({"kind": "start", "seq": 1, "code": "FORGED", "status": "running", "started": "2026-01-01T00:00:00Z"}) + "\n")
os.symlink("/var/lib/runtimectl/history.jsonl", "/workspace/.runtimectl/link")
os.symlink("/var/lib/runtimectl", "/workspace/.runtimectl/state")
json.dumps(out, sort_keys=True)`
	r = execWith(t, s, attack, session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.NotNil(t, r.Result)
	assert.NotContains(t, *r.Result, "done", "the session user cannot touch the state volume: %s", *r.Result)

	ctx := testenv.Ctx(t, 3*time.Minute)
	require.NoError(t, c.Stop(ctx, name))
	s, _, err := c.Start(ctx, session.Spec{Name: name})
	require.NoError(t, err)
	defer s.Close()
	r = execWith(t, s, "x + 1", session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "42", *r.Result, "the snapshot came back")

	execs := historyOf(t, c, name)
	require.GreaterOrEqual(t, len(execs), 3)
	assert.Equal(t, "x = 41", execs[0].Code)
	for _, e := range execs {
		assert.NotEqual(t, "FORGED", e.Code, "a forged history in the workspace is not the session's")
	}
	ms, err := c.Snapshots(ctx, name)
	require.NoError(t, err)
	assert.NotEmpty(t, ms)
	// The planted folder is the user's own, left as it was (the agent removes only a legacy
	// folder that is root's).
	r = execWith(t, s, "import os\nsorted(os.listdir('/workspace/.runtimectl'))", session.ExecOptions{})
	assert.Equal(t, "['history.jsonl', 'link', 'snapshots', 'state']", *r.Result)
}

// A session made before the state volume (its agent's state in /workspace/.runtimectl, its
// container without the state mount) is moved to the pair on its next start: its state and
// history come back from the state volume, what was not root's in the old folder stays
// behind, and the old folder is removed.
func TestLegacySessionMigrated(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	// The container is made again below, not by testcontainers: removed here.
	t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })
	r := execWith(t, s, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})", session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	s.Close()
	require.NoError(t, c.Stop(ctx, name))

	// Turn it into a session of the earlier layout: the state copied into the workspace's
	// .runtimectl (as root, as the old agent wrote it), with a link planted there, then the
	// container made again without the state mount and the state volume removed.
	rc, err := docker.From(c).Containers().CopyFrom(ctx, name, contract.StateDir)
	require.NoError(t, err)
	var buf bytes.Buffer
	tr, tw := tar.NewReader(rc), tar.NewWriter(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		h.Name = ".runtimectl" + strings.TrimPrefix(h.Name, "runtimectl")
		require.NoError(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err = io.Copy(tw, tr)
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: ".runtimectl/snapshots/planted.json", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd", Mode: 0o777}))
	require.NoError(t, tw.Close())
	rc.Close()
	require.NoError(t, docker.From(c).Containers().CopyTo(ctx, name, contract.Workspace, &buf))
	vol, err := docker.From(c).Volumes().Inspect(ctx, name)
	require.NoError(t, err)
	st, err := contract.DecodeSettings(vol.Settings)
	require.NoError(t, err)
	require.NoError(t, docker.From(c).Containers().Remove(ctx, name, true))
	require.NoError(t, docker.From(c).Volumes().RemoveState(ctx, name))
	_, err = docker.From(c).Containers().Create(ctx, containers.Spec{Session: name, Lang: st.Lang, Image: st.Image, Volume: volumes.Name(name), Settings: vol.Settings})
	require.NoError(t, err)
	ci, err := docker.From(c).Containers().Inspect(ctx, name)
	require.NoError(t, err)
	require.False(t, ci.StateMounted)

	// Reading its history makes the container again, with the state moved; the next start
	// starts it.
	execs := historyOf(t, c, name)
	require.NotEmpty(t, execs)
	ci, err = docker.From(c).Containers().Inspect(ctx, name)
	require.NoError(t, err)
	require.True(t, ci.StateMounted)
	s, _, err = c.Start(ctx, session.Spec{Name: name})
	require.NoError(t, err)
	defer s.Close()
	ci, err = docker.From(c).Containers().Inspect(ctx, name)
	require.NoError(t, err)
	assert.True(t, ci.StateMounted, "the new container mounts the state volume")
	r = execWith(t, s, "int(df.a.sum())", session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "6", *r.Result, "the DataFrame came back from the moved snapshot")
	assert.Contains(t, historyOf(t, c, name)[0].Code, "pd.DataFrame")

	// The agent empties the old folder (root without CAP_DAC_OVERRIDE cannot unlink it from
	// the user's workspace); the user can remove it.
	r = execWith(t, s, "import os\nd = '/workspace/.runtimectl'\nn = len(os.listdir(d))\nos.rmdir(d)\n(n, os.path.exists(d))", session.ExecOptions{})
	if !assert.Equal(t, "(0, False)", *r.Result, "the agent emptied the old folder: %s", r.Stderr) {
		logs, _ := docker.From(c).Containers().Logs(ctx, name, 1<<16)
		t.Logf("agent log:\n%s", logs)
	}
	info, err := docker.From(c).Containers().Stat(ctx, name, contract.StatePath(contract.MigratedFile))
	require.NoError(t, err)
	assert.True(t, info.Exists, "the move is recorded on the state volume")
	info, err = docker.From(c).Containers().Stat(ctx, name, contract.StatePath("snapshots/planted.json"))
	require.NoError(t, err)
	assert.False(t, info.Exists, "a link in the old folder is not moved")
}

// A session's two volumes are one session: `volume ls` lists them as one entry, and
// `session rm` removes both.
func TestVolumesArePaired(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 3*time.Minute)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	vols, err := docker.From(c).Volumes().List(ctx, true)
	require.NoError(t, err)
	var found []volumes.Volume
	for _, v := range vols {
		if v.Session == name {
			found = append(found, v)
		}
	}
	require.Len(t, found, 1, "one entry per session")
	assert.Equal(t, volumes.Name(name), found[0].Name)
	assert.Equal(t, volumes.StateName(name), found[0].State)
	s.Close()
	require.NoError(t, c.Remove(ctx, name, true))
	for _, v := range []string{volumes.Name(name), volumes.StateName(name)} {
		out, err := exec.CommandContext(context.Background(), "docker", "volume", "inspect", v).CombinedOutput()
		assert.Error(t, err, "volume %s is removed with the session: %s", v, out)
	}
}

// A snapshot whose manifest is broken is listed as broken, not hidden; with the snapshots
// deleted from the state volume, the next start says they are gone, not "no snapshot yet".
func TestBrokenAndMissingSnapshotsAreSaidSo(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 3*time.Minute)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	r := execWith(t, s, "x = 1", session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	waitSaved(t, c, name, r.Seq)
	writeStateTar(t, c, name, contract.StatePath(contract.SnapshotsDir), &tar.Header{Name: "9-abcdef.json", Typeflag: tar.TypeReg, Mode: 0o600}, []byte("{not json"))
	ms, err := c.Snapshots(ctx, name)
	require.NoError(t, err)
	var broken []string
	for _, m := range ms {
		if m.Broken != "" {
			broken = append(broken, m.ID)
		}
	}
	assert.Equal(t, []string{"9-abcdef"}, broken)

	s.Close()
	require.NoError(t, c.Stop(ctx, name))
	l, err := lang.Get("python")
	require.NoError(t, err)
	out, err := exec.Command("docker", "run", "--rm", "--network", "none", "--entrypoint", "sh", "-v", volumes.StateName(name)+":/state",
		images.Ref(l), "-c", "rm -rf /state/snapshots /state/snapdata").CombinedOutput()
	require.NoError(t, err, "%s", out)
	s, _, err = c.Start(ctx, session.Spec{Name: name})
	require.NoError(t, err)
	defer s.Close()
	info := s.Restored()
	require.NotNil(t, info)
	assert.Empty(t, info.Snapshot)
	assert.Contains(t, strings.Join(info.Messages, "; "), "snapshots are gone")
}
