package history

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
)

// FuzzParse feeds Parse arbitrary bytes: it must never panic or fail (the
// reader cannot fail here), every execution it returns must have a positive
// seq, be in order and have non-nil Outputs, and every exporter must accept
// what it returns.
func FuzzParse(f *testing.F) {
	real, err := os.ReadFile("testdata/history.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(real)
	for _, l := range strings.SplitAfter(string(real), "\n") {
		f.Add([]byte(l))
	}
	f.Add(real[:len(real)/2]) // torn in the middle of a line
	f.Add([]byte(""))
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"schema":1,"kind":"end","seq":1,"status":"ok","stdout":"\xff\xfe"}` + "\n"))
	f.Add([]byte(`{"schema":1,"kind":"state","seq":9,"state":{"status":"saved"}}` + "\n"))
	f.Add([]byte(`{"schema":1,"kind":"end","seq":-1}` + "\n" + `{"schema":2}` + "\n" + `[]`))
	f.Add([]byte(`{"schema":1,"kind":"end","seq":9223372036854775807,"duration_ms":1e308}`))

	f.Fuzz(func(t *testing.T, data []byte) {
		execs, problems, err := Parse(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("Parse failed on an in-memory reader: %v", err)
		}
		for _, p := range problems {
			if p == "" {
				t.Fatal("empty problem")
			}
		}
		var prev int64
		for _, e := range execs {
			if e.Seq <= prev {
				t.Fatalf("seq %d after %d", e.Seq, prev)
			}
			prev = e.Seq
			if e.Outputs == nil {
				t.Fatalf("seq %d: nil Outputs", e.Seq)
			}
		}
		var b bytes.Buffer
		if err := WriteJSON(&b, execs); err != nil {
			t.Fatalf("WriteJSON: %v", err)
		}
		if !json.Valid(b.Bytes()) {
			t.Fatalf("WriteJSON wrote invalid JSON: %q", b.Bytes())
		}
		var back []Execution
		if err := json.Unmarshal(b.Bytes(), &back); err != nil || len(back) != len(execs) {
			t.Fatalf("WriteJSON output does not read back: %v", err)
		}
		b.Reset()
		if err := WriteIPYNB(&b, "python", execs); err != nil || !json.Valid(b.Bytes()) {
			t.Fatalf("WriteIPYNB: %v", err)
		}
		b.Reset()
		if err := WriteExecutorJSON(&b, execs); err != nil || !json.Valid(b.Bytes()) {
			t.Fatalf("WriteExecutorJSON: %v: %q", err, b.Bytes())
		}
		if err := WriteText(io.Discard, execs); err != nil {
			t.Fatalf("WriteText: %v", err)
		}
	})
}
