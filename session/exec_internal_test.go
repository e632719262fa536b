package session

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/runtimectl/runtimectl/execproto"

	"github.com/stretchr/testify/assert"
)

func TestDescribeRestoreNamesWhatCameBackAsACopy(t *testing.T) {
	msg := describeRestore("demo", &RestoreInfo{Snapshot: "3-ab", Seq: 3, Restored: []string{"x", "m"},
		Copies: []execproto.Skipped{{Name: "m", Type: "numpy.ma.core.MaskedArray", Reason: "a view of a numpy.ndarray: came back as a copy"}}})
	assert.Contains(t, msg, "restored snapshot 3-ab (state after execution 3): x, m")
	assert.Contains(t, msg, "back as copies, no longer sharing memory: m (a view of a numpy.ndarray: came back as a copy)")
	assert.NotContains(t, describeRestore("demo", &RestoreInfo{Snapshot: "3-ab", Seq: 3}), "copies")
}

// A paused container is told within the timeout plus 10 s: one grace, then one probe.
func TestAnswerGraceAndProbeStayWithinTenSeconds(t *testing.T) {
	assert.LessOrEqual(t, DefaultAnswerGrace+ProbeTimeout, 10*time.Second)
}

// The wait ends at the first probe that gets no answer, and goes on while the agent answers.
func TestAnswerDeadlineProbesUntilTheAgentStopsAnswering(t *testing.T) {
	var calls atomic.Int32
	o := ExecOptions{Timeout: time.Millisecond, AnswerGrace: time.Millisecond}
	d, noAnswer, stop := answerDeadline(o, func(ctx context.Context) error {
		deadline, ok := ctx.Deadline()
		assert.True(t, ok)
		assert.LessOrEqual(t, time.Until(deadline), ProbeTimeout)
		if calls.Add(1) < 3 {
			return nil // alive: the wait goes on
		}
		return context.DeadlineExceeded
	})
	defer stop()
	<-d
	assert.True(t, noAnswer.Load())
	assert.Equal(t, int32(3), calls.Load())

	// Without a timeout there is no deadline of the client's own: only Detach ends the wait.
	detach := make(chan struct{})
	d, noAnswer, stop = answerDeadline(ExecOptions{Detach: detach}, func(context.Context) error {
		t.Error("no probe without a timeout")
		return nil
	})
	defer stop()
	close(detach)
	<-d
	assert.False(t, noAnswer.Load())
}
