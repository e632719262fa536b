package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/execproto"
)

// A driver that answers an execution with an error event (Node when its handler throws; bash
// names the field "message") ends that execution with an error instead of leaving it waiting.
func TestDriverErrorEventEndsTheExecution(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set kept", 0)
	for code, text := range map[string]string{"error-event": "the handler threw", "message-event": "bash said it this way"} {
		r := execStub(t, c, code, 0)
		assert.Equal(t, execproto.StatusError, r.Status, code)
		require.NotNil(t, r.Error, code)
		assert.Equal(t, "DriverError", r.Error.Name)
		assert.Contains(t, r.Error.Value, text)
		assert.Contains(t, r.Message, text)
		assert.NotEqual(t, "unchanged", string(r.State.Status), "the code may have run")
	}
	assert.Equal(t, "kept", execStub(t, c, "get", 0).Stdout, "the same interpreter goes on")
}

// A driver that dies in the middle, or breaks the protocol and stays alive (closes its event
// pipe, ends the output without done, writes a line that is not JSON), is taken for crashed:
// the execution ends as crashed with the reason in the result, and the interpreter comes back
// with the latest state.
func TestDriverThatDiesOrStopsAnsweringIsRestarted(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set before", 0)
	drain(t, c)
	for code, why := range map[string]string{
		"die":           "exit code 3",
		"close-events":  "closed its event pipe",
		"nonce-no-done": "sent no done event",
		"garbage":       "not a JSON event",
	} {
		r := execStub(t, c, code, 0)
		assert.Equal(t, execproto.StatusCrashed, r.Status, code)
		assert.Contains(t, r.Message, why, code)
		assert.Contains(t, r.Message, "state brought back to execution 1", code)
		assert.NotContains(t, r.Stderr, "[runtimectl:", "the reason is in the result, not the output")
		require.NotNil(t, r.State)
		assert.Equal(t, "restored", string(r.State.Status))
		assert.Equal(t, "before", execStub(t, c, "get", 0).Stdout, code)
	}
	for _, e := range historyOf(t, s) {
		if e.Code == "die" {
			assert.Equal(t, "partial output", e.Stdout, "output before a death is kept")
			assert.Equal(t, execproto.StatusCrashed, e.Status)
		}
	}
}

// A timeout interrupts code that stops on SIGINT, and kills (then restarts) code that does not.
func TestTimeoutInterruptsThenKills(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	execStub(t, c, "set before", 0)
	r := execStub(t, c, "sleep", 200*time.Millisecond)
	assert.Equal(t, execproto.StatusTimeout, r.Status)
	assert.Contains(t, r.Message, "state is kept")
	r = execStub(t, c, "hang", 200*time.Millisecond)
	assert.Equal(t, execproto.StatusTimeout, r.Status)
	assert.Contains(t, r.Message, "did not stop within")
	assert.Equal(t, "before", execStub(t, c, "get", 0).Stdout)
}

// A client that goes away mid-execution leaves it running; another connection can interrupt
// it, and the history has it.
func TestClientThatGoesAwayLeavesTheSessionUsable(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	go func() {
		_, _ = c.Exec(context.Background(), execproto.Request{Code: "sleep"}, execproto.Handlers{}, nil)
	}()
	waitRunning(t, s.Agent)
	c.Close()
	other := s.client(t)
	var rep struct{ Interrupted bool }
	require.NoError(t, other.Call(testCtx(t, 10*time.Second), execproto.Request{Op: execproto.OpInterrupt}, &rep))
	assert.True(t, rep.Interrupted)
	execStub(t, other, "noop", 0)
	h := historyOf(t, s)
	require.Len(t, h, 2)
	assert.Equal(t, execproto.StatusInterrupted, h[0].Status)
}

func waitRunning(t *testing.T, a *Agent) {
	t.Helper()
	for i := 0; i < 1000 && a.Status().Running == 0; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	require.NotZero(t, a.Status().Running, "the execution did not start")
}

// The interrupt frames of a long-lived connection reach the job they name, however many
// requests the connection made before and queued behind it.
func TestInterruptOnAConnectionWithThousandsOfRequests(t *testing.T) {
	cfg := stubConfig(t)
	cfg.QueueLimit = 4096
	s := startStub(t, cfg)
	c := s.client(t)
	for i := 0; i < 1030; i++ {
		execStub(t, c, "noop", 0)
	}
	// The last noop's result can come back before the agent has cleared it as running: wait
	// for the sleep itself (the next seq) to run, so that every noop below queues behind it.
	sleepSeq := s.Status().NextSeq
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	long := make(chan *execproto.Result, 1)
	go func() {
		r, _ := c.Exec(ctx, execproto.Request{Code: "sleep"}, execproto.Handlers{}, nil)
		long <- r
	}()
	require.Eventually(t, func() bool { return s.Status().Running == sleepSeq }, 2*time.Minute, 10*time.Millisecond, "the sleep did not start")
	var wg sync.WaitGroup
	for i := 0; i < 1030; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.Exec(context.Background(), execproto.Request{Code: "noop"}, execproto.Handlers{}, nil)
		}()
	}
	// More than 1024 requests wait behind the running one.
	require.Eventually(t, func() bool { return s.Status().Queued > 1024 }, 2*time.Minute, 10*time.Millisecond, "the noops did not queue behind the sleep")
	interrupt() // the client sends an interrupt frame for the running job
	select {
	case r := <-long:
		require.NotNil(t, r)
		assert.Equal(t, execproto.StatusInterrupted, r.Status)
	case <-time.After(2 * time.Minute):
		t.Fatal("the interrupt of the running job was lost")
	}
	wg.Wait()
}
