// Package seamtest holds the session tests that run the same on every backend: the session
// package runs them on Docker and the kube package on the local Kubernetes cluster, through the
// same session.Client API (session.Runtimes and session.Storage below it). What only one engine
// has (Docker's inspect documents, Kubernetes' claims and evictions) is tested beside them in
// each package.
package seamtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

// Env is a backend for the tests.
type Env struct {
	Client *session.Client
	// Name returns a session name for the test, unused elsewhere.
	Name func(t *testing.T) string
	// Kill removes the session's runtime behind runtimectl's back (docker rm -f, kubectl
	// delete pod) and returns once it is gone; the volumes stay.
	Kill func(t *testing.T, name string)
}

func bash() (string, string) {
	l, _ := lang.Get("bash")
	return "bash", images.Ref(l)
}

// ExecOK runs code and requires it to end ok (within two minutes).
func ExecOK(t *testing.T, s *session.Session, code string) *session.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := s.Exec(ctx, code, session.ExecOptions{})
	require.NoError(t, err, code)
	require.Equal(t, "ok", string(r.Status), "%s: %s %s", code, r.Stderr, r.Message)
	return r
}

func start(t *testing.T, e Env, name string, idle time.Duration) *session.Session {
	t.Helper()
	l, image := bash()
	s, info, err := e.Client.Start(context.Background(), session.Spec{Name: name, Lang: l, Image: image, Memory: 256 << 20, IdleStop: idle})
	require.NoError(t, err)
	assert.True(t, info.Created)
	t.Cleanup(func() {
		s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = e.Client.Remove(ctx, name, true)
	})
	return s
}

// Lifecycle: start, state, the runtime removed behind runtimectl's back (the next command
// brings it back on the same volumes with its state, and says so), ls, cp in and out, stop
// (the volumes stay), start again, history and snapshots, rm (nothing left).
func Lifecycle(t *testing.T, e Env) {
	c, ctx := e.Client, context.Background()
	name := e.Name(t)
	s := start(t, e, name, 0)
	ExecOK(t, s, "x=41; arr=(a b)")
	s.Close() // as a command's handle ends; the next command opens its own

	e.Kill(t, name)
	s, info, err := c.Open(ctx, name)
	require.NoError(t, err)
	defer s.Close()
	assert.True(t, info.Recreate, "made again from the volume's settings")
	var notices []string
	r, err := s.Exec(ctx, `echo $((x + 1)) ${arr[1]}`, session.ExecOptions{OnNotice: func(m string) { notices = append(notices, m) }})
	require.NoError(t, err)
	assert.Equal(t, "42 b\n", r.Stdout, "the state came back")
	require.NotEmpty(t, notices, "the caller is told the session was brought back")
	assert.Contains(t, notices[0], "started it again and restored snapshot")

	list, err := c.List(ctx)
	require.NoError(t, err)
	var found *session.Info
	for i := range list {
		if list[i].Name == name {
			found = &list[i]
		}
	}
	require.NotNil(t, found, "ls lists it")
	assert.Equal(t, "running", found.State)

	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.txt"), []byte("from the host\n"), 0o644))
	require.NoError(t, c.CopyTo(ctx, name, filepath.Join(dir, "in.txt"), "/workspace/in.txt"))
	ExecOK(t, s, "cat /workspace/in.txt > /workspace/out.txt; echo more >> /workspace/out.txt")
	require.NoError(t, c.CopyFrom(ctx, name, "/workspace/out.txt", filepath.Join(dir, "out.txt")))
	got, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	require.NoError(t, err)
	assert.Equal(t, "from the host\nmore\n", string(got))

	require.NoError(t, c.Stop(ctx, name))
	in, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.True(t, in.Runtime == nil || !in.Runtime.Running, "stopped")
	assert.NotEmpty(t, in.Volumes.Workspace, "the volumes stay")
	list, err = c.List(ctx)
	require.NoError(t, err)
	for _, i := range list {
		if i.Name == name {
			assert.NotEqual(t, "running", i.State)
		}
	}

	s2, info, err := c.Start(ctx, session.Spec{Name: name})
	require.NoError(t, err)
	defer s2.Close()
	assert.True(t, info.Started || info.Recreate)
	assert.Equal(t, "41 a\n", ExecOK(t, s2, `echo $x ${arr[0]}`).Stdout)

	h, _, err := c.History(ctx, name)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(h), 4)
	assert.Equal(t, "x=41; arr=(a b)", h[0].Code)
	snaps, err := c.Snapshots(ctx, name)
	require.NoError(t, err)
	assert.NotEmpty(t, snaps)

	require.NoError(t, c.Remove(ctx, name, true))
	_, err = c.Inspect(ctx, name)
	require.ErrorIs(t, err, session.ErrNotFound, "rm leaves nothing")
}

// Verbs: a kernel that dies is brought back inside the same runtime; a timeout; vars and
// context; a snapshot by hand and a restore; fork into a new session with its own volumes (and
// the restored state); gc stops a session idle past its --idle-stop, and the next exec brings it
// back with the restored state.
func Verbs(t *testing.T, e Env) {
	c, ctx := e.Client, context.Background()
	name := e.Name(t)
	// Its own idle policy (--idle-stop 1s): gc with no --idle applies only that, so the test
	// stops no other session on the engine.
	s := start(t, e, name, time.Second)
	ExecOK(t, s, "x=1")
	before, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	require.NotNil(t, before.Runtime)

	r, err := s.Exec(ctx, "x=2; exit 7", session.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "crashed", string(r.Status))
	assert.Contains(t, r.Message, "exit code 7")
	assert.Equal(t, "1\n", ExecOK(t, s, "echo $x").Stdout)
	after, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	require.NotNil(t, after.Runtime)
	assert.Equal(t, before.Runtime.ID, after.Runtime.ID, "the same runtime")

	r, err = s.Exec(ctx, "sleep 30", session.ExecOptions{Timeout: 500 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, "timeout", string(r.Status))

	vars, err := s.Vars(ctx)
	require.NoError(t, err)
	var names []string
	for _, v := range vars.Vars {
		names = append(names, v.Name)
	}
	assert.Contains(t, names, "x")
	sum, err := c.Context(ctx, name, session.ContextOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, sum.Recent)

	snap, err := s.Snapshot(ctx)
	require.NoError(t, err)
	ExecOK(t, s, "x=99")
	_, err = s.RestoreSnapshot(ctx, snap.ID)
	require.NoError(t, err)
	assert.Equal(t, "1\n", ExecOK(t, s, "echo $x").Stdout)

	forked := name + "-fork"
	f, err := c.Fork(ctx, name, forked, "")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Remove(context.Background(), forked, true) })
	assert.Equal(t, "1\n", ExecOK(t, f, "echo $x").Stdout, "the fork has the restored state")
	ExecOK(t, f, "x=fork")
	f.Close()
	require.NoError(t, c.Remove(ctx, forked, true))

	s.Close()
	time.Sleep(1100 * time.Millisecond)
	acts, err := c.GC(ctx, session.GCOptions{})
	require.NoError(t, err)
	var stopped bool
	for _, a := range acts {
		if a.Session == name && a.Action == "stop" && a.Done {
			stopped = true
		}
	}
	require.True(t, stopped, "gc stopped the idle session: %+v", acts)
	in, err := c.Inspect(ctx, name)
	require.NoError(t, err)
	assert.True(t, in.Runtime == nil || !in.Runtime.Running)
	s, _, err = c.Open(ctx, name)
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "1\n", ExecOK(t, s, "echo $x").Stdout, "back after gc, with the restored state")
}
