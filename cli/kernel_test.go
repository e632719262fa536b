package cli_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// jupyterPython is Debian's python3 with jupyter_client and friends (scripts/test-deps.sh
// installs them); without -short their absence is a failure.
func jupyterPython(t *testing.T, modules ...string) string {
	t.Helper()
	py := "/usr/bin/python3"
	args := []string{"-c", "import " + strings.Join(modules, ", ")}
	if out, err := exec.Command(py, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import %s (run scripts/test-deps.sh): %s", py, strings.Join(modules, ", "), out)
	}
	return py
}

// kernelEnv installs the kernel (as `runtimectl kernel install` does for a user) in a data
// directory of the test's own and returns the environment for Jupyter's clients.
func kernelEnv(t *testing.T, installArgs ...string) []string {
	t.Helper()
	bin := binary // built by TestMain (exec_test.go)
	data := t.TempDir()
	env := append(os.Environ(), "JUPYTER_DATA_DIR="+data, "RUNTIMECTL_KERNELS_FILE="+filepath.Join(data, "kernels.json"),
		"PYDEVD_DISABLE_FILE_VALIDATION=1", "JUPYTER_PLATFORM_DIRS=1")
	cmd := exec.Command(bin, append([]string{"kernel", "install"}, installArgs...)...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	return env
}

// kernelSessions returns n session names for the test, removed at its end whoever made them.
func kernelSessions(t *testing.T, c *session.Client, n int) []string {
	var names []string
	for range n {
		name := testenv.Name(t)
		names = append(names, name)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_ = c.Remove(ctx, name, true)
		})
	}
	return names
}

func runPython(t *testing.T, env []string, py string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", py, strings.Join(args, " "), err, out)
	}
	t.Logf("%s", out)
	return string(out)
}

// Jupyter's own client library against the kernel: KernelManager + BlockingKernelClient
// (execute, streams, figures, errors, interrupt, history, complete / inspect / is_complete
// answered as ipykernel answers them, restart_kernel keeping a variable, and a kernel installed
// with --clean-restart whose restart begins empty) and the mission's start_new_kernel loop
// (cli/testdata/kernel/clients.py).
func TestKernelWithJupyterClient(t *testing.T) {
	c := testenv.Client(t)
	py := jupyterPython(t, "jupyter_client", "ipykernel")
	env := kernelEnv(t)
	cmd := exec.Command(binary, "kernel", "install", "--name", "runtimectl-clean", "--clean-restart")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	names := kernelSessions(t, c, 4)
	env = append(env, "KERNEL=runtimectl-python", "KERNEL_CLEAN=runtimectl-clean", "SESSION_A="+names[0], "SESSION_B="+names[1],
		"SESSION_C="+names[3], "RUNTIMECTL_SESSION="+names[2])
	res := runPython(t, env, py, "testdata/kernel/clients.py")
	assert.Contains(t, res, "OK")
	assert.NotContains(t, res, "skipped", "every test ran")

	ctx := testenv.Ctx(t, 2*time.Minute)
	// A shutdown without restart stops the session and keeps it, with its history.
	infos, err := c.List(ctx)
	require.NoError(t, err)
	states := map[string]session.State{}
	for _, i := range infos {
		states[i.Name] = i.State
	}
	for _, n := range names {
		assert.Equal(t, engine.StateExited, states[n], "session %s after its kernel's shutdown", n)
	}
	execs, _, err := c.History(ctx, names[0])
	require.NoError(t, err)
	var codes []string
	for _, e := range execs {
		codes = append(codes, e.Code)
	}
	assert.Contains(t, codes, "history_marker = 'hm'")
}

// Notebooks run by `jupyter nbconvert --execute` with the kernel give the outputs ipykernel
// gives (cli/testdata/kernel/notebooks.py): same output and mime types, same text where it is
// deterministic; "+stop" runs a notebook through nbclient with a `session stop` before every
// cell, as the held-out corpus is run.
func TestKernelNotebooksMatchIpykernel(t *testing.T) {
	c := testenv.Client(t)
	py := jupyterPython(t, "nbclient", "nbconvert", "ipykernel", "pandas", "matplotlib")
	env := kernelEnv(t)
	notebooks := []string{"basics", "pandas", "pandas+stop", "display", "magics", "figure", "magics+stop", "display+stop", "figure+stop"}
	names := kernelSessions(t, c, len(notebooks))
	env = append(env, "KERNEL=runtimectl-python", "SESSIONS="+strings.Join(names, ","), "RUNTIMECTL="+binary)
	out := runPython(t, env, py, append([]string{"testdata/kernel/notebooks.py", t.TempDir()}, notebooks...)...)
	assert.Contains(t, out, fmt.Sprintf("%d passed, 0 failed", len(notebooks)))
}
