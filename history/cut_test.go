package history

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A history past its limit keeps its newest executions, whole, with a note that says what was
// cut; it stays under the limit however many executions follow, and the seq goes on.
func TestHistoryPastItsLimitIsCutAndSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	l, err := Open(path)
	require.NoError(t, err)
	const limit = 64 << 10
	l.SetLimit(limit)
	out := strings.Repeat("x", 4000)
	for seq := int64(1); seq <= 100; seq++ {
		require.Equal(t, seq, l.Reserve())
		require.NoError(t, l.AppendNoSync(Record{Kind: KindStart, Seq: seq, Code: "print()", Status: StatusRunning, Started: time.Now()}))
		if seq > 1 {
			// A snapshot of the one before that ended late, after this one began.
			require.NoError(t, l.AppendNoSync(Record{Kind: KindState, Seq: seq - 1, State: &State{Status: StateSaved, Snapshot: "s"}}))
		}
		require.NoError(t, l.Append(Record{Kind: KindEnd, Seq: seq, Code: "print()", Status: StatusOK, Stdout: out}))
		st, err := os.Stat(path)
		require.NoError(t, err)
		assert.LessOrEqual(t, st.Size(), int64(limit), "after %d", seq)
	}
	assert.Positive(t, l.Cuts())
	assert.Empty(t, l.Unfinished())
	require.NoError(t, l.Close())

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	execs, problems, err := Parse(f)
	require.NoError(t, err)
	assert.Empty(t, problems)
	require.NotEmpty(t, execs)
	assert.Equal(t, int64(100), execs[len(execs)-1].Seq, "the newest is kept")
	first := execs[0]
	require.Len(t, first.Notes, 1)
	assert.Contains(t, first.Notes[0], "the history before execution")
	for _, e := range execs {
		assert.Equal(t, StatusOK, e.Status, "every kept execution is whole: %d", e.Seq)
	}
	l, err = Open(path)
	require.NoError(t, err)
	defer l.Close()
	assert.Equal(t, int64(101), l.NextSeq(), "the seq goes on")
}
