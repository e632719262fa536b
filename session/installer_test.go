package session_test

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// helpersFor lists the engine's helper containers that work for session name.
func helpersFor(t *testing.T, name string) []string {
	t.Helper()
	out, err := exec.Command("docker", "ps", "-aq", "--filter", "label=io.runtimectl.helper-for="+name).Output()
	require.NoError(t, err)
	return strings.Fields(string(out))
}

// The installer runs nothing of the workspace (issue 28): a session's own .venv/bin/python, a
// pip package in its working folder and a .pth in its venv stay unrun, and the install still
// lands; a requirement that pip would build is refused unless builds are allowed.
func TestTheInstallerRunsNothingOfTheWorkspace(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	index, host := localIndex(t, map[string][]byte{"tinypkg": testenv.Wheel(t, "tinypkg", 42)})
	s := testenv.Start(t, c, session.Spec{})
	plant := `import os, stat
os.makedirs('.venv/bin', exist_ok=True)
os.makedirs('.venv/lib/python3.11/site-packages', exist_ok=True)
with open('.venv/bin/python', 'w') as f:
    f.write('#!/bin/sh\necho ran > /workspace/pwned-python\nexec /usr/bin/python3 "$@"\n')
os.chmod('.venv/bin/python', 0o755)
with open('.venv/pyvenv.cfg', 'w') as f:
    f.write('home = /usr/bin\ninclude-system-site-packages = true\n')
with open('.venv/lib/python3.11/site-packages/evil.pth', 'w') as f:
    f.write("import os; 'RUNTIMECTL_REQUIREMENTS' in os.environ and open('/workspace/pwned-pth', 'w').write('ran')\n")
os.makedirs('pip', exist_ok=True)
with open('pip/__init__.py', 'w') as f:
    f.write("open('/workspace/pwned-cwd', 'w').write('ran')\n")
with open('pip/__main__.py', 'w') as f:
    f.write("open('/workspace/pwned-cwd', 'w').write('ran')\n")
'planted'`
	r, err := s.Exec(ctx, plant, session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)

	require.NoError(t, c.Install(ctx, s.Name(), session.InstallOptions{Packages: []string{"tinypkg"}, IndexURL: index, TrustedHosts: []string{host}}))
	r, err = s.Exec(ctx, "import os, tinypkg\n(tinypkg.VALUE, sorted(f for f in os.listdir('/workspace') if f.startswith('pwned')))", session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "(42, [])", *r.Result, "installed, and nothing the session planted ran")

	for _, req := range []string{"./src", "git+https://example.invalid/x", "dist/x-1.0.tar.gz"} {
		err := c.Install(ctx, s.Name(), session.InstallOptions{Packages: []string{req}, IndexURL: index, TrustedHosts: []string{host}})
		require.ErrorIs(t, err, session.ErrInvalid, req)
		assert.Contains(t, err.Error(), "installing it would build it, which runs its code; give a wheel (.whl), or set InstallOptions.AllowBuilds")
	}
	_, err = s.Exec(ctx, "%pip install ./src", session.ExecOptions{})
	require.ErrorIs(t, err, session.ErrInvalid, "a cell's install builds nothing either")
	assert.Empty(t, helpersFor(t, s.Name()), "every installer removed itself")
}

// An installer is bounded by its deadline and by the session's removal, and is never taken for
// the session: a hanging index holds it while `ls` shows the session once and `rm --force`
// removes the session, its volumes and the installer; another install stops at its timeout and
// leaves no container behind.
func TestAnInstallerHasADeadlineAndIsNotTheSession(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	hang := make(chan struct{})
	var asked = make(chan struct{}, 8)
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/", func(w http.ResponseWriter, r *http.Request) {
		asked <- struct{}{}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	base, host := testenv.ServeOnBridge(t, mux)
	t.Cleanup(func() { close(hang) })

	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	start := time.Now()
	err := c.Install(ctx, name, session.InstallOptions{Packages: []string{"slowpkg"}, IndexURL: base + "/simple", TrustedHosts: []string{host}, Timeout: 5 * time.Second})
	took := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not end within its deadline")
	t.Logf("the install with a 5s timeout ended after %s", took.Round(100*time.Millisecond))
	assert.Empty(t, helpersFor(t, name), "the installer past its deadline is gone")

	for len(asked) > 0 {
		<-asked
	}
	done := make(chan error, 1)
	go func() {
		done <- c.Install(context.Background(), name, session.InstallOptions{Packages: []string{"slowpkg"}, IndexURL: base + "/simple", TrustedHosts: []string{host}, Timeout: 3 * time.Minute})
	}()
	select {
	case <-asked:
	case <-time.After(2 * time.Minute):
		t.Fatal("the installer never asked the index")
	}
	require.Len(t, helpersFor(t, name), 1, "the installer runs")
	list, err := c.List(ctx)
	require.NoError(t, err)
	seen := 0
	for _, in := range list {
		if in.Name == name {
			seen++
		}
	}
	assert.Equal(t, 1, seen, "`ls` shows the session once, not its installer")
	require.NoError(t, s.Close())
	require.NoError(t, c.Remove(ctx, name, true), "rm --force removes the session while an install runs")
	assert.Empty(t, helpersFor(t, name))
	_, err = c.RecordedSettings(ctx, name)
	assert.ErrorIs(t, err, session.ErrNotFound, "its volumes are gone")
	select {
	case err := <-done:
		assert.Error(t, err, "the install ends with its installer")
	case <-time.After(time.Minute):
		t.Fatal("the install did not end with its installer")
	}
}
