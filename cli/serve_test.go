package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serve refuses what would expose it, before it listens or asks Docker anything.
func TestServeRefusesUnsafeSetups(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	t.Setenv("RUNTIMECTL_TOKEN_FILE", "")
	dir := t.TempDir()
	good := filepath.Join(dir, "tokens.txt")
	require.NoError(t, os.WriteFile(good, []byte("0123456789abcdef0123 me admin\n"), 0o600))
	open := filepath.Join(dir, "open.txt")
	require.NoError(t, os.WriteFile(open, []byte("0123456789abcdef0123 me\n"), 0o644))
	require.NoError(t, os.Chmod(open, 0o644))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no token file", []string{"serve"}, "--token-file"},
		{"readable token file", []string{"serve", "--token-file", open}, "chmod 600"},
		{"missing token file", []string{"serve", "--token-file", filepath.Join(dir, "none")}, "no such file"},
		{"all interfaces without TLS", []string{"serve", "--token-file", good, "--listen", "0.0.0.0:8700"}, "--tls-cert"},
		{"empty host without TLS", []string{"serve", "--token-file", good, "--listen", ":8700"}, "--tls-cert"},
		{"cert without key", []string{"serve", "--token-file", good, "--tls-cert", "c.pem"}, "go together"},
		{"missing cert files", []string{"serve", "--token-file", good, "--tls-cert", "c.pem", "--tls-key", "k.pem"}, "TLS"},
		{"bad listen", []string{"serve", "--token-file", good, "--listen", "nonsense"}, "HOST:PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tc.args...)
			assert.Equal(t, 2, code, stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.want)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
		})
	}
}
