package cli_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// `runtimectl mcp` takes the global --backend and RUNTIMECTL_BACKEND, as every command does
// (issue 24): the engine they name is the one it reaches, and a failure to reach it is the
// CLI's one line on stderr, before any byte of the protocol on stdout.
func TestMCPTakesTheGlobalBackend(t *testing.T) {
	code, stdout, stderr := runCLI(t, "", "--backend", "nonsense", "mcp")
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, `backend "nonsense": use docker or kubernetes`)
	assert.Empty(t, stdout)

	code, stdout, stderr = runCLI(t, "", "--backend", "kubernetes", "--kubeconfig", "/nonexistent/kubeconfig", "mcp", "--session", "k")
	assert.Equal(t, 125, code, stderr)
	assert.Contains(t, stderr, "kubeconfig /nonexistent/kubeconfig", "the cluster's kubeconfig, not Docker")
	assert.Empty(t, stdout)

	t.Setenv("RUNTIMECTL_BACKEND", "kubernetes")
	code, stdout, stderr = runCLI(t, "", "--kubeconfig", "/nonexistent/kubeconfig", "mcp")
	assert.Equal(t, 125, code, stderr)
	assert.Contains(t, stderr, "kubeconfig /nonexistent/kubeconfig")
	assert.Empty(t, stdout)

	code, _, stderr = runCLI(t, "", "mcp", "--allow-tools", "run_code,format_disk")
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "--allow-tools format_disk: no such tool")
}
