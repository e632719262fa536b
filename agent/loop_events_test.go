package agent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/execproto"
)

// The run loop's events between executions: a kernel that dies, breaks the protocol or
// closes its event pipe while no request runs is replaced from the latest good snapshot, the
// history gets a note, and the next execution sees the state.
func TestKernelThatFailsBetweenExecutionsIsBroughtBack(t *testing.T) {
	for code, why := range map[string]string{
		"die-later":     "ended between executions (exit code 4)",
		"garbage-later": "not a JSON event",
		"close-later":   "closed its event pipe",
	} {
		t.Run(code, func(t *testing.T) {
			s := startStub(t, stubConfig(t))
			c := s.client(t)
			execStub(t, c, "set before", 0)
			drain(t, c)
			r := execStub(t, c, code, 0)
			require.Equal(t, execproto.StatusOK, r.Status)
			require.Eventually(t, func() bool { return s.Status().KernelRestarts == 1 }, 20*time.Second, 10*time.Millisecond, "the kernel was not brought back")
			assert.Equal(t, "before", execStub(t, c, "get", 0).Stdout)
			var notes []string
			for _, e := range historyOf(t, s) {
				notes = append(notes, e.Notes...)
			}
			require.NotEmpty(t, notes, "the recovery is noted in the history")
			assert.Contains(t, notes[0], why)
			assert.Contains(t, notes[0], "state brought back to execution 1")
		})
	}
}

// The agent's end (the container stopping) saves what is unsaved, even under the manual
// policy and without a drain: `docker stop` by hand does not lose the state.
func TestStopSavesWhatIsUnsaved(t *testing.T) {
	cfg := stubConfig(t)
	cfg.SnapshotPolicy = "manual"
	s := startStub(t, cfg)
	execStub(t, s.client(t), "set kept-at-stop", 0)
	s = restart(t, s) // no drain
	assert.Equal(t, "kept-at-stop", execStub(t, s.client(t), "get", 0).Stdout)
}

// The agent's end interrupts the execution running; its client gets the result.
func TestStopInterruptsTheRunningExecution(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	res := make(chan *execproto.Result, 1)
	go func() {
		r, _ := c.Exec(context.Background(), execproto.Request{Code: "sleep"}, execproto.Handlers{}, nil)
		res <- r
	}()
	waitRunning(t, s.Agent)
	s.stop()
	select {
	case r := <-res:
		require.NotNil(t, r)
		assert.Equal(t, execproto.StatusInterrupted, r.Status)
	case <-time.After(20 * time.Second):
		t.Fatal("the running execution got no result when the agent stopped")
	}
	h := historyOf(t, s)
	require.Len(t, h, 1)
	assert.Equal(t, execproto.StatusInterrupted, h[0].Status)
}

// A snapshot asked for by hand: its reply names it; one that fails is an error that says why.
func TestManualSnapshotRepliesOrFails(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set one", 0)
	var rep execproto.SnapshotReply
	require.NoError(t, c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpSnapshot}, &rep))
	assert.NotEmpty(t, rep.ID)
	assert.Equal(t, int64(1), rep.Seq)
	execStub(t, c, "set fail-snapshot", 0)
	err := c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpSnapshot}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the stub cannot save this")
	assert.Equal(t, "fail-snapshot", execStub(t, c, "get", 0).Stdout, "a failed snapshot leaves the live state alone")
}

// A restore by hand brings the chosen snapshot back; a name that is not a snapshot is refused.
func TestRestoreByHand(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set first", 0)
	first := drain(t, c).Snapshot
	execStub(t, c, "set second", 0)
	drain(t, c)
	var info execproto.RestoreInfo
	require.NoError(t, c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpRestore, Snapshot: first}, &info))
	assert.Equal(t, first, info.Snapshot)
	assert.Equal(t, "first", execStub(t, c, "get", 0).Stdout)
	// The restored state is saved as the newest: a restart brings it back, not the later one.
	s = restart(t, s)
	c = s.client(t)
	assert.Equal(t, "first", execStub(t, c, "get", 0).Stdout, "a restart after a restore keeps the restored state")
	err := c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpRestore, Snapshot: "no-such"}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "list the session's snapshots")
}

// A restore of EmptyState restarts the interpreter empty, and a restart after it keeps it
// empty (the stop saves it).
func TestRestoreToAnEmptyState(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set kept", 0)
	drain(t, c)
	var info execproto.RestoreInfo
	require.NoError(t, c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpRestore, Snapshot: execproto.EmptyState}, &info))
	assert.Equal(t, "", info.Snapshot)
	assert.Equal(t, "", execStub(t, c, "get", 0).Stdout)
	s = restart(t, s)
	c = s.client(t)
	assert.Equal(t, "", execStub(t, c, "get", 0).Stdout, "a restart after a reset keeps the empty state")
}

// A variables request is answered; one the driver never answers ends with an error at its
// timeout, and the session goes on.
func TestVarsAnsweredOrTimedOut(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set visible", 0)
	var rep struct {
		Vars []struct{ Name, Preview string }
	}
	require.NoError(t, c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpVars}, &rep))
	require.Len(t, rep.Vars, 1)
	assert.Equal(t, "visible", rep.Vars[0].Preview)

	old := listTimeout
	listTimeout = 300 * time.Millisecond
	t.Cleanup(func() { listTimeout = old })
	execStub(t, c, "set vars-hang", 0)
	err := c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpVars}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not list its variables within")
	assert.Equal(t, "vars-hang", execStub(t, c, "get", 0).Stdout)
}

// A snapshot that never ends is stopped at the snapshot budget: here the driver itself hangs
// in it, so it is killed and brought back from the latest good snapshot, and the execution
// that waited on it says so.
func TestSnapshotPastItsBudgetIsStopped(t *testing.T) {
	cfg := stubConfig(t)
	cfg.SnapshotBudget = 300 * time.Millisecond
	s := startStub(t, cfg)
	c := s.client(t)
	execStub(t, c, "set good", 0)
	drain(t, c)
	execStub(t, c, "set slow-snapshot", 0) // its snapshot hangs the driver
	r := execStub(t, c, "get", 0)
	assert.Equal(t, execproto.StatusCrashed, r.Status)
	require.NotNil(t, r.Restored)
	assert.Equal(t, "good", execStub(t, c, "get", 0).Stdout)
	var failed bool
	for _, e := range historyOf(t, s) {
		if e.Code == "set slow-snapshot" && e.State != nil && e.State.Status == "failed" {
			failed = true
		}
	}
	assert.True(t, failed, "the snapshot's failure is recorded")
}

// Past the disk cap, executions are refused with a message that says how to go on; one that
// ignores the cap runs (and frees space), and then executions run again.
func TestDiskCapRefusesExecutionsPastIt(t *testing.T) {
	cfg := stubConfig(t)
	cfg.Workdir = t.TempDir() // apart from the state directory
	cfg.DiskLimit = 1 << 20
	s := startStub(t, cfg)
	c := s.client(t)
	execStub(t, c, "set before", 0)
	execStub(t, c, "fill", 0)
	var err error
	require.Eventually(t, func() bool {
		_, err = c.Exec(testCtx(t, 10*time.Second), execproto.Request{Code: "noop"}, execproto.Handlers{}, nil)
		return err != nil
	}, 20*time.Second, 20*time.Millisecond, "an execution past the cap was not refused")
	assert.ErrorIs(t, err, execproto.ErrDiskCap)
	assert.Contains(t, err.Error(), "past the session's disk cap of 1.0 MiB")
	assert.Contains(t, err.Error(), "run past the cap")
	assert.Greater(t, s.Status().DiskUsed, int64(1<<20))

	r, err := c.Exec(testCtx(t, 10*time.Second), execproto.Request{Code: "free", IgnoreDiskCap: true}, execproto.Handlers{}, nil)
	require.NoError(t, err)
	assert.Equal(t, execproto.StatusOK, r.Status)
	require.Eventually(t, func() bool {
		_, err = c.Exec(testCtx(t, 10*time.Second), execproto.Request{Code: "noop"}, execproto.Handlers{}, nil)
		return err == nil
	}, 20*time.Second, 20*time.Millisecond, "executions did not run again once space was freed")
	assert.Equal(t, "before", execStub(t, c, "get", 0).Stdout)
}
