package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/session"
)

// The reason of a crash is printed from the result, whatever the output holds: user output
// that contains the runtime's bracket, or a flood cut at the cap with its marker.
func TestCrashReasonComesFromTheResultNotTheOutput(t *testing.T) {
	for _, stderr := range []string{
		"",
		"[runtimectl: this is the user's own text]\n",
		strings.Repeat("x", 100) + "\n[runtimectl: output capped at 4.0 MiB for this execution; the rest is dropped; raise it with --max-output]\n",
	} {
		var w bytes.Buffer
		reportOutcome(&w, &session.Result{
			Status: execproto.StatusCrashed, Stderr: stderr,
			Message: "the interpreter died during the execution (exit code 3); state brought back to execution 1",
			Error:   &history.Error{Name: "KernelDied"},
		})
		assert.Contains(t, w.String(), "runtimectl: the interpreter died during the execution (exit code 3)", "stderr %q", stderr)
	}
	var w bytes.Buffer
	reportOutcome(&w, &session.Result{Status: execproto.StatusError, Message: "a note", Error: &history.Error{Name: "ValueError"}})
	assert.Empty(t, w.String(), "an error the code raised needs no runtime note")
}
