package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
)

// Displays reach the client in their place among the output (whichever of the event and the
// tokens the agent reads first), with the positions of each stream, the tokens never in the
// output; the history keeps them; a client that did not ask for them gets none.
func TestDisplaysInOrder(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	var order []string
	var ds []execproto.Display
	res, err := c.Exec(testCtx(t, 30*time.Second), execproto.Request{Code: "display"}, execproto.Handlers{
		Stdout:  func(p []byte) { order = append(order, "out:"+string(p)) },
		Stderr:  func(p []byte) { order = append(order, "err:"+string(p)) },
		Display: func(d execproto.Display) { ds = append(ds, d); order = append(order, "display") },
	}, nil)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	assert.Equal(t, ds, res.Displays)
	assert.Equal(t, execproto.DisplayData, ds[0].Kind)
	assert.JSONEq(t, `"one"`, string(ds[0].Data["text/plain"]))
	assert.Equal(t, int64(1), ds[0].StdoutPos)
	assert.Equal(t, int64(0), ds[0].StderrPos)
	assert.Equal(t, int64(2), ds[1].StdoutPos)
	assert.Equal(t, int64(1), ds[1].StderrPos)
	// a before display 1, b and x before display 2, c after it
	joined := order
	idx := func(s string) int {
		for i, o := range joined {
			if o == s {
				return i
			}
		}
		return -1
	}
	first, second := -1, -1
	for i, o := range joined {
		if o == "display" {
			if first < 0 {
				first = i
			} else {
				second = i
			}
		}
	}
	assert.Less(t, idx("out:a"), first, "%q", joined)
	assert.Less(t, first, idx("out:b"), "%q", joined)
	assert.Less(t, idx("err:x"), second, "%q", joined)
	assert.Less(t, second, idx("out:c"), "%q", joined)

	// without a Display handler: no frames, the output whole
	r2 := execStub(t, c, "display", 0)
	assert.Equal(t, "abc", r2.Stdout)
	assert.Equal(t, "x", r2.Stderr)
	assert.Empty(t, r2.Displays)

	f, err := os.Open(filepath.Join(s.cfg.StateDir, contract.HistoryFile))
	require.NoError(t, err)
	defer f.Close()
	execs, _, err := history.Parse(f)
	require.NoError(t, err)
	var got []history.Display
	for _, e := range execs {
		if e.Seq == res.Seq {
			got = e.Displays
		}
	}
	require.Len(t, got, 2)
	assert.Equal(t, "two", got[1].Text())
	assert.Equal(t, int64(2), got[1].StdoutPos)
}

// A driver without complete / inspect / is_complete gets the neutral answers.
func TestQueriesNeutralWithoutDriverSupport(t *testing.T) {
	s := startStub(t, stubConfig(t))
	c := s.client(t)
	var cr execproto.CompleteReply
	require.NoError(t, c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpComplete, Code: "pri", CursorPos: 3}, &cr))
	assert.Equal(t, 3, cr.CursorStart)
	assert.Equal(t, 3, cr.CursorEnd)
	assert.Empty(t, cr.Matches)
	var ir execproto.InspectReply
	require.NoError(t, c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpInspect, Code: "x"}, &ir))
	assert.False(t, ir.Found)
	var ic execproto.IsCompleteReply
	require.NoError(t, c.Call(testCtx(t, 30*time.Second), execproto.Request{Op: execproto.OpIsComplete, Code: "x"}, &ic))
	assert.Equal(t, "unknown", ic.Status)
	assert.Equal(t, "", execStub(t, c, "get", 0).Stdout)
}
