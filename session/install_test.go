package session_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
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

// wheel builds a pure-Python wheel of one module whose VALUE is value.
func wheel(t *testing.T, name string, value int) []byte {
	t.Helper()
	files := map[string]string{
		name + "/__init__.py":            fmt.Sprintf("VALUE = %d\n", value),
		name + "-1.0.dist-info/METADATA": fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n", name),
		name + "-1.0.dist-info/WHEEL":    "Wheel-Version: 1.0\nGenerator: runtimectl-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for path, content := range files {
		w, err := zw.Create(path)
		require.NoError(t, err)
		_, err = w.Write([]byte(content))
		require.NoError(t, err)
		sum := sha256.Sum256([]byte(content))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", path, base64.RawURLEncoding.EncodeToString(sum[:]), len(content))
	}
	rec := name + "-1.0.dist-info/RECORD"
	fmt.Fprintf(&record, "%s,,\n", rec)
	w, err := zw.Create(rec)
	require.NoError(t, err)
	_, err = w.Write([]byte(record.String()))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// localIndex serves wheels as a PEP 503 simple index on all addresses of the host, and returns
// its URL as the engine's default bridge reaches the host (its gateway), and that host.
func localIndex(t *testing.T, wheels map[string][]byte) (string, string) {
	t.Helper()
	out, err := exec.Command("docker", "network", "inspect", "bridge", "-f", "{{(index .IPAM.Config 0).Gateway}},{{(index .IPAM.Config 0).Subnet}}").Output()
	require.NoError(t, err)
	gw, subnet, _ := strings.Cut(strings.TrimSpace(string(out)), ",")
	if gw == "" || gw == "<no value>" {
		// The engine gives the bridge the first address of its subnet when none is configured.
		ip, _, err := net.ParseCIDR(subnet)
		require.NoError(t, err, "bridge subnet %q", subnet)
		ip = ip.To4()
		ip[3]++
		gw = ip.String()
	}
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	mux := http.NewServeMux()
	for name, data := range wheels {
		file := name + "-1.0-py3-none-any.whl"
		sum := sha256.Sum256(data)
		mux.HandleFunc("/simple/"+name+"/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "<html><body><a href=\"/files/%s#sha256=%x\">%s</a></body></html>", file, sum, file)
		})
		mux.HandleFunc("/files/"+file, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(data) })
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	return fmt.Sprintf("http://%s:%d/simple", gw, port), gw
}

// Packages at runtime: `session install` from a local index puts a package into the session's
// virtual environment on its volume, importable at once and again after a stop and start; a
// `%pip install` line in the code does the same before the cell runs; `!cmd` runs a shell
// command; other magics are a clear error. The session itself keeps --network none.
func TestInstallPackagesAtRuntime(t *testing.T) {
	c := testenv.Client(t)
	ctx := context.Background()
	index, host := localIndex(t, map[string][]byte{"tinypkg": wheel(t, "tinypkg", 42), "otherpkg": wheel(t, "otherpkg", 7)})
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
	r, err = s2.Exec(ctx, "%timeit 1 + 1", session.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "error", string(r.Status))
	require.NotNil(t, r.Error)
	assert.Contains(t, r.Error.Value, "IPython magics are not supported: %timeit")

	err = c.Install(ctx, name, session.InstallOptions{Packages: []string{"no-such-package-xyz"}, IndexURL: index, TrustedHosts: []string{host}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pip exited with code")
	assert.NotContains(t, err.Error(), "\n")
}
