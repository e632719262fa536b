package session_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// localIndex serves wheels as a PEP 503 simple index on all addresses of the host, and returns
// its URL as the engine's default bridge reaches the host (its gateway), and that host.
func localIndex(t *testing.T, wheels map[string][]byte) (string, string) {
	t.Helper()
	mux := http.NewServeMux()
	for name, data := range wheels {
		file := name + "-1.0-py3-none-any.whl"
		sum := sha256.Sum256(data)
		mux.HandleFunc("/simple/"+name+"/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "<html><body><a href=\"/files/%s#sha256=%x\">%s</a></body></html>", file, sum, file)
		})
		mux.HandleFunc("/files/"+file, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(data) })
	}
	base, gw := testenv.ServeOnBridge(t, mux)
	return base + "/simple", gw
}

// Packages at runtime: `session install` from a local index puts a package into the session's
// virtual environment on its volume, importable at once and again after a stop and start; a
// `%pip install` line in the code does the same before the cell runs; `!cmd` runs a shell
// command; other magics are a clear error. The session itself keeps --network none.
func TestInstallPackagesAtRuntime(t *testing.T) {
	c := testenv.Client(t)
	ctx := context.Background()
	index, host := localIndex(t, map[string][]byte{"tinypkg": testenv.Wheel(t, "tinypkg", 42), "otherpkg": testenv.Wheel(t, "otherpkg", 7)})
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	run := func(code string) *session.Result {
		t.Helper()
		r, err := s.Exec(ctx, code, session.ExecOptions{})
		require.NoError(t, err, code)
		return r
	}
	r := run("import socket\ntry:\n    socket.create_connection(('" + host + "', 80), timeout=2)\n    net = 'reached'\nexcept OSError as e:\n    net = 'no network'\nnet")
	assert.Equal(t, "'no network'", *r.Result, "the session has no network")

	var out bytes.Buffer
	require.NoError(t, c.Install(ctx, name, session.InstallOptions{Packages: []string{"tinypkg"}, IndexURL: index, TrustedHosts: []string{host}, Output: &out}), out.String())
	assert.Contains(t, out.String(), "Successfully installed tinypkg-1.0")
	r = run("import tinypkg\ntinypkg.VALUE")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "42", *r.Result, "importable at once, without a restart")

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
