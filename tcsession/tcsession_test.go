package tcsession_test

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
	"github.com/runtimectl/runtimectl/tcsession"
)

// listed returns the session named name as `runtimectl session ls` shows it, or false.
func listed(t *testing.T, c *session.Client, name string) (session.Info, bool) {
	t.Helper()
	all, err := c.List(testenv.Ctx(t, time.Minute))
	require.NoError(t, err)
	for _, i := range all {
		if i.Name == name {
			return i, true
		}
	}
	return session.Info{}, false
}

func TestRunGivesASessionThatRunsCodeAndTerminateRemovesIt(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)

	ctr, err := tcsession.Run(ctx, tcsession.Image("python"),
		tcsession.WithLanguage("python"), tcsession.WithMemory("512m"))
	testcontainers.CleanupContainer(t, ctr)
	require.NoError(t, err)

	res, err := ctr.RunCode(ctx, "x = 40 + 2\nx")
	require.NoError(t, err)
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	require.NotNil(t, res.Result)
	assert.Equal(t, "42", *res.Result)

	s, err := ctr.Session(ctx)
	require.NoError(t, err)
	vars, err := s.Vars(ctx)
	require.NoError(t, err)
	var names []string
	for _, v := range vars.Vars {
		names = append(names, v.Name)
	}
	assert.Contains(t, names, "x")

	// What `runtimectl session ls` shows, and what the library opens.
	info, ok := listed(t, c, ctr.SessionName())
	require.True(t, ok, "session ls lists %s", ctr.SessionName())
	assert.Equal(t, "python", info.Lang)
	assert.Equal(t, engine.StateRunning, info.State)
	other, _, err := c.Open(ctx, ctr.SessionName())
	require.NoError(t, err)
	res, err = other.Exec(ctx, "x + 1", session.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "43", *res.Result, "the library's own handle sees the same interpreter")
	other.Close()

	raw, err := docker.From(c).Containers().Raw(ctx, ctr.SessionName())
	require.NoError(t, err)
	assert.Equal(t, int64(512<<20), raw.HostConfig.Memory)
	assert.Equal(t, "true", raw.Config.Labels["org.testcontainers"], "testcontainers' labels are kept")
	// Ryuk, where it runs, removes what carries its session label: the volume too.
	out, err := exec.CommandContext(ctx, "docker", "volume", "inspect", "-f", `{{index .Labels "org.testcontainers.sessionId"}}`, containers.Name(ctr.SessionName())).Output()
	require.NoError(t, err)
	assert.Equal(t, raw.Config.Labels["org.testcontainers.sessionId"], strings.TrimSpace(string(out)))
	assert.NotEmpty(t, strings.TrimSpace(string(out)))
	insp, err := ctr.Inspect(ctx)
	require.NoError(t, err)
	assert.Equal(t, raw.ID, insp.ID, "the embedded testcontainers.Container is the session's container")

	// Files in and out through testcontainers' methods, on a read-only root filesystem.
	host := filepath.Join(t.TempDir(), "in.txt")
	require.NoError(t, os.WriteFile(host, []byte("hello\n"), 0o644))
	require.NoError(t, ctr.CopyFileToContainer(ctx, host, "/workspace/in.txt", 0o640))
	res, err = ctr.RunCode(ctx, "import os\n(open('in.txt').read(), oct(os.stat('in.txt').st_mode & 0o777), os.stat('in.txt').st_uid)")
	require.NoError(t, err)
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	assert.Equal(t, "('hello\\n', '0o640', 1000)", *res.Result, "the session's user owns what is copied in")
	rc, err := ctr.CopyFileFromContainer(ctx, "/workspace/in.txt")
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(got))
	err = ctr.CopyToContainer(ctx, []byte("x"), "/etc/x", 0o644)
	assert.ErrorContains(t, err, "session paths are under /workspace")

	require.NoError(t, ctr.Terminate(ctx))
	_, ok = listed(t, c, ctr.SessionName())
	assert.False(t, ok, "no container and no volume left")
	_, err = docker.From(c).Volumes().Inspect(ctx, ctr.SessionName())
	assert.ErrorIs(t, err, engine.ErrNotFound)
}

// A tcsession container is made as `runtimectl session start` makes one: the same hardened
// HostConfig, user, working directory and runtimectl labels.
func TestRunHasTheHardenedDefaultsOfSessionStart(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	// The library's own Start, beside tcsession: what `runtimectl session start` creates.
	name := testenv.Name(t)
	t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })
	started, _, err := c.Start(ctx, session.Spec{Name: name})
	require.NoError(t, err)
	defer started.Close()
	ctr, err := tcsession.Run(ctx, tcsession.Image("python"))
	testcontainers.CleanupContainer(t, ctr)
	require.NoError(t, err)

	want, err := docker.From(c).Containers().Raw(ctx, started.Name())
	require.NoError(t, err)
	got, err := docker.From(c).Containers().Raw(ctx, ctr.SessionName())
	require.NoError(t, err)

	w, g := *want.HostConfig, *got.HostConfig
	assert.Equal(t, w.CapDrop, g.CapDrop)
	assert.ElementsMatch(t, w.CapAdd, g.CapAdd)
	assert.Equal(t, w.SecurityOpt, g.SecurityOpt)
	assert.Equal(t, w.ReadonlyRootfs, g.ReadonlyRootfs)
	assert.Equal(t, w.NetworkMode, g.NetworkMode)
	assert.Equal(t, w.Init, g.Init)
	assert.Equal(t, w.Tmpfs, g.Tmpfs)
	assert.Equal(t, w.LogConfig, g.LogConfig)
	assert.Equal(t, w.RestartPolicy, g.RestartPolicy)
	assert.Equal(t, w.Resources.Memory, g.Resources.Memory)
	assert.Equal(t, w.Resources.MemorySwap, g.Resources.MemorySwap)
	assert.Equal(t, w.Resources.PidsLimit, g.Resources.PidsLimit)
	assert.Equal(t, w.Resources.NanoCPUs, g.Resources.NanoCPUs)
	assert.Equal(t, w.Resources.Ulimits, g.Resources.Ulimits)
	assert.Empty(t, g.PortBindings, "nothing published")
	require.Len(t, g.Mounts, len(w.Mounts))
	for i := range w.Mounts {
		assert.Equal(t, w.Mounts[i].Target, g.Mounts[i].Target)
		assert.Equal(t, strings.Replace(w.Mounts[i].Source, started.Name(), ctr.SessionName(), 1), g.Mounts[i].Source)
	}
	assert.Equal(t, want.Config.User, got.Config.User)
	assert.Equal(t, want.Config.WorkingDir, got.Config.WorkingDir)
	for _, l := range []string{contract.LabelLang, contract.LabelSchema} {
		assert.Equal(t, want.Config.Labels[l], got.Config.Labels[l], l)
	}
	assert.Equal(t, ctr.SessionName(), got.Config.Labels[contract.LabelSession])
}

func TestOptionsReachTheSession(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	name := testenv.Name(t)
	ctr, err := tcsession.Run(ctx, tcsession.Image("bash"),
		testcontainers.WithName(name), testcontainers.WithEnv(map[string]string{"GREETING": "hello"}),
		tcsession.WithCPUs(1), tcsession.WithSnapshots("manual"))
	testcontainers.CleanupContainer(t, ctr)
	require.NoError(t, err)
	assert.Equal(t, name, ctr.SessionName(), "WithName names the session")

	res, err := ctr.RunCode(ctx, `echo "$GREETING from $0"`)
	require.NoError(t, err)
	assert.Equal(t, "hello from bash\n", res.Stdout, "the language comes from the image's label; WithEnv reaches the code")
	raw, err := docker.From(c).Containers().Raw(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, int64(1e9), raw.HostConfig.NanoCPUs)
	assert.Equal(t, "/"+containers.Name(name), raw.Name)
	snaps, err := c.Snapshots(ctx, name)
	require.NoError(t, err)
	assert.Empty(t, snaps, "manual snapshots: none taken by the execution")
}

func TestWithKeepVolumeKeepsTheSessionForSessionStart(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	name := testenv.Name(t)
	t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })
	ctr, err := tcsession.Run(ctx, tcsession.Image("python"), testcontainers.WithName(name), tcsession.WithKeepVolume())
	testcontainers.CleanupContainer(t, ctr)
	require.NoError(t, err)
	res, err := ctr.RunCode(ctx, "y = 7")
	require.NoError(t, err)
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	require.NoError(t, ctr.Terminate(ctx))

	info, ok := listed(t, c, name)
	require.True(t, ok, "the volume is kept")
	assert.Equal(t, session.StateRemoved, info.State)
	s, _, err := c.Start(ctx, session.Spec{Name: name})
	require.NoError(t, err)
	defer s.Close()
	res, err = s.Exec(ctx, "y * 6", session.ExecOptions{})
	require.NoError(t, err)
	require.NotNil(t, res.Result, res.Stderr)
	assert.Equal(t, "42", *res.Result, "the state came back from the kept volume")
}

func TestRunWithoutTheImageSaysHowToBuildIt(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	name := testenv.Name(t)
	ctr, err := tcsession.Run(ctx, "runtimectl/python:no-such-tag", testcontainers.WithName(name))
	testcontainers.CleanupContainer(t, ctr)
	require.Error(t, err)
	assert.Nil(t, ctr)
	assert.Contains(t, err.Error(), "no image runtimectl/python:no-such-tag")
	assert.Contains(t, err.Error(), "build it first (docker.From(client).Images().Build")
	_, ok := listed(t, c, name)
	assert.False(t, ok, "nothing is left behind")
}

// WithBuild builds a missing runtimectl image from the module's embedded Dockerfiles (here
// under a tag of its own; the engine's layer cache makes it quick after `make images`).
func TestWithBuildBuildsAMissingImage(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 10*time.Minute)
	unique := testenv.Name(t)
	t.Setenv("RUNTIMECTL_IMAGE_TAG", "tcbuild-"+unique[len(unique)-6:])
	image := tcsession.Image("bash")
	t.Cleanup(func() { _ = docker.From(c).Images().Remove(context.Background(), image, true) })
	_, err := docker.From(c).Images().Inspect(ctx, image)
	require.ErrorIs(t, err, images.ErrNotFound, "the image is missing to begin with")

	ctr, err := tcsession.Run(ctx, image, tcsession.WithBuild())
	testcontainers.CleanupContainer(t, ctr)
	require.NoError(t, err)
	res, err := ctr.RunCode(ctx, "echo $((6 * 7))")
	require.NoError(t, err)
	assert.Equal(t, "42\n", res.Stdout)
}
