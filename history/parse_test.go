package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// jsonl joins records into history.jsonl text.
func jsonl(t *testing.T, recs ...Record) string {
	t.Helper()
	var b strings.Builder
	for _, r := range recs {
		if r.Schema == 0 {
			r.Schema = Schema
		}
		line, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func ptr[T any](v T) *T { return &v }

func TestParseMerge(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Second)
	tests := []struct {
		name     string
		recs     []Record
		want     []Execution
		problems int
	}{
		{
			name: "empty",
			want: []Execution{},
		},
		{
			name: "start only is running",
			recs: []Record{{Kind: KindStart, Seq: 1, Code: "x", Status: StatusRunning, Started: t0}},
			want: []Execution{{Seq: 1, Code: "x", Status: StatusRunning, Started: t0, Outputs: []Output{}}},
		},
		{
			name: "end overrides start",
			recs: []Record{
				{Kind: KindStart, Seq: 1, Code: "x", Status: StatusRunning, Started: t0},
				{Kind: KindEnd, Seq: 1, Code: "x2", Status: StatusOK, Stdout: "o", Stderr: "e", Result: ptr("1"),
					Outputs: []Output{{Mime: "image/png", Path: "/p"}}, Started: t1, DurationMs: 2.5},
			},
			want: []Execution{{Seq: 1, Code: "x2", Status: StatusOK, Stdout: "o", Stderr: "e", Result: ptr("1"),
				Outputs: []Output{{Mime: "image/png", Path: "/p"}}, Started: t1, DurationMs: 2.5}},
		},
		{
			name: "end without code or start time keeps the start's",
			recs: []Record{
				{Kind: KindStart, Seq: 1, Code: "x", Started: t0},
				{Kind: KindEnd, Seq: 1, Status: StatusError, Error: &Error{Name: "E", Value: "v"}},
			},
			want: []Execution{{Seq: 1, Code: "x", Status: StatusError, Started: t0, Error: &Error{Name: "E", Value: "v"}, Outputs: []Output{}}},
		},
		{
			name: "end alone (start lost) still counts",
			recs: []Record{{Kind: KindEnd, Seq: 3, Code: "y", Status: StatusCrashed}},
			want: []Execution{{Seq: 3, Code: "y", Status: StatusCrashed, Outputs: []Output{}}},
		},
		{
			name: "state replaces the end's state, notes append",
			recs: []Record{
				{Kind: KindStart, Seq: 1, Code: "x"},
				{Kind: KindEnd, Seq: 1, Status: StatusOK, State: &State{Status: StatePending, Snapshot: "1-aaaaaa"}},
				{Kind: KindNote, Seq: 1, Note: "first"},
				{Kind: KindState, Seq: 1, State: &State{Status: StateFailed, Error: "disk full"}},
				{Kind: KindState, Seq: 1, State: &State{Status: StateSaved, Snapshot: "1-bbbbbb"}},
				{Kind: KindNote, Seq: 1, Note: "second"},
			},
			want: []Execution{{Seq: 1, Code: "x", Status: StatusOK, Outputs: []Output{},
				State: &State{Status: StateSaved, Snapshot: "1-bbbbbb"}, Notes: []string{"first", "second"}}},
		},
		{
			name: "sorted by seq, interleaved records",
			recs: []Record{
				{Kind: KindStart, Seq: 2, Code: "b"},
				{Kind: KindStart, Seq: 1, Code: "a"},
				{Kind: KindEnd, Seq: 2, Status: StatusOK},
				{Kind: KindEnd, Seq: 1, Status: StatusInterrupted},
			},
			want: []Execution{
				{Seq: 1, Code: "a", Status: StatusInterrupted, Outputs: []Output{}},
				{Seq: 2, Code: "b", Status: StatusOK, Outputs: []Output{}},
			},
		},
		{
			name: "crash closed later by an end record",
			recs: []Record{
				{Kind: KindStart, Seq: 1, Code: "a", Started: t0},
				{Kind: KindEnd, Seq: 1, Status: StatusCrashed, State: &State{Status: StateRestored, RestoredTo: ptr(int64(0))}},
			},
			want: []Execution{{Seq: 1, Code: "a", Status: StatusCrashed, Started: t0, Outputs: []Output{},
				State: &State{Status: StateRestored, RestoredTo: ptr(int64(0))}}},
		},
		{
			name: "start after end is ignored and reported",
			recs: []Record{
				{Kind: KindEnd, Seq: 1, Code: "a", Status: StatusOK},
				{Kind: KindStart, Seq: 1, Code: "b"},
			},
			want:     []Execution{{Seq: 1, Code: "a", Status: StatusOK, Outputs: []Output{}}},
			problems: 1,
		},
		{
			name: "note for an unknown seq is reported, not shown",
			recs: []Record{
				{Kind: KindNote, Seq: 9, Note: "orphan"},
				{Kind: KindStart, Seq: 1, Code: "a"},
			},
			want:     []Execution{{Seq: 1, Code: "a", Status: StatusRunning, Outputs: []Output{}}},
			problems: 1,
		},
		{
			name:     "state record without state, end without status",
			recs:     []Record{{Kind: KindEnd, Seq: 1}, {Kind: KindState, Seq: 1}},
			want:     []Execution{{Seq: 1, Outputs: []Output{}}},
			problems: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, problems, err := Parse(strings.NewReader(jsonl(t, tt.recs...)))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Len(t, problems, tt.problems, "problems: %q", problems)
		})
	}
}

func TestParseBadLines(t *testing.T) {
	good1 := `{"schema":1,"kind":"start","seq":1,"code":"a"}`
	good2 := `{"schema":1,"kind":"end","seq":1,"status":"ok"}`
	tests := []struct {
		name    string
		in      string
		execs   int
		problem string // substring of the only problem, "" for none
	}{
		{"blank lines are skipped", good1 + "\n\n  \n" + good2 + "\n", 1, ""},
		{"torn last line", good1 + "\n" + good2 + "\n" + `{"schema":1,"kind":"st`, 1, "line 3: torn last line"},
		{"whole last line without newline is used", good1 + "\n" + good2, 1, ""},
		{"whole last line of a newer schema", good1 + "\n" + `{"schema":2,"kind":"end","seq":1}`, 1, "line 2: record schema 2 is newer"},
		{"bad json in the middle", good1 + "\n{nope\n" + good2 + "\n", 1, "line 2: not a record"},
		{"newer schema", good1 + "\n" + `{"schema":2,"kind":"end","seq":1}` + "\n", 1, "line 2: record schema 2 is newer"},
		{"no schema", `{"kind":"start","seq":1}` + "\n", 0, "line 1: record has no schema"},
		{"unknown kind", `{"schema":1,"kind":"boom","seq":1}` + "\n", 0, `line 1: unknown record kind "boom"`},
		{"seq zero", `{"schema":1,"kind":"start","seq":0}` + "\n", 0, "line 1: record seq 0 is not positive"},
		{"wrong type", `{"schema":1,"kind":"start","seq":"1"}` + "\n", 0, "line 1: not a record"},
		{"trailing garbage", good1 + ` x` + "\n", 0, "line 1: not a record"},
		{"a JSON array", `[1,2]` + "\n", 0, "line 1: not a record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			execs, problems, err := Parse(strings.NewReader(tt.in))
			require.NoError(t, err)
			assert.Len(t, execs, tt.execs)
			if tt.problem == "" {
				assert.Empty(t, problems)
				return
			}
			require.Len(t, problems, 1, "%q", problems)
			assert.Contains(t, problems[0], tt.problem)
		})
	}
}

// setLineLimit lowers the line limit for one test.
func setLineLimit(t *testing.T, n int) {
	t.Helper()
	old := lineLimit
	lineLimit = n
	t.Cleanup(func() { lineLimit = old })
}

func TestParseLongLines(t *testing.T) {
	// Lines longer than bufio's buffer (64 KiB) but within the limit are
	// read whole; a longer line is skipped and the next one still read.
	setLineLimit(t, 1<<20)
	big := strings.Repeat("x", lineLimit-100)
	ok := jsonl(t, Record{Kind: KindEnd, Seq: 1, Status: StatusOK, Stdout: big})
	tooLong := `{"schema":1,"kind":"end","seq":2,"stdout":"` + strings.Repeat("y", lineLimit) + `"}` + "\n"
	after := jsonl(t, Record{Kind: KindEnd, Seq: 3, Status: StatusOK})
	for _, tail := range []string{after, strings.TrimSuffix(after, "\n")} {
		execs, problems, err := Parse(strings.NewReader(ok + tooLong + tail))
		require.NoError(t, err)
		require.Len(t, execs, 2)
		assert.Equal(t, int64(1), execs[0].Seq)
		assert.Len(t, execs[0].Stdout, len(big))
		assert.Equal(t, int64(3), execs[1].Seq)
		require.Len(t, problems, 1)
		assert.Contains(t, problems[0], "line 2:")
		assert.Contains(t, problems[0], "longer than")
	}
	// A too long torn last line.
	execs, problems, err := Parse(strings.NewReader(ok + strings.TrimSuffix(tooLong, "\n")))
	require.NoError(t, err)
	assert.Len(t, execs, 1)
	assert.Len(t, problems, 1)
}

type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestParseReadError(t *testing.T) {
	boom := fmt.Errorf("disk on fire")
	in := jsonl(t, Record{Kind: KindEnd, Seq: 1, Status: StatusOK})
	execs, _, err := Parse(&failingReader{data: []byte(in), err: boom})
	require.ErrorIs(t, err, boom)
	assert.Len(t, execs, 1, "what was read before the error is returned")
}

func TestInvalidUTF8BecomesValidJSON(t *testing.T) {
	path := t.TempDir() + "/history.jsonl"
	l, err := Open(path)
	require.NoError(t, err)
	require.NoError(t, l.Append(Record{Kind: KindEnd, Seq: 1, Status: StatusOK, Stdout: "ok \xff\xfe end", Stderr: "\xc3"}))
	require.NoError(t, l.Close())

	execs, problems, err := Parse(bytes.NewReader(mustRead(t, path)))
	require.NoError(t, err)
	assert.Empty(t, problems)
	require.Len(t, execs, 1)
	assert.Equal(t, "ok \uFFFD\uFFFD end", execs[0].Stdout)
	assert.Equal(t, "\uFFFD", execs[0].Stderr)

	var out bytes.Buffer
	require.NoError(t, WriteJSON(&out, []Execution{{Seq: 1, Stdout: "\xff"}}))
	assert.True(t, json.Valid(out.Bytes()))
	assert.Contains(t, out.String(), `"stdout": "\ufffd"`)
}
