package session_test

import (
	"bytes"
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

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

func gcActions(acts []session.GCAction, name string) []session.GCAction {
	var out []session.GCAction
	for _, a := range acts {
		if a.Session == name {
			out = append(out, a)
		}
	}
	return out
}

// A session started with --ttl is removed by `session gc` once idle that long, running or
// stopped, after an export of its workspace and history when asked; before then it is left
// alone.
func TestTTLRemovesIdleSessions(t *testing.T) {
	c := testenv.Client(t)
	ctx := context.Background()
	running, stopped := testenv.Name(t), testenv.Name(t)
	for _, name := range []string{running, stopped} {
		s, _, err := c.Start(ctx, session.Spec{Name: name, TTL: 2 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })
		r, err := s.Exec(ctx, "open('/workspace/kept.txt', 'w').write('data')", session.ExecOptions{})
		require.NoError(t, err)
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		s.Close()
	}
	require.NoError(t, c.Stop(ctx, stopped))

	// Not idle for an hour: nothing to remove (whatever the machine's speed).
	acts, err := c.GC(ctx, session.GCOptions{TTL: time.Hour, DryRun: true})
	require.NoError(t, err)
	assert.Empty(t, gcActions(acts, running), "not idle that long")
	assert.Empty(t, gcActions(acts, stopped), "not idle that long")
	time.Sleep(2500 * time.Millisecond) // past their own ttl
	acts, err = c.GC(ctx, session.GCOptions{DryRun: true})
	require.NoError(t, err)
	for _, name := range []string{running, stopped} {
		got := gcActions(acts, name)
		require.Len(t, got, 1, "%s: %+v", name, acts)
		assert.Equal(t, "remove", got[0].Action)
		assert.Contains(t, got[0].Reason, "ttl 2s")
		assert.False(t, got[0].Done, "a dry run")
	}

	dir := t.TempDir()
	acts, err = c.GC(ctx, session.GCOptions{Export: dir, Only: []string{running, stopped}})
	require.NoError(t, err)
	for _, name := range []string{running, stopped} {
		got := gcActions(acts, name)
		require.Len(t, got, 1, "%s: %+v", name, acts)
		assert.True(t, got[0].Done, "%+v", got[0])
		b, err := os.ReadFile(filepath.Join(dir, name, "kept.txt"))
		require.NoError(t, err, "the workspace was exported before the removal")
		assert.Equal(t, "data", string(b))
		_, err = c.Inspect(ctx, name)
		assert.ErrorIs(t, err, session.ErrNotFound)
	}
}

// A session made by a test process that has ended (a test binary killed mid-run) is removed by
// the next gc; while the process lives it is left alone.
func TestGCRemovesSessionsOfEndedTestProcesses(t *testing.T) {
	c := testenv.Client(t)
	ctx := context.Background()
	proc := exec.Command("sleep", "60")
	require.NoError(t, proc.Start())
	id := session.TestRunIDOf(proc.Process.Pid)
	name := testenv.Name(t)
	s, _, err := c.Start(ctx, session.Spec{Name: name, TestRun: id})
	require.NoError(t, err)
	s.Close()
	t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })

	acts, err := c.GC(ctx, session.GCOptions{DryRun: true})
	require.NoError(t, err)
	assert.Empty(t, gcActions(acts, name), "its test process lives")

	require.NoError(t, proc.Process.Kill())
	_ = proc.Wait()
	acts, err = c.GC(ctx, session.GCOptions{Only: []string{name}})
	require.NoError(t, err)
	got := gcActions(acts, name)
	require.Len(t, got, 1, "%+v", acts)
	assert.True(t, got[0].Done)
	assert.Contains(t, got[0].Reason, "has ended")
	_, err = c.Inspect(ctx, name)
	assert.ErrorIs(t, err, session.ErrNotFound)
}

// WriteFile and ReadFile move a file's content through readers and writers, not host paths;
// a folder is refused for ReadFile, a path outside the workspace for both.
func TestWriteFileAndReadFileWithReadersAndWriters(t *testing.T) {
	c := testenv.Client(t)
	ctx := context.Background()
	s := testenv.Start(t, c, session.Spec{})
	data := strings.Repeat("line of data\n", 1000)
	require.NoError(t, s.WriteFile(ctx, "sub/data.txt", strings.NewReader(data)))
	r, err := s.Exec(ctx, "import os\n(len(open('/workspace/sub/data.txt').read()), os.stat('/workspace/sub/data.txt').st_uid)", session.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("(%d, 1000)", len(data)), *r.Result, "the content, owned by the session user")
	var back bytes.Buffer
	n, err := s.ReadFile(ctx, "/workspace/sub/data.txt", &back)
	require.NoError(t, err)
	assert.Equal(t, int64(len(data)), n)
	assert.Equal(t, data, back.String())
	_, err = s.ReadFile(ctx, "sub", &back)
	assert.ErrorIs(t, err, session.ErrInvalid)
	assert.ErrorIs(t, s.WriteFile(ctx, "/etc/passwd", strings.NewReader("x")), session.ErrInvalid)
}

// Events gives an execution as an iterator: output as it comes, then the result; leaving the
// loop early interrupts the code, and the session goes on.
func TestEventsIterateAnExecution(t *testing.T) {
	c := testenv.Client(t)
	ctx := context.Background()
	s := testenv.Start(t, c, session.Spec{})
	var kinds []session.EventKind
	var out strings.Builder
	var res *session.Result
	for e, err := range s.Events(ctx, "import sys\nfor i in range(3): print(i, flush=True)\nprint('e', file=sys.stderr)\n7 * 6", session.ExecOptions{}) {
		require.NoError(t, err)
		kinds = append(kinds, e.Kind)
		if e.Kind == session.EventStdout {
			out.Write(e.Data)
		}
		if e.Kind == session.EventResult {
			res = e.Result
		}
	}
	require.NotNil(t, res)
	assert.Equal(t, "42", *res.Result)
	assert.Equal(t, "0\n1\n2\n", out.String())
	assert.Equal(t, session.EventResult, kinds[len(kinds)-1], "the result is last")
	assert.Contains(t, kinds, session.EventStderr)

	for e, err := range s.Events(ctx, "import time\nprint('started', flush=True)\nwhile True: time.sleep(0.1)", session.ExecOptions{}) {
		require.NoError(t, err)
		if e.Kind == session.EventStdout {
			break // interrupts the loop in the session
		}
	}
	r, err := s.Exec(ctx, "6 * 7", session.ExecOptions{Timeout: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, "42", *r.Result, "the session answers after the early break")
}

// An execution's own environment and working directory (exec -e -w) hold for it only, in
// every language; a folder that is not there is refused, nothing run.
func TestExecEnvAndWorkdirHoldForOneExecution(t *testing.T) {
	c := testenv.Client(t)
	ctx := context.Background()
	for lang, code := range map[string][2]string{
		"python": {"import os; print(os.environ.get('RT_ONE'), os.environ.get('HOME'), os.getcwd())", "import os; print(os.environ.get('RT_ONE'), os.environ.get('HOME'), os.getcwd())"},
		"bash":   {`echo "${RT_ONE-None}" "$HOME" "$PWD"`, `echo "${RT_ONE-None}" "$HOME" "$PWD"`},
		"node":   {"console.log(process.env.RT_ONE ?? 'None', process.env.HOME, process.cwd())", "console.log(process.env.RT_ONE ?? 'None', process.env.HOME, process.cwd())"},
	} {
		t.Run(lang, func(t *testing.T) {
			s := testenv.Start(t, c, session.Spec{Lang: lang})
			mk := map[string]string{"python": "import os; os.makedirs('/workspace/sub', exist_ok=True)", "bash": "mkdir -p /workspace/sub", "node": "require('fs').mkdirSync('/workspace/sub', {recursive: true})"}[lang]
			r, err := s.Exec(ctx, mk, session.ExecOptions{})
			require.NoError(t, err)
			require.Equal(t, "ok", string(r.Status), r.Stderr)
			r, err = s.Exec(ctx, code[0], session.ExecOptions{Env: []string{"RT_ONE=one value", "HOME=/tmp/elsewhere"}, Workdir: "sub"})
			require.NoError(t, err)
			require.Equal(t, "ok", string(r.Status), r.Stderr)
			assert.Equal(t, "one value /tmp/elsewhere /workspace/sub\n", r.Stdout)
			r, err = s.Exec(ctx, code[1], session.ExecOptions{})
			require.NoError(t, err)
			assert.Equal(t, "None /workspace /workspace\n", r.Stdout, "put back after the execution")
			_, err = s.Exec(ctx, code[1], session.ExecOptions{Workdir: "/no/such/dir"})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "no such folder")
			_, err = s.Exec(ctx, code[1], session.ExecOptions{Env: []string{"NOEQUALS"}})
			require.ErrorIs(t, err, session.ErrInvalid)
		})
	}
}
