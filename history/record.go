package history

import (
	"time"

	"github.com/runtimectl/runtimectl/contract"
)

// Status is how an execution ended; StateStatus what became of the state after it. Both are
// defined once, in package contract.
type (
	Status      = contract.Status
	StateStatus = contract.StateStatus
)

// Schema is the version of the record format that this package writes and
// reads. A record with a higher schema is reported, not guessed at.
const Schema = 1

// Record kinds: the value of [Record].Kind.
const (
	// KindStart is written when an execution begins (seq, code, started,
	// status "running"): if no end record follows, the execution was cut
	// short by a crash of the container or the agent.
	KindStart = "start"
	// KindEnd is written when an execution finishes and carries its
	// outcome; it overrides what the start record said.
	KindEnd = "end"
	// KindState says what became of the interpreter state after an
	// execution ([State]); a later state record replaces an earlier one.
	KindState = "state"
	// KindNote attaches a free-form message to an execution.
	KindNote = "note"
)

// Execution statuses: the value of [Record].Status and [Execution].Status.
const (
	StatusRunning     = contract.StatusRunning
	StatusOK          = contract.StatusOK
	StatusError       = contract.StatusError
	StatusTimeout     = contract.StatusTimeout
	StatusInterrupted = contract.StatusInterrupted
	StatusCrashed     = contract.StatusCrashed
)

// State statuses: the value of [State].Status.
const (
	StateSaved     = contract.StateSaved
	StatePending   = contract.StatePending
	StateFailed    = contract.StateFailed
	StateUnchanged = contract.StateUnchanged
	StateOff       = contract.StateOff
	StateRestored  = contract.StateRestored
)

// Error is an exception raised by the code (Python), or the failing status
// of the last command (bash: Name "ExitStatus", Value "1").
type Error struct {
	Name      string `json:"name"`      // exception class ("NameError")
	Value     string `json:"value"`     // its message
	Traceback string `json:"traceback"` // the whole traceback text, "" for bash
}

// Output is a rich output of an execution, such as a figure saved as PNG,
// stored as a file in the session's workspace.
type Output struct {
	Mime string `json:"mime"` // "image/png", "text/html"
	Path string `json:"path"` // absolute path inside the session
	// Data is the content, in a result (see execproto.Output); never kept in the history.
	Data []byte `json:"data,omitempty"`
}

// State says what became of the interpreter state after an execution.
type State struct {
	// Status is one of "saved", "pending", "failed", "unchanged", "off",
	// "restored" (the State* constants).
	Status StateStatus `json:"status"`
	// Snapshot is the id of the snapshot written (or restored).
	Snapshot string `json:"snapshot,omitempty"`
	// Error says why a snapshot failed.
	Error string `json:"error,omitempty"`
	// RestoredTo is set after a crash or a timeout kill: the seq whose
	// state was brought back (0 = the empty state).
	RestoredTo *int64 `json:"restored_to,omitempty"`
	// Message is a sentence for a person.
	Message string `json:"message,omitempty"`
}

// Record is one line of history.jsonl. Which fields a record carries
// depends on its Kind: start (Seq, Code, Status "running", Started), end
// (everything about the outcome), state (State), note (Note).
type Record struct {
	Schema int    `json:"schema"` // set to [Schema] by Append
	Kind   string `json:"kind"`   // KindStart, KindEnd, KindState or KindNote
	Seq    int64  `json:"seq"`    // the execution, from 1, never reused

	Code   string `json:"code,omitempty"`   // the code as submitted
	Status Status `json:"status,omitempty"` // Status* constants
	Stdout string `json:"stdout,omitempty"` // captured, capped (see CapOutput)
	Stderr string `json:"stderr,omitempty"` // captured, capped
	// StdoutTruncated and StderrTruncated count the bytes dropped by the
	// output cap (see [CapOutput]).
	StdoutTruncated int64 `json:"stdout_truncated,omitempty"`
	StderrTruncated int64 `json:"stderr_truncated,omitempty"`

	Result     *string   `json:"result,omitempty"`      // repr of a final expression (Python)
	Error      *Error    `json:"error,omitempty"`       // what was raised, or the failing status
	Outputs    []Output  `json:"outputs,omitempty"`     // rich outputs (figures, HTML)
	Displays   []Display `json:"displays,omitempty"`    // displays in order (IPython), capped
	Started    time.Time `json:"started,omitzero"`      // when the execution began
	DurationMs float64   `json:"duration_ms,omitempty"` // how long it ran

	State *State `json:"state,omitempty"` // end and state records
	Note  string `json:"note,omitempty"`  // note records
}

// Execution is the merged view of one seq (start + end + later state and
// note records), as printed by `session history --format json`. The fields
// mean what they mean in [Record].
type Execution struct {
	Seq        int64     `json:"seq"`
	Code       string    `json:"code"`
	Status     Status    `json:"status"` // "running" when there is no end record
	Stdout     string    `json:"stdout"`
	Stderr     string    `json:"stderr"`
	Result     *string   `json:"result"`  // null when there is none
	Error      *Error    `json:"error"`   // null when there is none
	Outputs    []Output  `json:"outputs"` // never nil: [] in JSON
	Displays   []Display `json:"displays,omitempty"`
	Started    time.Time `json:"started"`
	DurationMs float64   `json:"duration_ms"`
	State      *State    `json:"state,omitempty"` // from the end record, replaced by later state records
	Notes      []string  `json:"notes,omitempty"` // from note records, in order
}

func knownKind(k string) bool {
	switch k {
	case KindStart, KindEnd, KindState, KindNote:
		return true
	}
	return false
}
