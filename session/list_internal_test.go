package session

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/history"
)

// `session ls` counts a stopped session's executions as its agent would when running: a fork's
// history (one record at the seq it was forked at) and a history with a gap count the same.
func TestExecutionsAreCountedOneWay(t *testing.T) {
	for _, seqs := range [][]int64{{}, {1, 2, 3}, {7}, {7, 8}, {1, 2, 4}} {
		path := filepath.Join(t.TempDir(), "history.jsonl")
		l, err := history.Open(path)
		require.NoError(t, err)
		for _, q := range seqs {
			require.NoError(t, l.Append(history.Record{Kind: history.KindStart, Seq: q, Code: "x", Status: history.StatusRunning}))
			require.NoError(t, l.Append(history.Record{Kind: history.KindEnd, Seq: q, Code: "x", Status: history.StatusOK}))
		}
		require.NoError(t, l.Close())
		running, err := history.Open(path) // what a running agent reads
		require.NoError(t, err)
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		execs, _, err := history.Parse(bytes.NewReader(b)) // what the history reads
		require.NoError(t, err)
		sum, err := history.Summarize(bytes.NewReader(b)) // what ls reads of a stopped one
		require.NoError(t, err)
		assert.Equal(t, executions(running.NextSeq()), executions(nextSeq(execs)), "seqs %v", seqs)
		assert.Equal(t, executions(running.NextSeq()), executions(sum.LastSeq+1), "seqs %v", seqs)
		running.Close()
	}
}
