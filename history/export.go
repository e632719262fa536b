package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// WriteText prints executions for a person to read: per execution a header
// line "[7] ok 3.2ms" (seq, status, duration), the code indented by four
// spaces, then whatever it produced, each part under a "--- name" line
// (stdout, stderr, result, error, outputs), then the state of the
// interpreter when it is not simply saved, and the notes. Executions are
// separated by an empty line.
func WriteText(w io.Writer, execs []Execution) error {
	bw := bufio.NewWriter(w)
	for i, e := range execs {
		if i > 0 {
			bw.WriteString("\n")
		}
		writeTextExec(bw, e)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write history text: %w", err)
	}
	return nil
}

func writeTextExec(w *bufio.Writer, e Execution) {
	fmt.Fprintf(w, "[%d] %s", e.Seq, e.Status)
	if e.Status != StatusRunning {
		fmt.Fprintf(w, " %s", formatMs(e.DurationMs))
	}
	if !e.Started.IsZero() {
		fmt.Fprintf(w, "  %s", e.Started.UTC().Format(time.RFC3339))
	}
	w.WriteString("\n")
	if code := strings.TrimSuffix(e.Code, "\n"); code != "" {
		for _, l := range strings.SplitAfter(code, "\n") {
			if l != "\n" {
				w.WriteString("    ")
			}
			w.WriteString(l)
		}
		w.WriteString("\n")
	}
	section := func(name, body string) {
		if body == "" {
			return
		}
		fmt.Fprintf(w, "--- %s\n", name)
		w.WriteString(body)
		if !strings.HasSuffix(body, "\n") {
			w.WriteString("\n")
		}
	}
	section("stdout", e.Stdout)
	section("stderr", e.Stderr)
	if e.Result != nil {
		section("result", *e.Result+"\n")
	}
	if e.Error != nil {
		section("error", errorLine(e.Error))
	}
	if len(e.Outputs) > 0 {
		var b strings.Builder
		for _, o := range e.Outputs {
			fmt.Fprintf(&b, "%s %s\n", o.Mime, o.Path)
		}
		section("outputs", b.String())
	}
	if s := e.State; s != nil && s.Status != StateSaved {
		fmt.Fprintf(w, "--- state: %s\n", stateLine(s))
	}
	for _, n := range e.Notes {
		fmt.Fprintf(w, "--- note: %s\n", n)
	}
}

func errorLine(e *Error) string {
	if e.Value == "" {
		return e.Name + "\n"
	}
	return e.Name + ": " + e.Value + "\n"
}

func stateLine(s *State) string {
	parts := []string{string(s.Status)}
	if s.Snapshot != "" {
		parts = append(parts, "snapshot "+s.Snapshot)
	}
	if s.RestoredTo != nil {
		parts = append(parts, "restored to "+strconv.FormatInt(*s.RestoredTo, 10))
	}
	if s.Error != "" {
		parts = append(parts, s.Error)
	}
	if s.Message != "" {
		parts = append(parts, s.Message)
	}
	return strings.Join(parts, "; ")
}

// formatMs prints a duration in milliseconds the way Go prints durations,
// to a tenth of a millisecond ("3.2ms", "1.5234s", "2m3.4s"), or to the
// microsecond below one millisecond ("40µs").
func formatMs(ms float64) string {
	d := time.Duration(ms * float64(time.Millisecond))
	if d < time.Millisecond {
		return d.Round(time.Microsecond).String()
	}
	return d.Round(100 * time.Microsecond).String()
}

// WriteJSON prints executions as an indented JSON array, "[]" when there are
// none: the format of `session history --format json`. Outputs is always an
// array; result and error are null when absent.
func WriteJSON(w io.Writer, execs []Execution) error {
	if execs == nil {
		execs = []Execution{}
	}
	out := make([]Execution, len(execs))
	for i, e := range execs {
		if e.Outputs == nil {
			e.Outputs = []Output{}
		}
		out[i] = e
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write history json: %w", err)
	}
	return nil
}
