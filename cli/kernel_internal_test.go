package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/session"
)

func TestKernelInstallWritesKernelspec(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock") // install asks the engine nothing
	prefix := t.TempDir()
	var out, errb bytes.Buffer
	code := Main([]string{"--backend", "docker", "kernel", "install", "--prefix", prefix, "--lang", "bash", "--memory", "1g", "--env", "A=1", "--env", "B=2", "--clean-restart"}, strings.NewReader(""), &out, &errb)
	require.Equal(t, 0, code, errb.String())
	dir := filepath.Join(prefix, "share", "jupyter", "kernels", "runtimectl-bash")
	assert.Equal(t, dir+"\n", out.String())
	b, err := os.ReadFile(filepath.Join(dir, "kernel.json"))
	require.NoError(t, err)
	var spec kernelSpec
	require.NoError(t, json.Unmarshal(b, &spec))
	assert.Equal(t, []string{"kernel", "run", "--connection-file", "{connection_file}"}, spec.Argv[1:5])
	assert.Subset(t, spec.Argv[5:], []string{"--backend=docker", "--lang=bash", "--memory=1GiB", "--env=A=1", "--env=B=2", "--clean-restart=true"})
	assert.NotContains(t, strings.Join(spec.Argv, " "), "--prefix")
	assert.True(t, filepath.IsAbs(spec.Argv[0]))
	assert.Equal(t, "Bash (runtimectl)", spec.DisplayName)
	assert.Equal(t, "bash", spec.Language)
	assert.Equal(t, "signal", spec.InterruptMode)
	assert.Equal(t, "bash", spec.Metadata["runtimectl"].(map[string]any)["lang"])

	// The default: python, for this user, in $JUPYTER_DATA_DIR.
	data := t.TempDir()
	t.Setenv("JUPYTER_DATA_DIR", data)
	out.Reset()
	require.Equal(t, 0, Main([]string{"kernel", "install", "--session", "analysis"}, strings.NewReader(""), &out, &errb))
	b, err = os.ReadFile(filepath.Join(data, "kernels", "runtimectl-python", "kernel.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &spec))
	assert.Contains(t, spec.Argv, "--session=analysis")
	assert.Contains(t, spec.Argv, "--lang=python")
	assert.Equal(t, "python", spec.Language)
	assert.Equal(t, "Python 3 (runtimectl)", spec.DisplayName)
}

func TestKernelUsageErrors(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"kernel", "install", "--lang", "cobol"}, "python, bash or node"},
		{[]string{"kernel", "install", "--name", "a b"}, "kernel name"},
		{[]string{"kernel", "install", "--user", "--prefix", "/tmp/x"}, "give one"},
		{[]string{"kernel", "install", "--session", "Bad Name"}, "invalid session name"},
		{[]string{"kernel", "run"}, "--connection-file"},
		{[]string{"kernel", "run", "--connection-file", "/nonexistent.json"}, "connection file"},
		{[]string{"kernel", "frob"}, "unknown command"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Main(tc.args, strings.NewReader(""), &out, &errb)
			assert.Equal(t, 2, code, errb.String())
			assert.Contains(t, errb.String(), tc.want)
		})
	}
}

func TestKernelSessionName(t *testing.T) {
	t.Setenv("RUNTIMECTL_KERNELS_FILE", filepath.Join(t.TempDir(), "kernels.json"))
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	conn := "/run/user/0/jupyter/kernel-3f2a1b9c-1234-5678-9abc-def012345678.json"

	name, _, derived := kernelSessionName("fixed", "python", conn, env(map[string]string{"RUNTIMECTL_SESSION": "other"}))
	assert.Equal(t, "fixed", name, "the flag first")
	assert.False(t, derived)
	name, _, _ = kernelSessionName("", "python", conn, env(map[string]string{"RUNTIMECTL_SESSION": "other", "JPY_SESSION_NAME": "/nb/a.ipynb"}))
	assert.Equal(t, "other", name, "then the environment")

	nb := env(map[string]string{"JPY_SESSION_NAME": "/home/u/Analysis of Sales.ipynb"})
	a, key, derived := kernelSessionName("", "python", conn, nb)
	assert.False(t, derived)
	assert.Regexp(t, `^nb-analysis-of-sales-[0-9a-f]{8}$`, a)
	require.NoError(t, session.ValidateName(a))
	b, _, _ := kernelSessionName("", "python", "/other/kernel-00000000.json", nb)
	assert.Equal(t, a, b, "the same notebook, another connection: the same session")
	c, _, _ := kernelSessionName("", "python", conn, env(map[string]string{"JPY_SESSION_NAME": "/home/v/Analysis of Sales.ipynb"}))
	assert.NotEqual(t, a, c, "another notebook of the same name: another session")
	bash, _, _ := kernelSessionName("", "bash", conn, nb)
	assert.True(t, strings.HasSuffix(bash, "-bash"), bash)

	// A recorded session is the notebook's, whatever the derived name would be.
	recordKernel(discardLog(), key, "chosen-earlier", "python")
	again, _, _ := kernelSessionName("", "python", conn, nb)
	assert.Equal(t, "chosen-earlier", again)

	name, _, derived = kernelSessionName("", "python", conn, env(nil))
	assert.Equal(t, "kernel-3f2a1b9c", name)
	assert.True(t, derived)
	name, _, _ = kernelSessionName("", "node", "/tmp/weird name.json", env(nil))
	assert.Regexp(t, `^kernel-[0-9a-f]{8}-node$`, name)

	long, _, _ := kernelSessionName("", "python", conn, env(map[string]string{"JPY_SESSION_NAME": strings.Repeat("x", 200) + ".ipynb"}))
	require.NoError(t, session.ValidateName(long))
}

func TestHeldStreamDropsTheTraceback(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	h := newHeldStream(func(s string) { mu.Lock(); sent = append(sent, s); mu.Unlock() })
	h.write("warning: x\n")
	tb := "Traceback (most recent call last):\nValueError: no\n"
	h.write(tb)
	h.dropSuffix(tb)
	h.stop()
	assert.Equal(t, []string{"warning: x\n"}, sent)

	sent = nil
	h = newHeldStream(func(s string) { mu.Lock(); sent = append(sent, s); mu.Unlock() })
	h.write("progress\n")
	assert.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(sent) == 1 }, 2*time.Second, 10*time.Millisecond, "held output goes out by itself")
	h.stop()
}

func TestTracebackAndOutputs(t *testing.T) {
	assert.Equal(t, []string{"Traceback (most recent call last):", "ZeroDivisionError: division by zero"}, tracebackLines("Traceback (most recent call last):\nZeroDivisionError: division by zero\n", "ZeroDivisionError", "division by zero"))
	assert.Equal(t, []string{"E: v"}, tracebackLines("", "E", "v"))
	assert.Equal(t, []string{"E"}, tracebackLines("", "E", ""))

	d, ok := outputBundle(history.Output{Mime: "image/png", Path: "/workspace/outputs/fig-1.png", Data: []byte{0x89, 'P', 'N', 'G'}})
	require.True(t, ok)
	assert.JSONEq(t, `"iVBORw=="`, string(d["image/png"]))
	assert.JSONEq(t, `"<image/png fig-1.png>"`, string(d["text/plain"]))
	_, ok = outputBundle(history.Output{Mime: "image/png", Path: "/workspace/big.png"})
	assert.False(t, ok, "an output without its data is not shown")
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
