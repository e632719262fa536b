package session_test

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/fakenet"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

// localIndex starts a fake internet (internal/fakenet) whose index serves wheels besides its
// probe, and returns a Client whose proxies (the installers' among them) resolve its names, the
// fake internet, and the index's URL (http://index.test/simple: pip needs --trusted-host
// fakenet.Index for it). With operatorIndex the Client has it as its install index
// (session.WithInstallIndex), which a cell's %pip may name.
func localIndex(t *testing.T, wheels map[string][]byte, operatorIndex ...bool) (*session.Client, *fakenet.Internet, string) {
	t.Helper()
	testenv.Images(t)
	py, _ := lang.Get("python")
	in := fakenet.Start(t, images.Ref(py), fakenet.WithWheels(wheels))
	index := "http://" + fakenet.Index + "/simple"
	var opts []session.Option
	if len(operatorIndex) > 0 && operatorIndex[0] {
		opts = append(opts, session.WithInstallIndex(index, fakenet.Index))
	}
	return egressClient(t, in, opts...), in, index
}

// helperVolumesFor lists the engine's helper volumes (installers' proxies') that work for
// session name.
func helperVolumesFor(t *testing.T, name string) []string {
	t.Helper()
	out, err := exec.Command("docker", "volume", "ls", "-q", "--filter", "label=io.runtimectl.helper-for="+name).Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// noHelpersLeft says that nothing of an install is left for session name: no installer, no
// proxy, no proxy volume (within a few seconds: a container that removes itself is gone a
// moment after it ends).
func noHelpersLeft(t *testing.T, name, when string) {
	t.Helper()
	assert.Eventually(t, func() bool { return len(helpersFor(t, name)) == 0 && len(helperVolumesFor(t, name)) == 0 }, 15*time.Second, 250*time.Millisecond,
		"%s: helpers %v, volumes %v are left", when, helpersFor(t, name), helperVolumesFor(t, name))
}

// Packages at runtime: `session install` from a local index puts a package into the session's
// virtual environment on its volume, importable at once and again after a stop and start; a
// `%pip install` line in the code does the same before the cell runs; `!cmd` runs a shell
// command; other magics are a clear error. The session itself keeps --network none. A cell's
// %pip may name the operator's index (the Client's WithInstallIndex), and no other.
func TestInstallPackagesAtRuntime(t *testing.T) {
	c, in, index := localIndex(t, map[string][]byte{"tinypkg": testenv.Wheel(t, "tinypkg", 42), "otherpkg": testenv.Wheel(t, "otherpkg", 7)}, true)
	host := fakenet.Index
	ctx := context.Background()
	s := startEgress(t, c, session.Spec{})
	name := s.Name()
	run := func(code string) *session.Result {
		t.Helper()
		r, err := s.Exec(ctx, code, session.ExecOptions{})
		require.NoError(t, err, code)
		return r
	}
	r := run("import socket\ntry:\n    socket.create_connection(('" + in.Addr(fakenet.Index) + "', 80), timeout=2)\n    net = 'reached'\nexcept OSError as e:\n    net = 'no network'\nnet")
	assert.Equal(t, "'no network'", *r.Result, "the session has no network")

	var out bytes.Buffer
	require.NoError(t, c.Install(ctx, name, session.InstallOptions{Packages: []string{"tinypkg"}, IndexURL: index, TrustedHosts: []string{host}, Output: &out}), out.String())
	assert.Contains(t, out.String(), "Successfully installed tinypkg-1.0")
	noHelpersLeft(t, name, "after an install")
	r = run("import tinypkg\ntinypkg.VALUE")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "42", *r.Result, "importable at once, without a restart")

	_, err := s.Exec(ctx, "%pip install otherpkg --index-url http://"+fakenet.DeniedIndex+"/simple\nimport otherpkg", session.ExecOptions{})
	require.ErrorIs(t, err, session.ErrInvalid, "a cell's own index is refused")
	assert.Contains(t, err.Error(), "index host "+fakenet.DeniedIndex+" in a %pip line")
	noHelpersLeft(t, name, "after a refused %pip")
	r = run("import importlib.util\nimportlib.util.find_spec('otherpkg') is None")
	assert.Equal(t, "True", *r.Result, "nothing was installed")

	r = run(fmt.Sprintf("%%pip install otherpkg --index-url %s --trusted-host %s\nimport otherpkg\notherpkg.VALUE", index, host))
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "7", *r.Result)
	assert.Contains(t, r.Stdout, "Successfully installed otherpkg-1.0", "pip's output is the cell's")

	require.NoError(t, c.Stop(ctx, name))
	s2, _, err := c.Start(ctx, session.Spec{Name: name})
	require.NoError(t, err)
	defer s2.Close()
	r, err = s2.Exec(ctx, "import tinypkg, otherpkg\n(tinypkg.VALUE, otherpkg.VALUE)", session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "(42, 7)", *r.Result, "kept on the volume across stop and start")

	r, err = s2.Exec(ctx, "!echo from-the-shell\n!exit 3\n_exit_code", session.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "from-the-shell\n", r.Stdout)
	assert.Equal(t, "3", *r.Result)
	r, err = s2.Exec(ctx, "%timeit -n 10 -r 2 1 + 1", session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Contains(t, r.Stdout, "loops each", "IPython's magics run beside %pip")

	err = c.Install(ctx, name, session.InstallOptions{Packages: []string{"no-such-package-xyz"}, IndexURL: index, TrustedHosts: []string{host}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pip exited with code")
	assert.NotContains(t, err.Error(), "\n")
}
