package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Parse reads history.jsonl and merges its records by seq into executions,
// oldest first.
//
// Merging: a start record gives the code, the start time and status
// "running"; an end record overrides everything (code and start time only
// when it has them); a state record replaces the State; a note record
// appends to Notes. A start with no end stays "running": the agent turns such
// an execution into "crashed" by appending an end record when the session
// comes back.
//
// Lines that cannot be used are reported in the returned problems, each
// naming its line number, and skipped: bad JSON, an unknown schema or kind,
// a line longer than [MaxLineBytes], a torn last line (one without its
// newline that is not a complete record), state or note records for a seq
// that has no start or end record. Only a failing reader is an error; the
// executions read before it are returned with it. Parse never panics.
func Parse(r io.Reader) ([]Execution, []string, error) {
	var m merger
	sc := newLineScanner(r, lineLimit)
	for {
		l, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			execs, problems := m.result()
			return execs, problems, fmt.Errorf("read history: %w", err)
		}
		m.line(l)
	}
	execs, problems := m.result()
	return execs, problems, nil
}

// merger folds records into executions.
type merger struct {
	bySeq    map[int64]*merged
	problems []string
}

type merged struct {
	exec     Execution
	hasStart bool
	hasEnd   bool
	orphans  []string // kinds of records seen before any start or end
}

func (m *merger) problemf(format string, args ...any) {
	m.problems = append(m.problems, fmt.Sprintf(format, args...))
}

func (m *merger) line(l line) {
	switch {
	case l.tooLong:
		m.problemf("line %d: %d bytes, longer than the %d-byte limit, skipped", l.no, l.size, lineLimit)
		return
	case blank(l.data):
		return // an empty line holds nothing to lose
	}
	rec, err := decodeRecord(l.data)
	if err != nil {
		if !l.terminated && !json.Valid(l.data) {
			m.problemf("line %d: torn last line (no newline, %d bytes), ignored", l.no, l.size)
			return
		}
		m.problemf("line %d: %v", l.no, err)
		return
	}
	m.apply(rec, l.no)
}

func (m *merger) apply(r Record, lineNo int) {
	if m.bySeq == nil {
		m.bySeq = make(map[int64]*merged)
	}
	e := m.bySeq[r.Seq]
	if e == nil {
		e = &merged{exec: Execution{Seq: r.Seq}}
		m.bySeq[r.Seq] = e
	}
	switch r.Kind {
	case KindStart:
		if e.hasEnd {
			m.problemf("line %d: start record for seq %d after its end record, ignored", lineNo, r.Seq)
			return
		}
		e.hasStart = true
		e.exec.Code = r.Code
		e.exec.Started = r.Started
		e.exec.Status = StatusRunning
	case KindEnd:
		e.hasEnd = true
		if r.Code != "" {
			e.exec.Code = r.Code
		}
		if !r.Started.IsZero() {
			e.exec.Started = r.Started
		}
		e.exec.Status = r.Status
		if r.Status == "" {
			m.problemf("line %d: end record for seq %d has no status", lineNo, r.Seq)
		}
		e.exec.Stdout = r.Stdout
		e.exec.Stderr = r.Stderr
		e.exec.Result = r.Result
		e.exec.Error = r.Error
		e.exec.Outputs = r.Outputs
		e.exec.Displays = r.Displays
		e.exec.DurationMs = r.DurationMs
		if r.State != nil {
			e.exec.State = r.State
		}
	case KindState:
		if r.State == nil {
			m.problemf("line %d: state record for seq %d has no state, ignored", lineNo, r.Seq)
			return
		}
		e.exec.State = r.State
	case KindNote:
		e.exec.Notes = append(e.exec.Notes, r.Note)
	}
	if !e.hasStart && !e.hasEnd {
		e.orphans = append(e.orphans, r.Kind)
	}
}

func (m *merger) result() ([]Execution, []string) {
	execs := make([]Execution, 0, len(m.bySeq))
	seqs := make([]int64, 0, len(m.bySeq))
	for seq := range m.bySeq {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs)
	for _, seq := range seqs {
		e := m.bySeq[seq]
		if !e.hasStart && !e.hasEnd {
			m.problemf("seq %d: %d %v record(s) but no start or end record, ignored", seq, len(e.orphans), e.orphans)
			continue
		}
		if e.exec.Outputs == nil {
			e.exec.Outputs = []Output{}
		}
		execs = append(execs, e.exec)
	}
	return execs, m.problems
}
