package podmantest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/podmantest"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

func TestSessionOnRootfulPodman(t *testing.T) {
	testenv.Images(t)
	svc := podmantest.Rootful(t, image(t, "bash"), image(t, "python"))
	lifecycle(t, svc)
	pythonState(t, svc)
}

func TestSessionOnRootlessPodman(t *testing.T) {
	testenv.Images(t)
	svc := podmantest.Rootless(t, image(t, "bash"), image(t, "python"))
	lifecycle(t, svc)
	pythonState(t, svc)
}

func image(t *testing.T, name string) string {
	l, err := lang.Get(name)
	require.NoError(t, err)
	return images.Ref(l)
}

// start starts a session on the service's engine through c (testenv.Start goes through
// testcontainers-go, which talks to the default engine, not this one) and removes it, with
// its volumes, at the end of the test.
func start(t *testing.T, c *session.Client, spec session.Spec) *session.Session {
	t.Helper()
	s, _, err := c.Start(testenv.Ctx(t, 2*time.Minute), spec)
	require.NoError(t, err)
	t.Cleanup(func() {
		s.Close()
		_ = c.Remove(context.Background(), spec.Name, true)
	})
	return s
}

// lifecycle runs a bash session through the service: state across stop/start and across
// `podman kill`, cp in and out, the hardening read back from inside, and rm.
func lifecycle(t *testing.T, svc *podmantest.Service) {
	de, err := docker.New(svc.Host)
	require.NoError(t, err)
	c := session.NewWithEngine(de)
	t.Cleanup(func() { c.Close() })
	// doctor and version name the engine, and know a rootless one.
	eng, err := c.Engine(testenv.Ctx(t, time.Minute))
	require.NoError(t, err)
	assert.Equal(t, "Podman", eng.Name)
	assert.Equal(t, svc.Rootless, eng.Rootless)
	name := testenv.Name(t)
	s := start(t, c, session.Spec{Name: name, Lang: "bash"})
	exec := func(s *session.Session, code string) *session.Result {
		t.Helper()
		r, err := s.Exec(testenv.Ctx(t, time.Minute), code, session.ExecOptions{})
		require.NoError(t, err, svc.String())
		return r
	}

	r := exec(s, "K=41; echo made > f")
	require.Equal(t, "ok", string(r.Status), r.Stderr)

	// Stop and start: a new container process, the shell's state restored.
	require.NoError(t, c.Stop(testenv.Ctx(t, time.Minute), name))
	s, _, err = c.Start(testenv.Ctx(t, 2*time.Minute), session.Spec{Name: name})
	require.NoError(t, err)
	r = exec(s, "echo $((K+1))")
	assert.Equal(t, "42\n", r.Stdout, r.Stderr)
	s.Close()

	// podman kill, then the session comes back with its state.
	svc.Podman(t, "kill", "runtimectl-"+name)
	s, _, err = c.Start(testenv.Ctx(t, 2*time.Minute), session.Spec{Name: name})
	require.NoError(t, err)
	defer s.Close()
	r = exec(s, "echo $((K+2))")
	assert.Equal(t, "43\n", r.Stdout, r.Stderr)

	// cp in and out.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.txt"), []byte("from the host\n"), 0o644))
	require.NoError(t, c.CopyTo(testenv.Ctx(t, time.Minute), name, filepath.Join(dir, "in.txt"), "in.txt"))
	r = exec(s, "cat in.txt")
	assert.Equal(t, "from the host\n", r.Stdout, r.Stderr)
	require.NoError(t, c.CopyFrom(testenv.Ctx(t, time.Minute), name, "f", filepath.Join(dir, "out.txt")))
	b, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	require.NoError(t, err)
	assert.Equal(t, "made\n", string(b))

	// The hardening, read back from inside: the session user, the bounding set (KILL, SETGID,
	// SETUID), no-new-privileges, a read-only root, no network but loopback.
	r = exec(s, `id -u; grep -E '^(CapBnd|CapEff|NoNewPrivs):' /proc/self/status | tr -s '\t' ' '
touch /etc/x 2>/dev/null && echo rw || echo ro
tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '
ulimit -u -n | awk '{print $NF}'`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	require.GreaterOrEqual(t, len(lines), 6, r.Stdout)
	assert.Equal(t, []string{"1000", "CapEff: 0000000000000000", "CapBnd: 00000000000000e0", "NoNewPrivs: 1", "ro", "lo"}, lines[:6], svc.String())
	if !svc.Rootless {
		// Rootless Podman on cgroup v1 drops every limit, the ulimits with them (README).
		assert.Equal(t, []string{"8192", "4096"}, lines[6:], "nproc and nofile")
	}

	require.NoError(t, c.Remove(testenv.Ctx(t, time.Minute), name, true))
	_, _, err = c.Open(testenv.Ctx(t, time.Minute), name)
	assert.Error(t, err, "the session is gone after rm")
}

// pythonState keeps a DataFrame across `podman kill`: the snapshot on the volume is loaded by
// the new container process, nothing re-run.
func pythonState(t *testing.T, svc *podmantest.Service) {
	de, err := docker.New(svc.Host)
	require.NoError(t, err)
	c := session.NewWithEngine(de)
	t.Cleanup(func() { c.Close() })
	name := testenv.Name(t) + "-py"
	s := start(t, c, session.Spec{Name: name})
	r, err := s.Exec(testenv.Ctx(t, time.Minute), "import pandas as pd; df = pd.DataFrame({'a': [1, 2, 3]})", session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.NoError(t, c.Stop(testenv.Ctx(t, time.Minute), name)) // waits for the snapshot
	s, _, err = c.Start(testenv.Ctx(t, 2*time.Minute), session.Spec{Name: name})
	require.NoError(t, err)
	svc.Podman(t, "kill", "runtimectl-"+name)
	s.Close()
	s, _, err = c.Start(testenv.Ctx(t, 2*time.Minute), session.Spec{Name: name})
	require.NoError(t, err)
	defer s.Close()
	r, err = s.Exec(testenv.Ctx(t, time.Minute), "int(df.a.sum())", session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.NotNil(t, r.Result, svc.String())
	assert.Equal(t, "6", *r.Result, svc.String())
}
