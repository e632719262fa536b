package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTheTrustBundleIsTheSystemsAndTheSessionsCA(t *testing.T) {
	dir := t.TempDir()
	sys := filepath.Join(dir, "system.crt")
	require.NoError(t, os.WriteFile(sys, []byte("SYSTEM"), 0o644))
	out := filepath.Join(dir, "bundle.pem")
	require.NoError(t, writeTrustBundle(out, sys, []byte("SESSION CA\n")))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "SYSTEM\nSESSION CA\n", string(b))
	st, err := os.Stat(out)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm(), "the session user reads it")

	require.NoError(t, writeTrustBundle(out, filepath.Join(dir, "none"), []byte("CA")))
	b, _ = os.ReadFile(out)
	assert.Equal(t, "CA", string(b), "no system bundle: the session's CA alone")
}

func TestKernelEnvPutsEgressLast(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://elsewhere:1")
	env := kernelEnv(Config{Workdir: "/workspace", KernelEnv: []string{"HTTP_PROXY=http://127.0.0.1:3128"}})
	assert.Equal(t, "HTTP_PROXY=http://127.0.0.1:3128", env[len(env)-1], "os/exec keeps the last value of a key")
}
