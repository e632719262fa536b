package cli_test

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// kill -9 of `session fork` midway leaves no fork that looks healthy (issue 28): `ls` shows an
// incomplete fork, a start of it is refused saying what happened and what to do, and `session
// gc` removes it (its maker is gone).
func TestAKilledForkIsNeverTakenForWhole(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	src := testenv.Start(t, c, session.Spec{})
	r, err := src.Exec(ctx, "import os\nwith open('big.bin', 'wb') as f:\n    for _ in range(24):\n        f.write(os.urandom(8 << 20))\nx = 41", session.ExecOptions{})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	fork := src.Name() + "-f"
	t.Cleanup(func() { _ = c.Remove(ctx, fork, true) })

	cmd := exec.Command(binary, "session", "fork", src.Name(), fork)
	require.NoError(t, cmd.Start())
	made := false
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && !made; time.Sleep(20 * time.Millisecond) {
		out, _ := exec.Command("docker", "ps", "-aq", "--filter", "name=^runtimectl-"+fork+"$").Output()
		made = strings.TrimSpace(string(out)) != ""
	}
	require.True(t, made, "the fork's container was made")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()

	list, err := c.List(ctx)
	require.NoError(t, err)
	var state session.State
	for _, in := range list {
		if in.Name == fork {
			state = in.State
		}
	}
	assert.Equal(t, session.StateIncompleteFork, state)
	_, _, err = c.Start(ctx, session.Spec{Name: fork})
	require.ErrorIs(t, err, session.ErrInvalid)
	assert.Contains(t, err.Error(), "is a fork of "+src.Name()+" that never ended")

	acts, err := c.GC(ctx, session.GCOptions{Only: []string{fork}})
	require.NoError(t, err)
	removed := false
	for _, a := range acts {
		if a.Session == fork && a.Action == "remove" && a.Done {
			removed = true
			assert.Contains(t, a.Reason, "a fork of "+src.Name()+" that never ended")
		}
	}
	assert.True(t, removed, "gc removed the incomplete fork: %+v", acts)
	_, err = c.RecordedSettings(ctx, fork)
	assert.ErrorIs(t, err, session.ErrNotFound)

	// A fork that ends is whole: it starts, with the source's state.
	whole := src.Name() + "-w"
	t.Cleanup(func() { _ = c.Remove(ctx, whole, true) })
	s, err := c.Fork(ctx, src.Name(), whole, "")
	require.NoError(t, err)
	defer s.Close()
	r, err = s.Exec(ctx, "x + 1", session.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "42", *r.Result)
}
