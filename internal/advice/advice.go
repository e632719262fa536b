// Package advice words an error's remedy twice: in the library's terms, which the error's
// Error says (a Go program calls methods, it has no flags), and in the command line's, which
// the CLI prints. A message is formatted once per audience, with each Words argument giving
// its own text.
package advice

import (
	"errors"
	"fmt"
	"strings"
)

// Words is a part of a message that the library and the CLI say differently, such as a field
// and its flag (Lib "Spec.CPUs", CLI "--cpus") or a remedy (Lib "remove it first (Force
// removes a running one)", CLI "remove it with `runtimectl session rm -f NAME`").
type Words struct{ Lib, CLI string }

// Error is an error with its CLI wording beside it. Errors it wraps are found by errors.Is
// and errors.As as usual.
type Error struct {
	err error  // the message in the library's words; wraps what the format's %w name
	cli string // the same message in the CLI's words
}

func (e *Error) Error() string { return e.err.Error() }

func (e *Error) Unwrap() error { return e.err }

// Errorf is fmt.Errorf with Words arguments, which format as their Lib text in Error and as
// their CLI text in what CLI returns.
func Errorf(format string, args ...any) error {
	lib := make([]any, len(args))
	cli := make([]any, len(args))
	for i, a := range args {
		lib[i], cli[i] = a, a
		if w, ok := a.(Words); ok {
			lib[i], cli[i] = w.Lib, w.CLI
		}
	}
	return &Error{err: fmt.Errorf(format, lib...), cli: fmt.Errorf(format, cli...).Error()}
}

// CLI returns err's message in the CLI's words: the text of each Error in err's tree, however
// deeply wrapped, is replaced by its CLI wording.
func CLI(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	walk(err, func(e *Error) {
		if lib := e.Error(); lib != e.cli {
			msg = strings.Replace(msg, lib, e.cli, 1)
		}
	})
	return msg
}

// walk calls f for each Error in err's tree, outermost first.
func walk(err error, f func(*Error)) {
	for err != nil {
		if e, ok := err.(*Error); ok {
			f(e)
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				walk(inner, f)
			}
			return
		default:
			err = errors.Unwrap(err)
		}
	}
}
