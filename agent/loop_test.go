package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
)

// drain asks what `session stop` asks, and returns the agent's status after it.
func drain(t *testing.T, c *execproto.Client) execproto.Status {
	t.Helper()
	var st execproto.Status
	require.NoError(t, c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpDrain}, &st))
	return st
}

// restart stops the agent (as the container stopping does) and starts another on the same
// state directory.
func restart(t *testing.T, s *stubAgent) *stubAgent {
	t.Helper()
	s.stop()
	return startStub(t, s.cfg)
}

func TestStubExecutesAndItsStateSurvivesARestart(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	r := execStub(t, c, "set hello", 0)
	assert.Equal(t, execproto.StatusOK, r.Status)
	assert.Equal(t, int64(1), r.Seq)
	require.NotNil(t, r.State)
	assert.Contains(t, []string{"pending", "saved"}, string(r.State.Status))
	r = execStub(t, c, "get", 0)
	assert.Equal(t, "hello", r.Stdout)
	drain(t, c)

	s = restart(t, s)
	c = s.client(t)
	r = execStub(t, c, "get", 0)
	assert.Equal(t, "hello", r.Stdout)
	assert.Equal(t, int64(3), r.Seq, "seq goes on across restarts")
}

// A snapshot that fails leaves the state unsaved: a later execution that changes nothing must
// not make the agent forget it, and a drain (stop, gc, upgrade) takes it then.
func TestDrainSnapshotsWhatAFailedSnapshotLeftUnsaved(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	r := execStub(t, c, "set fail-snapshot", 0)
	require.Equal(t, execproto.StatusOK, r.Status)
	// The snapshot after it fails; an execution that changes nothing does not make it saved.
	r = execStub(t, c, "noop", 0)
	assert.NotEqual(t, "unchanged", string(r.State.Status), "the state is still not saved")
	r = execStub(t, c, "mutate-fail kept", 0)
	require.Equal(t, execproto.StatusError, r.Status)
	st := drain(t, c)
	assert.NotEmpty(t, st.Snapshot, "drain saved the state")

	s = restart(t, s)
	r = execStub(t, s.client(t), "get", 0)
	assert.Equal(t, "kept", r.Stdout, "a cell that mutated and then raised is not lost")
}

// Under the manual policy nothing is saved automatically, but a drain saves what ran.
func TestDrainSavesUnderTheManualPolicy(t *testing.T) {
	cfg := stubConfig(t)
	cfg.SnapshotPolicy = "manual"
	s := startStub(t, cfg)
	c := s.client(t)
	r := execStub(t, c, "set manual", 0)
	assert.Equal(t, "off", string(r.State.Status))
	drain(t, c)
	s = restart(t, s)
	assert.Equal(t, "manual", execStub(t, s.client(t), "get", 0).Stdout)
}

func TestNothingToSaveMeansNoSnapshotOnDrain(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set a", 0)
	st := drain(t, c)
	first := st.Snapshot
	require.NotEmpty(t, first)
	r := execStub(t, c, "noop", 0)
	assert.Equal(t, "unchanged", string(r.State.Status))
	assert.Equal(t, first, drain(t, c).Snapshot, "a drain with nothing unsaved takes no snapshot")
}

// An execution that changed only the driver's bookkeeping (IPython's Out and _ after a cell that
// showed a variable) takes no snapshot of its own, but a drain saves it, so a stop keeps it.
func TestBookkeepingIsSavedByADrainOnly(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set a", 0)
	first := drain(t, c).Snapshot
	require.NotEmpty(t, first)
	r := execStub(t, c, "show", 0)
	assert.Equal(t, "unchanged", string(r.State.Status), "no snapshot of its own")
	second := drain(t, c).Snapshot
	assert.NotEqual(t, first, second, "the drain saved the bookkeeping")
	assert.Equal(t, second, drain(t, c).Snapshot, "and then nothing is left to save")
}

func historyOf(t *testing.T, s *stubAgent) []history.Execution {
	t.Helper()
	f, err := os.Open(filepath.Join(s.cfg.StateDir, "history.jsonl"))
	require.NoError(t, err)
	defer f.Close()
	execs, _, err := history.Parse(f)
	require.NoError(t, err)
	return execs
}

// What a driver says came back as a copy reaches the caller with the rest of the restore.
func TestRestoreSaysWhatCameBackAsACopy(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set with-copies", 0)
	drain(t, c)
	r := execStub(t, c, "die", 0)
	require.NotNil(t, r.Restored)
	require.Len(t, r.Restored.Copies, 1)
	assert.Equal(t, "v", r.Restored.Copies[0].Name)
	assert.Contains(t, r.Restored.Copies[0].Reason, "came back as a copy")
}

// A snapshot whose load kills the interpreter is tried maxRestoreFailures times, then passed
// over for the one before it; the caller is told which state came back.
func TestRestoreThatKillsTheInterpreterFallsBackToAnOlderSnapshot(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set good", 0)
	good := drain(t, c).Snapshot
	execStub(t, c, "set crash-on-load", 0)
	bad := drain(t, c).Snapshot
	require.NotEqual(t, good, bad)

	r := execStub(t, c, "die", 0)
	assert.Equal(t, execproto.StatusCrashed, r.Status)
	assert.Contains(t, r.Message, "exit code 3")
	require.NotNil(t, r.Restored)
	assert.Equal(t, good, r.Restored.Snapshot)
	assert.Contains(t, r.Message, good)
	assert.Contains(t, joinMessages(r.Restored.Messages), "failed to start from snapshot "+bad+" 2 times")
	assert.Equal(t, "good", execStub(t, c, "get", 0).Stdout)

	// Asking for the bad one again: an error that says what came back, twice, and no panic.
	for i := 0; i < 2; i++ {
		err := c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpRestore, Snapshot: bad}, nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "restore "+bad+" failed")
		assert.Equal(t, "good", execStub(t, c, "get", 0).Stdout)
	}
}

// When no interpreter can start at all for a while (the pids limit still reached by a fork
// bomb's last processes), the snapshot is not passed over: the state comes back once one can.
func TestRestoreWaitsOutAContainerThatCannotStartAnInterpreter(t *testing.T) {
	cfg := stubConfig(t)
	s := startStub(t, cfg)
	c := s.client(t)
	execStub(t, c, "set good", 0)
	good := drain(t, c).Snapshot

	block := filepath.Join(cfg.Workdir, "no-start")
	require.NoError(t, os.WriteFile(block, nil, 0o644))
	go func() {
		time.Sleep(2500 * time.Millisecond) // past several rounds of maxRestoreFailures
		_ = os.Remove(block)
	}()
	r := execStub(t, c, "die", 0)
	assert.Equal(t, execproto.StatusCrashed, r.Status)
	require.NotNil(t, r.Restored)
	assert.Equal(t, good, r.Restored.Snapshot, "the state came back: %v", r.Restored.Messages)
	assert.NotContains(t, joinMessages(r.Restored.Messages), "empty state")
	assert.Equal(t, "good", execStub(t, c, "get", 0).Stdout)
}

// When no snapshot can be loaded, the interpreter starts with an empty state and says so.
func TestRestoreFallsBackToAnEmptyState(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set crash-on-load", 0)
	drain(t, c)
	r := execStub(t, c, "die", 0)
	assert.Equal(t, execproto.StatusCrashed, r.Status)
	require.NotNil(t, r.Restored)
	assert.Equal(t, "", r.Restored.Snapshot)
	assert.Contains(t, r.Message, "an empty state")
	assert.Contains(t, joinMessages(r.Restored.Messages), "starting with an empty state")
	assert.Equal(t, "", execStub(t, c, "get", 0).Stdout)
	execStub(t, c, "set again", 0)
	assert.Equal(t, "again", execStub(t, c, "get", 0).Stdout, "the session goes on")

	// A new agent on the same volume does not load it either.
	drain(t, c)
	s = restart(t, s)
	assert.Equal(t, "again", execStub(t, s.client(t), "get", 0).Stdout)
}

// A warm pool's member is claimed once: the first claim takes it and renames the session its
// agent serves, every later one (on any connection) is refused.
func TestClaimTakesAMemberOnce(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	assert.Equal(t, "stub", c.Hello().Session)
	require.NoError(t, c.Call(testCtx(t, 10*time.Second), execproto.Request{Op: execproto.OpClaim, Name: "mine"}, nil))
	err := s.client(t).Call(testCtx(t, 10*time.Second), execproto.Request{Op: execproto.OpClaim, Name: "theirs"}, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "another start's")
	assert.Equal(t, "mine", s.client(t).Hello().Session, "the agent serves the session it became")
	assert.Equal(t, "mine", execStub(t, c, "set x", 0).Session)
	err = s.client(t).Call(testCtx(t, 10*time.Second), execproto.Request{Op: execproto.OpClaim}, nil)
	assert.Error(t, err, "a claim names its session")
}
