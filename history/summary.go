package history

import (
	"encoding/json"
	"errors"
	"io"
	"time"
)

// Summary is what a list of sessions shows of a history: its latest execution.
type Summary struct {
	LastSeq int64     // the highest seq (0: no execution)
	LastEnd time.Time // when that execution ended (its start when it has no end)
}

// Summarize reads a history as a stream and keeps only its summary: memory for one line at
// most (MaxLineBytes), never for the history (Parse holds every execution). Lines that are not
// records are passed over, as Parse reports and skips them.
func Summarize(r io.Reader) (Summary, error) {
	var s Summary
	var started time.Time
	var dur float64
	sc := newLineScanner(r, lineLimit)
	for {
		l, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return s, err
		}
		if l.tooLong || blank(l.data) {
			continue
		}
		var rec struct {
			Seq        int64     `json:"seq"`
			Kind       string    `json:"kind"`
			Started    time.Time `json:"started"`
			DurationMs float64   `json:"duration_ms"`
		}
		if json.Unmarshal(l.data, &rec) != nil || rec.Seq <= 0 {
			continue
		}
		switch {
		case rec.Seq > s.LastSeq:
			s.LastSeq, started, dur = rec.Seq, rec.Started, rec.DurationMs
		case rec.Seq == s.LastSeq && rec.Kind == KindEnd:
			if !rec.Started.IsZero() {
				started = rec.Started
			}
			dur = rec.DurationMs
		}
	}
	if s.LastSeq > 0 && !started.IsZero() {
		s.LastEnd = started.Add(time.Duration(dur * float64(time.Millisecond)))
	}
	return s, nil
}
