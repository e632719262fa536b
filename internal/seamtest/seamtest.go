// Package seamtest holds the session tests that run the same on every backend: the session
// package runs them on Docker and the kube package on the local Kubernetes cluster, through the
// same session.Client API (package engine below it). What only one engine
// has (Docker's inspect documents, Kubernetes' claims and evictions) is tested beside them in
// each package.
package seamtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/engine"
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
	// The result comes before the snapshot that follows it is written (its state is "pending"):
	// a kill at once could land before it. Wait for a snapshot, as the state to bring back.
	_, err := s.Snapshot(ctx)
	require.NoError(t, err)
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
	assert.Equal(t, engine.StateRunning, found.State)

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
			assert.NotEqual(t, engine.StateRunning, i.State)
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

// Pools: a warm pool on the backend. Its members are made ahead and hidden from List; two
// starts at once with the pool's settings take two members (their runtimes differ); a claimed
// session's history starts at 1, it keeps its state across stop and start (the backend finds
// the member's runtime and volumes by the session's name), is listed under its name, and leaves
// no volume when removed; the starts refilled the pool; a start with other settings is made as
// usual; removing the pool removes its members and leaves the sessions taken from it, whose
// removal then leaves no member's volume.
func Pools(t *testing.T, e Env) {
	c, ctx := e.Client, context.Background()
	l, image := bash()
	// A memory limit no other test of any package asks for (their tests run at once on one
	// engine): only this test's starts are served by the pool.
	pool := session.Pool{Name: "tp" + randSuffix(), Lang: l, Image: image, Memory: 290 << 20, Size: 2}
	require.NoError(t, c.SetPool(ctx, pool))
	t.Cleanup(func() { _ = c.RemovePool(context.Background(), pool.Name) })
	made, _, err := c.FillPool(ctx, pool.Name)
	require.NoError(t, err)
	assert.Equal(t, 2, made)
	assert.Equal(t, 2, poolReady(t, c, pool.Name))
	list, err := c.List(ctx)
	require.NoError(t, err)
	for _, in := range list {
		assert.NotContains(t, in.Name, "_pool.", "List shows a pool member")
	}

	names := []string{e.Name(t), e.Name(t)}
	sessions := make([]*session.Session, 2)
	infos := make([]session.StartInfo, 2)
	errs := make([]error, 2)
	done := make(chan int)
	for i := range names {
		t.Cleanup(func() { _ = c.Remove(context.Background(), names[i], true) })
		go func() {
			sessions[i], infos[i], errs[i] = c.Start(ctx, session.Spec{Name: names[i], Lang: l, Image: image, Memory: 290 << 20})
			done <- i
		}()
	}
	<-done
	<-done
	for i := range names {
		require.NoError(t, errs[i])
		defer sessions[i].Close()
		assert.Equal(t, pool.Name, infos[i].Pool, "start %d was not served from the pool", i)
		assert.True(t, infos[i].Created)
	}
	r0, err := c.Runtimes().Inspect(ctx, names[0])
	require.NoError(t, err)
	r1, err := c.Runtimes().Inspect(ctx, names[1])
	require.NoError(t, err)
	assert.NotEqual(t, r0.ID, r1.ID, "two starts took the same member")
	assert.Equal(t, names[0], r0.Session)

	r := ExecOK(t, sessions[0], "x=41; echo $((x+1))")
	assert.Equal(t, "42\n", r.Stdout)
	assert.Equal(t, int64(1), r.Seq, "a claimed session's history starts at 1")
	sessions[0].Close()

	require.NoError(t, c.Stop(ctx, names[0]))
	s, info, err := c.Start(ctx, session.Spec{Name: names[0]})
	require.NoError(t, err)
	defer s.Close()
	assert.True(t, info.Started)
	assert.Empty(t, info.Pool)
	r = ExecOK(t, s, "echo $x")
	assert.Equal(t, "41\n", r.Stdout, "the claimed session's state came back after stop and start")
	assert.Equal(t, int64(2), r.Seq)
	list, err = c.List(ctx)
	require.NoError(t, err)
	found := false
	for _, in := range list {
		found = found || in.Name == names[0]
	}
	assert.True(t, found, "the claimed session is listed under its name")

	vols := func() []string {
		vs, err := c.Storage().List(ctx, false)
		require.NoError(t, err)
		var out []string
		for _, v := range vs {
			out = append(out, v.Session)
		}
		return out
	}
	assert.Contains(t, vols(), names[0])
	s.Close()
	require.NoError(t, c.Remove(ctx, names[0], true))
	_, err = c.Storage().Inspect(ctx, names[0])
	assert.Error(t, err, "the removed session's volumes are left")
	assert.NotContains(t, vols(), names[0])

	c.WaitRefills()
	assert.Equal(t, 2, poolReady(t, c, pool.Name), "the starts refilled the pool")

	other := e.Name(t)
	so := start(t, e, other, 0)
	so.Close()
	ri, err := c.Runtimes().Inspect(ctx, other)
	require.NoError(t, err)
	assert.Empty(t, ri.Labels["io.runtimectl.pool"], "a start with other settings was served from the pool")

	require.NoError(t, c.RemovePool(ctx, pool.Name))
	rs, err := c.Runtimes().List(ctx)
	require.NoError(t, err)
	for _, ri := range rs {
		assert.NotContains(t, ri.Session, "_pool."+pool.Name+".", "a member is left")
	}
	r = ExecOK(t, sessions[1], "echo still")
	assert.Equal(t, "still\n", r.Stdout, "the session taken from the removed pool stays")
	sessions[1].Close()
	require.NoError(t, c.Remove(ctx, names[1], true))
	for _, v := range vols() {
		assert.NotContains(t, v, "_pool."+pool.Name+".", "a member's volumes are left")
	}
}

func poolReady(t *testing.T, c *session.Client, pool string) int {
	t.Helper()
	ps, err := c.Pools(context.Background())
	require.NoError(t, err)
	for _, p := range ps {
		if p.Name == pool {
			return p.Ready
		}
	}
	t.Fatalf("no pool %s", pool)
	return 0
}

func randSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
