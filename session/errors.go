package session

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/execproto"
)

// Errors that callers (and the CLI's exit codes) tell apart.
var (
	// ErrInvalid is bad input from the caller: a session name, a size, a language.
	ErrInvalid = errors.New("invalid")
	// ErrConflict is a start of an existing session with settings other than its recorded ones.
	ErrConflict = errors.New("conflicting settings")
	// ErrNotFound is a session (container and volume) that does not exist.
	ErrNotFound = errors.New("no such session")
	// ErrRunning refuses to remove a running session without force.
	ErrRunning = errors.New("session is running")
	// ErrNoAnswer is an execution with a timeout whose result did not come within the timeout
	// and ExecOptions.AnswerGrace, and whose agent then did not answer a status request within
	// ProbeTimeout: the container may be paused or its engine stuck. The code may still be
	// running; the CLI exits 124.
	ErrNoAnswer = errors.New("the session did not answer")
	// ErrNoImage is a session whose image is missing (build it: `runtimectl image build`; the
	// CLI exits 125) or does not carry the agent (also ErrInvalid: a wrong image given).
	ErrNoImage = errors.New("no usable image")
	// ErrUnreachable is an engine that cannot be reached.
	ErrUnreachable = engine.ErrUnreachable
	// ErrBusy is an execution refused because the session's queue is full: try again.
	ErrBusy = execproto.ErrBusy
	// ErrDiskCap is an execution refused because the session's workspace is past its disk cap
	// (Spec.Disk): free space with ExecOptions.IgnoreDiskCap, or copy out and remove.
	ErrDiskCap = execproto.ErrDiskCap
)

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)

// ValidateName checks a session name: 1 to 63 characters of a-z 0-9 - _ . starting with a
// letter or digit. It asks Docker nothing.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w session name %q: use 1 to 63 characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit", ErrInvalid, name)
	}
	return nil
}
