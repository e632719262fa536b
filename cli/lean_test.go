package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/cli"
)

func TestLeanBuildLeavesKubernetesOut(t *testing.T) {
	out, err := exec.Command("go", "list", "-tags", "lean", "-deps", "../cmd/runtimectl").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, p := range strings.Fields(string(out)) {
		assert.False(t, strings.HasPrefix(p, "k8s.io/") || strings.HasPrefix(p, "sigs.k8s.io/"), "the lean build links %s", p)
	}
}

func TestLeanBuildRunsTheFullOneForKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries")
	}
	dir := t.TempDir()
	lean := filepath.Join(dir, "runtimectl")
	for _, b := range [][]string{{"-tags", "lean", "-o", lean}, {"-o", filepath.Join(dir, cli.FullBinary)}} {
		out, err := exec.Command("go", append(append([]string{"build"}, b...), "../cmd/runtimectl")...).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	out, err := exec.Command(lean, "kube", "rbac", "--namespace", "agents").CombinedOutput()
	require.NoError(t, err, string(out))
	assert.Contains(t, string(out), "kind: Role", "the full build printed the Role")
	assert.Contains(t, string(out), "namespace: agents")

	// Without the full build beside it (nor on PATH), it says what to do.
	require.NoError(t, os.Remove(filepath.Join(dir, cli.FullBinary)))
	cmd := exec.Command(lean, "session", "ls", "--backend", "kubernetes")
	cmd.Env = append(os.Environ(), "PATH="+dir)
	out, err = cmd.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), cli.FullBinary)
	assert.Contains(t, string(out), "make build")
}
