package session

import (
	"context"
	"io"
	"iter"

	"github.com/runtimectl/runtimectl/history"
)

// EventKind says what an Event carries.
type EventKind string

// Kinds of events, in the order an execution can produce them: output and notices as they
// come, then one result.
const (
	EventStdout EventKind = "stdout"
	EventStderr EventKind = "stderr"
	EventNotice EventKind = "notice"
	// EventDisplay is a rich output (Python: display(), a figure, the final value).
	EventDisplay EventKind = "display"
	EventResult  EventKind = "result"
)

// Event is one thing an execution produced.
type Event struct {
	Kind    EventKind
	Data    []byte           // stdout, stderr: the bytes as written
	Notice  string           // notice: what the runtime says about the session
	Display *history.Display // display: the display, in its place among the output
	Result  *Result          // result: the execution's end (the last event)
}

// Events runs code and returns its events as an iterator, for programs that consume an
// execution as a stream: output and notices as they come, then the result. An error (the
// session could not be reached, bad options) is the one pair with a non-nil error. Leaving the
// loop early interrupts the code. o's own writers and callbacks are called as with Exec.
func (s *Session) Events(ctx context.Context, code string, o ExecOptions) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		events := make(chan Event)
		stopped := make(chan struct{})
		send := func(e Event) {
			select {
			case events <- e:
			case <-stopped:
			}
		}
		wrap := func(w io.Writer, kind EventKind) io.Writer {
			return writerFunc(func(p []byte) {
				if w != nil {
					_, _ = w.Write(p)
				}
				send(Event{Kind: kind, Data: append([]byte(nil), p...)})
			})
		}
		onDisplay := o.OnDisplay
		o.OnDisplay = func(d history.Display) {
			if onDisplay != nil {
				onDisplay(d)
			}
			send(Event{Kind: EventDisplay, Display: &d})
		}
		onNotice := o.OnNotice
		o.Stdout, o.Stderr = wrap(o.Stdout, EventStdout), wrap(o.Stderr, EventStderr)
		o.OnNotice = func(m string) {
			if onNotice != nil {
				onNotice(m)
			}
			send(Event{Kind: EventNotice, Notice: m})
		}
		type end struct {
			r   *Result
			err error
		}
		done := make(chan end, 1)
		go func() {
			r, err := s.Exec(ctx, code, o)
			done <- end{r, err}
		}()
		for {
			select {
			case e := <-events:
				if !yield(e, nil) {
					close(stopped)
					cancel() // the code is interrupted; its result is not waited for
					return
				}
			case d := <-done:
				close(stopped)
				if d.err != nil {
					yield(Event{}, d.err)
					return
				}
				yield(Event{Kind: EventResult, Result: d.r}, nil)
				return
			}
		}
	}
}
