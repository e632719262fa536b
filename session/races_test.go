package session_test

// Concurrency and hung engines (issue 11, part 4): starts that race, starts that fail, a
// container that stops answering, and gc beside live sessions.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
	"github.com/runtimectl/runtimectl/volumes"
)

// cleanupSession removes a session made in the test directly through the client.
func cleanupSession(t *testing.T, c *session.Client, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Remove(ctx, name, true)
	})
}

// assertWhole checks that a session is there as one: its container, and both volumes with
// runtimectl's labels (the workspace one with the settings).
func assertWhole(t *testing.T, c *session.Client, name string) {
	t.Helper()
	ctx := testenv.Ctx(t, time.Minute)
	_, err := docker.From(c).Containers().Inspect(ctx, name)
	require.NoError(t, err, "the container")
	vol, err := docker.From(c).Volumes().Inspect(ctx, name)
	require.NoError(t, err, "the workspace volume")
	assert.Equal(t, name, vol.Session, "the workspace volume carries the session's label")
	assert.NotEmpty(t, vol.Settings, "and its settings")
	infos, err := c.List(ctx)
	require.NoError(t, err)
	for _, in := range infos {
		if in.Name == name {
			assert.Equal(t, engine.StateRunning, in.State)
		}
	}
}

// Ten starts of one new name at once: every one gets the same session, made once, whole; no
// start's clean-up removes what another made.
func TestConcurrentStartsOfANewName(t *testing.T) {
	c := testenv.Client(t)
	name := testenv.Name(t)
	cleanupSession(t, c, name)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, _, err := c.Start(testenv.Ctx(t, 3*time.Minute), session.Spec{Name: name})
			if err == nil {
				_, err = s.Exec(testenv.Ctx(t, time.Minute), "x = 1", session.ExecOptions{})
				s.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assertWhole(t, c, name)
	acts, err := c.GC(testenv.Ctx(t, time.Minute), session.GCOptions{Orphans: true, DryRun: true})
	require.NoError(t, err)
	for _, a := range acts {
		assert.NotEqual(t, name, a.Session, "gc finds nothing to do about it: %+v", a)
	}
}

// Ten start/rm pairs of one name at once: whatever order they land in, the session is at the
// end either gone whole or there whole, never half (a container without its volume, an
// unlabelled volume).
func TestConcurrentStartAndRemovePairs(t *testing.T) {
	c := testenv.Client(t)
	name := testenv.Name(t)
	cleanupSession(t, c, name)
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := testenv.Ctx(t, 3*time.Minute)
			if s, _, err := c.Start(ctx, session.Spec{Name: name}); err == nil {
				s.Close()
			}
			_ = c.Remove(ctx, name, true)
		}()
	}
	wg.Wait()
	ctx := testenv.Ctx(t, time.Minute)
	_, cerr := docker.From(c).Containers().Inspect(ctx, name)
	if errors.Is(cerr, engine.ErrNotFound) {
		for _, v := range []string{volumes.Name(name), volumes.StateName(name)} {
			out, err := exec.Command("docker", "volume", "inspect", v).CombinedOutput()
			assert.Error(t, err, "no container, so no volume %s either: %s", v, out)
		}
	} else {
		require.NoError(t, cerr)
		assertWhole(t, c, name)
	}
	// And it can be started afresh.
	s, _, err := c.Start(ctx, session.Spec{Name: name})
	require.NoError(t, err)
	defer s.Close()
	assertWhole(t, c, name)
}

// A new session whose agent cannot start (one process allowed: tini cannot start it) fails
// to start and leaves nothing behind: no container, no volume.
func TestFailedStartLeavesNothing(t *testing.T) {
	c := testenv.Client(t)
	name := testenv.Name(t)
	cleanupSession(t, c, name)
	ctx := testenv.Ctx(t, 4*time.Minute)
	_, _, err := c.Start(ctx, session.Spec{Name: name, Pids: 1})
	require.Error(t, err)
	_, err = docker.From(c).Containers().Inspect(ctx, name)
	assert.ErrorIs(t, err, engine.ErrNotFound, "no container left")
	for _, v := range []string{volumes.Name(name), volumes.StateName(name)} {
		out, err := exec.Command("docker", "volume", "inspect", v).CombinedOutput()
		assert.Error(t, err, "no volume %s left: %s", v, out)
	}
}

// A paused container answers nothing: with a timeout, Exec stops waiting a grace after it
// and says the session did not answer, instead of waiting for ever.
func TestExecWithATimeoutEndsWhenTheContainerIsPaused(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	r := execWith(t, s, "x = 1", session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	out, err := exec.Command("docker", "pause", containers.Name(name)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command("docker", "unpause", containers.Name(name)).Run() })

	done := make(chan error, 1)
	go func() {
		_, err := s.Exec(context.Background(), "x", session.ExecOptions{Timeout: time.Second}) // DefaultAnswerGrace
		done <- err
	}()
	select {
	case err := <-done:
		require.ErrorIs(t, err, session.ErrNoAnswer)
		assert.Contains(t, err.Error(), "Session.History")
		assert.Contains(t, advice.CLI(err), "session history "+name)
	case <-time.After(2 * time.Minute):
		t.Fatal("Exec with a timeout waited on a paused container")
	}
	out, err = exec.Command("docker", "unpause", containers.Name(name)).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

// A session that answers is waited for past the timeout and its grace: an execution queued
// behind a long one starts late, and its result comes when it ran.
func TestExecQueuedBehindALongOneIsWaitedFor(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	other, _, err := c.Open(testenv.Ctx(t, time.Minute), s.Name())
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	long := make(chan *session.Result, 1)
	go func() {
		// past the first probe and the next ones: three graces
		code := fmt.Sprintf("import time\ntime.sleep(%d)", int(3*session.DefaultAnswerGrace/time.Second))
		r, _ := other.Exec(context.Background(), code, session.ExecOptions{})
		long <- r
	}()
	require.Eventually(t, func() bool {
		st, err := s.Status(testenv.Ctx(t, time.Minute))
		return err == nil && st.Running > 0
	}, time.Minute, 50*time.Millisecond)
	r, err := s.Exec(testenv.Ctx(t, 2*time.Minute), "1 + 1", session.ExecOptions{Timeout: time.Second})
	require.NoError(t, err, "the agent answered its status: no ErrNoAnswer")
	require.NotNil(t, r.Result, r.Stderr)
	assert.Equal(t, "2", *r.Result)
	assert.Equal(t, "ok", string((<-long).Status))
}

// Bad execution arguments are refused before anything runs: a timeout under a millisecond
// (1ns meant none before), code past MaxCode; and at start, a negative number of snapshots
// to keep.
func TestBadExecutionArgumentsAreRefused(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	ctx := testenv.Ctx(t, time.Minute)
	_, err := s.Exec(ctx, "x = 1", session.ExecOptions{Timeout: time.Nanosecond})
	assert.ErrorIs(t, err, session.ErrInvalid)
	_, err = s.Exec(ctx, string(make([]byte, session.MaxCode+1)), session.ExecOptions{})
	assert.ErrorIs(t, err, session.ErrInvalid)
	assert.Contains(t, err.Error(), "MiB")
	name := testenv.Name(t)
	_, _, err = c.Start(ctx, session.Spec{Name: name, KeepSnapshots: -1})
	assert.ErrorIs(t, err, session.ErrInvalid)
	_, err = docker.From(c).Containers().Inspect(ctx, name)
	assert.ErrorIs(t, err, engine.ErrNotFound, "nothing made")
}

// gc --orphans never removes a session whose workspace volume exists under its name without
// runtimectl's labels (what the engine makes when a volume is removed under a container being
// created): it reports it.
func TestGCOrphansKeepsASessionWithAnUnlabelledVolume(t *testing.T) {
	c := testenv.Client(t)
	name := testenv.Name(t)
	cleanupSession(t, c, name)
	ctx := testenv.Ctx(t, 2*time.Minute)
	for _, v := range []string{volumes.Name(name), volumes.StateName(name)} {
		out, err := exec.Command("docker", "volume", "create", v).CombinedOutput()
		require.NoError(t, err, "%s", out)
		t.Cleanup(func() { _ = exec.Command("docker", "volume", "rm", "-f", v).Run() })
	}
	l, err := lang.Get("python")
	require.NoError(t, err)
	_, err = docker.From(c).Containers().Create(ctx, containers.Spec{Session: name, Lang: "python", Image: images.Ref(l), Volume: volumes.Name(name), StateVolume: volumes.StateName(name)})
	require.NoError(t, err)
	acts, err := c.GC(ctx, session.GCOptions{Orphans: true, Only: []string{name}})
	require.NoError(t, err)
	var mine []session.GCAction
	for _, a := range acts {
		if a.Session == name {
			mine = append(mine, a)
		}
	}
	require.Len(t, mine, 1)
	assert.Equal(t, "report", mine[0].Action)
	_, err = docker.From(c).Containers().Inspect(ctx, name)
	assert.NoError(t, err, "the container is still there")
}

// The handle ends what it began: Stop keeps the state for the next Exec, Remove takes the
// session and both volumes, Terminate does not mind a session already gone. Callers can tell
// errors apart: a missing image is ErrNoImage (the CLI's 125), not bad input.
func TestHandleStopRemoveTerminateAndTypedErrors(t *testing.T) {
	c := testenv.Client(t)
	name := testenv.Name(t)
	cleanupSession(t, c, name)
	ctx := testenv.Ctx(t, 3*time.Minute)
	s, _, err := c.Start(ctx, session.Spec{Name: name})
	require.NoError(t, err)
	r := execWith(t, s, "x = 41", session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.NoError(t, s.Stop(ctx))
	ci, err := docker.From(c).Containers().Inspect(ctx, name)
	require.NoError(t, err)
	assert.False(t, ci.Running, "stopped")
	r = execWith(t, s, "x + 1", session.ExecOptions{})
	assert.Equal(t, "42", *r.Result, "the next Exec brought it back with its state")
	require.NoError(t, s.Remove(ctx))
	_, err = docker.From(c).Containers().Inspect(ctx, name)
	assert.ErrorIs(t, err, engine.ErrNotFound)
	out, err := exec.Command("docker", "volume", "inspect", volumes.StateName(name)).CombinedOutput()
	assert.Error(t, err, "the state volume went with it: %s", out)
	assert.NoError(t, s.Terminate(ctx), "gone already is fine")

	_, _, err = c.Start(ctx, session.Spec{Name: testenv.Name(t), Image: "runtimectl/python:no-such-tag"})
	assert.ErrorIs(t, err, session.ErrNoImage)
	assert.NotErrorIs(t, err, session.ErrInvalid)
	assert.Contains(t, err.Error(), "build it first (docker.From(client).Images().Build")
	assert.Contains(t, advice.CLI(err), "image build")
}

// An execution with a timeout that waits in the queue behind a long one is not given up on:
// at the client's deadline the agent still answers, so the wait goes on and the result comes.
func TestExecWithATimeoutWaitsWhileQueued(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	other, _, err := c.Open(testenv.Ctx(t, time.Minute), s.Name())
	require.NoError(t, err)
	defer other.Close()
	long := make(chan error, 1)
	go func() {
		_, err := other.Exec(context.Background(), "import time\ntime.sleep(6)", session.ExecOptions{})
		long <- err
	}()
	require.Eventually(t, func() bool {
		st, err := s.Status(testenv.Ctx(t, time.Minute))
		return err == nil && st.Running != 0
	}, time.Minute, 20*time.Millisecond)
	r, err := s.Exec(testenv.Ctx(t, 2*time.Minute), "1 + 1", session.ExecOptions{Timeout: time.Second, AnswerGrace: time.Second})
	require.NoError(t, err, "queued, not lost")
	assert.Equal(t, "2", *r.Result)
	require.NoError(t, <-long)
}
