package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runtimectl-cli-test")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "runtimectl")
	out, err := exec.Command("go", "build", "-o", binary, "../cmd/runtimectl").CombinedOutput()
	if err != nil {
		panic(string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type cmdResult struct {
	code           int
	stdout, stderr string
}

func rt(t *testing.T, stdin string, args ...string) cmdResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return cmdResult{code, out.String(), errb.String()}
}

func startSession(t *testing.T, extra ...string) string {
	t.Helper()
	testenv.Images(t)
	name := testenv.Name(t)
	t.Cleanup(func() { rt(t, "", "session", "rm", name, "--force") })
	r := rt(t, "", append([]string{"session", "start", name}, extra...)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, name+"\n", r.stdout)
	return name
}

// Code that begins with "-" runs after --, with flags before or after NAME.
func TestExecCodeThatBeginsWithADash(t *testing.T) {
	name := startSession(t)
	r := rt(t, "", "session", "exec", name, "x = 3")
	require.Equal(t, 0, r.code, r.stderr)
	r = rt(t, "", "session", "exec", name, "--", "-(x ** 2)")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "-9\n", r.stdout)
	r = rt(t, "", "session", "exec", "--json", name, "--", "-x")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"result": "-3"`)
	r = rt(t, "", "session", "exec", name, "-(x ** 2)")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "runtimectl session exec "+name+" -- '-(x ** 2)'")
}

func TestCLIScenario(t *testing.T) {
	name := startSession(t)
	r := rt(t, "", "session", "start", name) // idempotent on a running session
	assert.Equal(t, 0, r.code)

	r = rt(t, "", "session", "exec", name, `import pandas as pd; df = pd.DataFrame({"a": [1, 2, 3]})`)
	require.Equal(t, 0, r.code, r.stderr)
	r = rt(t, "", "session", "exec", name, "df.a.sum()")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "6\n", r.stdout)

	r = rt(t, "", "session", "exec", name, "print(undefined)")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.stderr, "NameError")
	assert.Empty(t, r.stdout)

	r = rt(t, "print(df.a.max())", "session", "exec", name) // code from stdin
	assert.Equal(t, "3\n", r.stdout)
	f := filepath.Join(t.TempDir(), "code.py")
	require.NoError(t, os.WriteFile(f, []byte("print('from file')"), 0o644))
	r = rt(t, "", "session", "exec", "-f", f, name) // flags before the name
	assert.Equal(t, "from file\n", r.stdout)

	r = rt(t, "", "session", "exec", name, "import time; time.sleep(30)", "--timeout", "1")
	assert.Equal(t, 124, r.code, r.stderr)
	r = rt(t, "", "session", "exec", name, "df.a.sum()")
	assert.Equal(t, "6\n", r.stdout, "state kept after the timeout")

	r = rt(t, "", "session", "exec", name, "x = 7\nx * 6", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	for _, k := range []string{"session", "seq", "status", "stdout", "stderr", "result", "error", "duration_ms", "outputs"} {
		assert.Contains(t, res, k)
	}
	assert.Equal(t, "42", res["result"])
	assert.Equal(t, "ok", res["status"])
	assert.Equal(t, name, res["session"])

	r = rt(t, "", "session", "exec", name, "raise ValueError('x')", "--json")
	assert.Equal(t, 1, r.code, "--json keeps the exit code")
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, "ValueError", res["error"].(map[string]any)["name"])

	r = rt(t, "", "session", "ls")
	assert.Equal(t, 0, r.code)
	assert.Contains(t, r.stdout, name)
	r = rt(t, "", "session", "ls", "--json")
	var list []session.Info
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &list))

	r = rt(t, "", "session", "rm", name)
	assert.Equal(t, 125, r.code, "rm of a running session without --force")
	assert.Contains(t, r.stderr, "--force")
	r = rt(t, "", "session", "stop", name)
	assert.Equal(t, 0, r.code, r.stderr)
	r = rt(t, "", "session", "exec", name, "df.a.sum()")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "6\n", r.stdout)
	assert.Contains(t, r.stderr, "started it again", "exec on a stopped session says it started it")
	r = rt(t, "", "session", "stop", name)
	require.Equal(t, 0, r.code)
	r = rt(t, "", "session", "rm", name)
	assert.Equal(t, 0, r.code, r.stderr)
	r = rt(t, "", "session", "exec", name, "1")
	assert.Equal(t, 125, r.code, "no such session")
	assert.Contains(t, r.stderr, "no such session")
}

func TestCLIBashScenario(t *testing.T) {
	name := startSession(t, "--lang", "bash")
	r := rt(t, "", "session", "exec", name, "cd /tmp; X=41; f() { echo $((X+1)); }")
	require.Equal(t, 0, r.code, r.stderr)
	r = rt(t, "", "session", "exec", name, "pwd; f")
	assert.Equal(t, "/tmp\n42\n", r.stdout)
	r = rt(t, "", "session", "exec", name, "false")
	assert.Equal(t, 1, r.code)
}

func TestCtrlCInterruptsTheCode(t *testing.T) {
	name := startSession(t)
	rt(t, "", "session", "exec", name, "kept = 5")
	code, stderr := signalWhenStarted(t, syscall.SIGINT, "session", "exec", name, "import time\nprint('started', flush=True)\ntime.sleep(60)")
	assert.Equal(t, 130, code, stderr)
	r := rt(t, "", "session", "exec", name, "kept")
	assert.Equal(t, "5\n", r.stdout)
}

func TestConcurrentCLIProcesses(t *testing.T) {
	name := startSession(t)
	const n = 8
	results := make(chan cmdResult, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			results <- rt(t, "", "session", "exec", name, "import os\nprint('me-%d' % "+string(rune('0'+i))+")\nos.getpid() > 0", "--json")
		}(i)
	}
	seqs := map[float64]bool{}
	for i := 0; i < n; i++ {
		r := <-results
		require.Equal(t, 0, r.code, r.stderr)
		var res map[string]any
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
		assert.Regexp(t, `^me-[0-7]\n$`, res["stdout"])
		seqs[res["seq"].(float64)] = true
	}
	for i := 1; i <= n; i++ {
		assert.True(t, seqs[float64(i)], "seq %d", i)
	}
	r := rt(t, "", "session", "history", name, "--format", "json")
	var execs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &execs))
	assert.Len(t, execs, n)
}

func testenvDocker(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	return string(out), err
}

// Arguments that cannot mean what they say are usage errors (exit 2), refused before anything
// runs or is made: a timeout under a millisecond (1ns meant no timeout before), code past the
// limit, a negative number of snapshots to keep.
func TestBadArgumentsAreUsageErrors(t *testing.T) {
	name := startSession(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"session", "exec", name, "x = 1", "--timeout", "0s"}, "--timeout"},
		{[]string{"session", "exec", name, "x = 1", "--timeout", "1ns"}, "--timeout"},
		{[]string{"session", "start", testenv.Name(t), "--keep-snapshots", "-1"}, "snapshots to keep"},
	} {
		r := rt(t, "", tc.args...)
		assert.Equal(t, 2, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want)
	}
	big := filepath.Join(t.TempDir(), "big.py")
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte("#"), 50<<20), 0o644))
	r := rt(t, "", "session", "exec", name, "-f", big)
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stderr, "the limit is 8 MiB")
	r = rt(t, "", "session", "history", name, "--format", "json")
	assert.Equal(t, "[]\n", r.stdout, "nothing ran")
}

// SIGTERM ends `session exec` (a supervisor's stop, a caller's own timeout) instead of being a
// Ctrl-C that waits for the code: it asks for an interrupt, and when the code does not answer
// within half a second, it ends with 143 and says what became of the code.
func TestSIGTERMEndsExec(t *testing.T) {
	name := startSession(t)
	rt(t, "", "session", "exec", name, "kept = 5")
	code, stderr := signalWhenStarted(t, syscall.SIGTERM, "session", "exec", name, "import ctypes, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\nprint('started', flush=True)\nctypes.CDLL(None).sleep(60)")
	assert.Equal(t, 143, code, stderr)
	assert.Contains(t, stderr, "asked to stop")
	// The agent ends the code that ignored the interrupt; the session answers with its state.
	r := rt(t, "", "session", "exec", name, "kept")
	assert.Equal(t, "5\n", r.stdout, r.stderr)
}

// The CLI as docker users type it: rm of several names with -f, ls -q and --format, interrupt
// of a stopped session (left stopped), --json without HTML escapes.
func TestDockerStyleCLI(t *testing.T) {
	a, b := startSession(t), startSession(t)
	r := rt(t, "", "session", "ls", "-q")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, strings.Fields(r.stdout), a)
	assert.Contains(t, strings.Fields(r.stdout), b)
	r = rt(t, "", "session", "ls", "--format", "{{.Name}}:{{.State}}")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, strings.Split(r.stdout, "\n"), a+":running")
	r = rt(t, "", "session", "ls", "--format", "json")
	require.Equal(t, 0, r.code, r.stderr)
	var one map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.Split(strings.TrimSpace(r.stdout), "\n")[0]), &one))
	assert.Contains(t, one, "name")
	r = rt(t, "", "session", "ls", "-q", "--json")
	assert.Equal(t, 2, r.code, "one output form at a time")

	r = rt(t, "", "session", "exec", a, "'<a&b>'", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `<a&b>`, "no \\u003c escapes")

	r = rt(t, "", "session", "stop", a)
	require.Equal(t, 0, r.code, r.stderr)
	r = rt(t, "", "session", "interrupt", a)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "not running")
	r = rt(t, "", "session", "ls", "--format", "{{.Name}} {{.State}}")
	assert.Contains(t, r.stdout, a+" exited", "interrupt left it stopped")

	r = rt(t, "", "session", "rm", "-f", a, b, "no-such-session-x")
	assert.NotEqual(t, 0, r.code, "one name did not exist")
	assert.Contains(t, r.stderr, "no-such-session-x")
	r = rt(t, "", "session", "ls", "-q")
	assert.NotContains(t, strings.Fields(r.stdout), a)
	assert.NotContains(t, strings.Fields(r.stdout), b, "the others were removed")
}

// signalWhenStarted runs runtimectl with args, sends it sig once its output says "started",
// and returns its exit code and stderr.
func signalWhenStarted(t *testing.T, sig syscall.Signal, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Start())
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "started") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(sig))
	err := cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	require.True(t, ok, "exit status: %v, stderr %s", err, errb.String())
	return ee.ExitCode(), errb.String()
}

// lockedBuffer is a bytes.Buffer that a running command writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// `session start` on an existing session: flags that differ from its settings are refused
// (exit 2) naming them and what to do; the same flags, or none, start it as it is.
func TestStartWithDifferentSettingsIsRefused(t *testing.T) {
	name := startSession(t)
	rt(t, "", "session", "exec", name, "kept = 7")
	r := rt(t, "", "session", "start", name, "--memory", "4g", "--network", "bridge")
	assert.Equal(t, 2, r.code, r.stderr)
	assert.Contains(t, r.stderr, "--memory 4GiB (the session has 2GiB)")
	assert.Contains(t, r.stderr, "--network bridge (the session has none)")
	assert.Contains(t, r.stderr, "session rm")
	assert.Contains(t, r.stderr, "--upgrade")
	for _, args := range [][]string{{}, {"--memory", "2g", "--lang", "python"}} {
		r = rt(t, "", append([]string{"session", "start", name}, args...)...)
		assert.Equal(t, 0, r.code, "%v: %s", args, r.stderr)
	}
	r = rt(t, "", "session", "exec", name, "kept")
	assert.Equal(t, "7\n", r.stdout, "the session is untouched")
}

// `session inspect` prints the settings, limits, container, volumes and the agent's status as
// JSON; `session logs` the agent's own log (never the code's output); `session stats` the
// session's CPU, memory, processes and disk.
func TestInspectLogsAndStats(t *testing.T) {
	name := startSession(t)
	rt(t, "", "session", "exec", name, "print('only in the output')")
	r := rt(t, "", "session", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	var in struct {
		Name     string
		Backend  string
		Settings struct{ Lang string }
		Limits   struct {
			Memory int64
			CPUs   float64
			Pids   int64
			Disk   int64
		}
		Runtime *struct{ Running bool }
		Volumes struct{ Workspace, State string }
		Status  *struct {
			NextSeq int64 `json:"next_seq"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &in), r.stdout)
	assert.Equal(t, name, in.Name)
	assert.Equal(t, "docker", in.Backend)
	assert.Equal(t, "python", in.Settings.Lang)
	assert.Equal(t, int64(2<<30), in.Limits.Memory)
	assert.Equal(t, 1.0, in.Limits.CPUs)
	assert.Equal(t, int64(512), in.Limits.Pids)
	assert.Equal(t, int64(10<<30), in.Limits.Disk)
	require.NotNil(t, in.Runtime)
	assert.True(t, in.Runtime.Running)
	assert.Equal(t, "runtimectl-"+name, in.Volumes.Workspace)
	assert.Equal(t, "runtimectl_state-"+name, in.Volumes.State)
	require.NotNil(t, in.Status)
	assert.Equal(t, int64(2), in.Status.NextSeq)

	r = rt(t, "", "session", "logs", name)
	require.Equal(t, 0, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "only in the output", "the code's output is never in the agent's log")
	r = rt(t, "", "session", "logs", name, "--tail", "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.LessOrEqual(t, strings.Count(r.stdout, "\n"), 1)

	r = rt(t, "", "session", "stats", name, "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var st struct {
		MemoryBytes int64 `json:"memory_bytes"`
		MemoryLimit int64 `json:"memory_limit"`
		Pids        int64 `json:"pids"`
		DiskLimit   int64 `json:"disk_limit"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st), r.stdout)
	assert.Greater(t, st.MemoryBytes, int64(10<<20))
	assert.Equal(t, int64(2<<30), st.MemoryLimit)
	assert.Greater(t, st.Pids, int64(1))
	assert.Equal(t, int64(10<<30), st.DiskLimit)
	r = rt(t, "", "session", "stats", name)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "MEM USAGE / LIMIT")

	rt(t, "", "session", "stop", name)
	r = rt(t, "", "session", "stats", name)
	assert.Equal(t, 125, r.code)
	assert.Contains(t, r.stderr, "is not running")
	r = rt(t, "", "session", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"running": false`)
}

// `session exec NAME` with no code reads standard input; a stdin that stays open gives way to
// Ctrl-C and SIGTERM: the command ends (130), says nothing ran, and runs nothing.
func TestExecReadingAnOpenStdinIsCancellable(t *testing.T) {
	name := startSession(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := exec.Command(binary, "session", "exec", name)
		stdin, err := cmd.StdinPipe() // never closed: a pipe left open
		require.NoError(t, err)
		var errb lockedBuffer
		cmd.Stderr = &errb
		require.NoError(t, cmd.Start())
		time.Sleep(500 * time.Millisecond)
		require.NoError(t, cmd.Process.Signal(sig))
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			ee, ok := err.(*exec.ExitError)
			require.True(t, ok, "%v: %v %s", sig, err, errb.String())
			assert.Equal(t, 130, ee.ExitCode(), sig)
			assert.Contains(t, errb.String(), "nothing ran")
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("%v did not end a read of an open stdin", sig)
		}
		stdin.Close()
	}
	r := rt(t, "", "session", "history", name, "--format", "json")
	assert.Equal(t, "[]\n", r.stdout, "nothing ran")
}

// The shell completes session names for the commands that take one, and image references for
// `image rm`.
func TestCompletionOfSessionNamesAndImages(t *testing.T) {
	name := startSession(t)
	for _, args := range [][]string{{"session", "exec", ""}, {"session", "stop", name[:5]}, {"session", "inspect", ""}} {
		r := rt(t, "", append([]string{"__complete"}, args...)...)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Contains(t, r.stdout, name+"\n", "%v", args)
	}
	r := rt(t, "", "__complete", "session", "exec", name, "")
	assert.NotContains(t, r.stdout, name+"\n", "only the first argument is a name")
	r = rt(t, "", "__complete", "image", "rm", "runtimectl/")
	assert.Contains(t, r.stdout, "runtimectl/python:")
}
