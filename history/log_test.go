package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

func openLog(t *testing.T, path string) *Log {
	t.Helper()
	l, err := Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestOpenCreatesFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	l := openLog(t, path)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	assert.Equal(t, int64(1), l.NextSeq())
	assert.Empty(t, l.Unfinished())
	assert.Empty(t, l.Problems())
	assert.Empty(t, l.Repairs())
}

func TestOpenMissingDir(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope", "history.jsonl"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "open history")
}

func TestAppendWritesOneLinePerRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	l := openLog(t, path)
	require.NoError(t, l.Append(Record{Kind: KindStart, Seq: 1, Code: "a<b", Status: StatusRunning}))
	require.NoError(t, l.Append(Record{Kind: KindEnd, Seq: 1, Code: "a<b", Status: StatusOK}))
	lines := strings.Split(strings.TrimSuffix(string(mustRead(t, path)), "\n"), "\n")
	require.Len(t, lines, 2)
	assert.Equal(t, `{"schema":1,"kind":"start","seq":1,"code":"a<b","status":"running"}`, lines[0])
	assert.Equal(t, `{"schema":1,"kind":"end","seq":1,"code":"a<b","status":"ok"}`, lines[1])
}

func TestAppendRefuses(t *testing.T) {
	setLineLimit(t, 1000)
	l := openLog(t, filepath.Join(t.TempDir(), "history.jsonl"))
	tests := []struct {
		name string
		rec  Record
		msg  string
	}{
		{"unknown kind", Record{Kind: "x", Seq: 1}, "unknown kind"},
		{"no kind", Record{Seq: 1}, "unknown kind"},
		{"seq zero", Record{Kind: KindEnd}, "not positive"},
		{"too long", Record{Kind: KindEnd, Seq: 1, Stdout: strings.Repeat("x", 1000)}, "line limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := l.Append(tt.rec)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestAppendAfterClose(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "history.jsonl"))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "second Close is a no-op")
	require.ErrorIs(t, l.Append(Record{Kind: KindEnd, Seq: 1}), os.ErrClosed)
}

// AppendNoSync writes the record before it returns (a killed process loses nothing); Sync may
// run alongside appends, and after Close it has nothing left to do.
func TestAppendNoSyncThenSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	l, err := Open(path)
	require.NoError(t, err)
	require.NoError(t, l.AppendNoSync(Record{Kind: KindStart, Seq: 1, Status: StatusRunning}))
	require.NoError(t, l.AppendNoSync(Record{Kind: KindEnd, Seq: 1, Status: StatusOK}))
	assert.Equal(t, 2, strings.Count(string(mustRead(t, path)), "\n"), "written before the fsync")
	assert.Empty(t, l.Unfinished())

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for seq := int64(2); seq < 50; seq++ {
			assert.NoError(t, l.AppendNoSync(Record{Kind: KindEnd, Seq: seq, Status: StatusOK}))
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			assert.NoError(t, l.Sync())
		}
	}()
	wg.Wait()
	require.NoError(t, l.Close())
	assert.NoError(t, l.Sync(), "after Close")
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	execs, problems, err := Parse(f)
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.Len(t, execs, 49, "seq 1 to 49, each once")
}

func TestSeqContinuityAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	l, err := Open(path)
	require.NoError(t, err)
	for range 3 {
		seq := l.Reserve()
		require.NoError(t, l.Append(Record{Kind: KindStart, Seq: seq, Code: "x"}))
		require.NoError(t, l.Append(Record{Kind: KindEnd, Seq: seq, Status: StatusOK}))
	}
	assert.Equal(t, int64(4), l.NextSeq())
	require.NoError(t, l.Close())

	l = openLog(t, path)
	assert.Equal(t, int64(4), l.NextSeq())
	assert.Equal(t, int64(4), l.Reserve())
	assert.Equal(t, int64(5), l.Reserve())
	assert.Equal(t, int64(6), l.NextSeq())
}

func TestUnfinished(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	l, err := Open(path)
	require.NoError(t, err)
	require.NoError(t, l.Append(Record{Kind: KindStart, Seq: 1, Code: "a"}))
	require.NoError(t, l.Append(Record{Kind: KindEnd, Seq: 1, Status: StatusOK}))
	require.NoError(t, l.Append(Record{Kind: KindStart, Seq: 3, Code: "c"}))
	require.NoError(t, l.Append(Record{Kind: KindStart, Seq: 2, Code: "b"}))
	require.NoError(t, l.Close())

	l = openLog(t, path)
	un := l.Unfinished()
	require.Len(t, un, 2)
	assert.Equal(t, int64(2), un[0].Seq)
	assert.Equal(t, "b", un[0].Code)
	assert.Equal(t, int64(3), un[1].Seq)
	assert.Equal(t, int64(4), l.NextSeq())

	// The agent closes them as crashed; Unfinished follows.
	require.NoError(t, l.Append(Record{Kind: KindEnd, Seq: 2, Status: StatusCrashed}))
	un = l.Unfinished()
	require.Len(t, un, 1)
	assert.Equal(t, int64(3), un[0].Seq)
}

func TestOpenRepairsTornLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	good := `{"schema":1,"kind":"start","seq":1,"code":"a"}` + "\n" +
		`{"schema":1,"kind":"end","seq":1,"status":"ok"}` + "\n"
	torn := `{"schema":1,"kind":"start","seq":2,"co`
	require.NoError(t, os.WriteFile(path, []byte(good+torn), 0o600))

	l := openLog(t, path)
	assert.Equal(t, good, string(mustRead(t, path)), "the file is really truncated")
	require.Len(t, l.Repairs(), 1)
	assert.Contains(t, l.Repairs()[0], "line 3: removed a torn last line")
	assert.Empty(t, l.Problems())
	assert.Equal(t, int64(2), l.NextSeq(), "the torn record's seq is not counted")

	// Appending after the repair gives a clean file.
	require.NoError(t, l.Append(Record{Kind: KindStart, Seq: 2, Code: "b"}))
	execs, problems, err := Parse(strings.NewReader(string(mustRead(t, path))))
	require.NoError(t, err)
	assert.Empty(t, problems)
	require.Len(t, execs, 2)
	assert.Equal(t, "b", execs[1].Code)
}

func TestOpenCompletesWholeLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	whole := `{"schema":1,"kind":"start","seq":7,"code":"a"}`
	require.NoError(t, os.WriteFile(path, []byte(whole), 0o600))

	l := openLog(t, path)
	assert.Equal(t, whole+"\n", string(mustRead(t, path)))
	require.Len(t, l.Repairs(), 1)
	assert.Contains(t, l.Repairs()[0], "added the missing newline")
	assert.Equal(t, int64(8), l.NextSeq())
	require.Len(t, l.Unfinished(), 1)
}

func TestOpenTornBlankTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	good := `{"schema":1,"kind":"start","seq":1}` + "\n"
	require.NoError(t, os.WriteFile(path, []byte(good+"  "), 0o600))
	l := openLog(t, path)
	assert.Equal(t, good, string(mustRead(t, path)))
	assert.Len(t, l.Repairs(), 1)
}

func TestOpenReportsMiddleCorruption(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	content := `{"schema":1,"kind":"start","seq":1,"code":"a"}` + "\n" +
		`{"schema":1,"kind":"end","seq":1,"sta` + "\x00\x00garbage\n" +
		`{"schema":9,"kind":"start","seq":5}` + "\n" +
		`{"schema":1,"kind":"start","seq":2,"code":"b"}` + "\n"
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))

	l := openLog(t, path)
	assert.Equal(t, content, string(mustRead(t, path)), "nothing is removed")
	assert.Empty(t, l.Repairs())
	problems := l.Problems()
	require.Len(t, problems, 2)
	assert.Contains(t, problems[0], "line 2:")
	assert.Contains(t, problems[1], "line 3:")
	assert.Equal(t, int64(6), l.NextSeq(), "a seq used by a newer schema is not reused")
	un := l.Unfinished()
	require.Len(t, un, 2, "seq 1's end is unreadable, so it counts as unfinished")
}

func TestOpenTooLongLines(t *testing.T) {
	setLineLimit(t, 200)
	path := filepath.Join(t.TempDir(), "history.jsonl")
	good := `{"schema":1,"kind":"start","seq":1}` + "\n"
	long := `{"schema":1,"kind":"start","seq":2,"code":"` + strings.Repeat("x", 300) + `"}`
	require.NoError(t, os.WriteFile(path, []byte(good+long+"\n"+good+long), 0o600))
	l := openLog(t, path)
	assert.Equal(t, good+long+"\n"+good, string(mustRead(t, path)), "a too long torn tail is cut, a complete one kept")
	require.Len(t, l.Problems(), 1)
	assert.Contains(t, l.Problems()[0], "line 2:")
	require.Len(t, l.Repairs(), 1)
	assert.Contains(t, l.Repairs()[0], "line 4:")
}

func TestConcurrentAppend(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	l := openLog(t, path)
	const workers, each = 8, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				seq := l.Reserve()
				out := strings.Repeat(fmt.Sprintf("w%d-%d ", w, i), 200) // lines of a few KiB
				assert.NoError(t, l.Append(Record{Kind: KindStart, Seq: seq, Code: "x"}))
				assert.NoError(t, l.Append(Record{Kind: KindEnd, Seq: seq, Status: StatusOK, Stdout: out}))
			}
		}()
	}
	wg.Wait()

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var r Record
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "line %d", n+1)
		n++
	}
	require.NoError(t, sc.Err())
	assert.Equal(t, 2*workers*each, n)

	execs, problems, err := Parse(strings.NewReader(string(mustRead(t, path))))
	require.NoError(t, err)
	assert.Empty(t, problems)
	require.Len(t, execs, workers*each)
	for i, e := range execs {
		assert.Equal(t, int64(i+1), e.Seq, "seqs are unique and dense")
		assert.Equal(t, StatusOK, e.Status)
	}
}
