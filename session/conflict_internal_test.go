package session

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestConflictsWithNamesWhatDiffers(t *testing.T) {
	rec := Settings{Lang: "python", Image: "runtimectl/python:latest", Memory: 2 << 30, CPUs: 1, Pids: 512, Network: "none",
		Snapshot: "every", KeepSnapshots: 10, Env: []string{"A=1", "B=2"}}
	assert.Empty(t, conflictsWith(Spec{Name: "x"}, rec), "a spec that names nothing conflicts with nothing")
	assert.Empty(t, conflictsWith(Spec{Lang: "python", Memory: 2 << 30, Env: []string{"B=2", "A=1"}, KeepSnapshots: 10}, rec), "the same values, in any order")
	assert.Empty(t, conflictsWith(Spec{Disk: 10 << 30, MaxOutput: 4 << 20}, Settings{}), "defaults on both sides")
	got := conflictsWith(Spec{Lang: "bash", Memory: 4 << 30, Network: "bridge", Env: []string{"A=secret"}, IdleStop: time.Minute}, rec)
	assert.Len(t, got, 5)
	assert.Contains(t, got[0].CLI, "--lang bash (the session has python)")
	assert.Contains(t, got[1].CLI, "--memory 4GiB (the session has 2GiB)")
	assert.Contains(t, got[2].CLI, "--network bridge (the session has none)")
	assert.Contains(t, got[3].CLI, "--env A (values not shown) (the session has A,B (values not shown))")
	assert.NotContains(t, got[3].CLI+got[3].Lib, "secret", "values of the environment are never shown")
	assert.Contains(t, got[4].CLI, "--idle-stop 1m0s (the session has none)")
	assert.Equal(t, "Memory 4GiB (the session has 2GiB)", got[1].Lib, "the library names Spec's field, not the flag")
}
