package execproto

import (
	"encoding/json"

	"github.com/runtimectl/runtimectl/contract"
)

// Requests answered by the interpreter for a notebook front end (a Jupyter kernel): Request's
// Code, CursorPos and DetailLevel; replies CompleteReply, InspectReply, IsCompleteReply. They
// are queued like OpVars. A language whose driver does not answer them gets the neutral reply
// (no matches, not found, status unknown).
const (
	OpComplete   = "complete"
	OpInspect    = "inspect"
	OpIsComplete = "is_complete"
)

// TypeDisplay carries a JSON Display of the exec request with the frame's id, in its place
// among the Stdout and Stderr frames.
const TypeDisplay Type = 10

// DisplayKind says what a Display is (defined once, in package contract).
type DisplayKind = contract.DisplayKind

// The kinds of displays.
const (
	DisplayData   = contract.DisplayData
	DisplayResult = contract.DisplayResult
	DisplayUpdate = contract.DisplayUpdate
	DisplayClear  = contract.DisplayClear
	DisplayPage   = contract.DisplayPage
)

// Display is one rich output of an execution: what IPython's display publisher or display
// hook produced (display(obj), a figure, the final expression's value), with Jupyter's
// fields. Data is the mime bundle as Jupyter sends it (text/plain always; image/png and
// image/jpeg base64 strings; application/json a JSON value), kept verbatim.
type Display struct {
	Kind      DisplayKind                `json:"kind"`
	Data      map[string]json.RawMessage `json:"data,omitempty"`
	Metadata  json.RawMessage            `json:"metadata,omitempty"`
	DisplayID string                     `json:"display_id,omitempty"`
	Wait      bool                       `json:"wait,omitempty"` // clear_output
	// StdoutPos and StderrPos are the bytes of each stream delivered before the display:
	// offsets into Result.Stdout and Result.Stderr, so that the run's order can be rebuilt.
	StdoutPos int64 `json:"stdout_pos"`
	StderrPos int64 `json:"stderr_pos"`
}

// The bounds of the displays that an execution delivers: past them a display's data is
// replaced by a text/plain line that says so.
const (
	DisplayMax      = 8 << 20
	DisplayTotalMax = 32 << 20
)

// CompleteReply is the reply to OpComplete: Jupyter's complete_reply without its status.
type CompleteReply struct {
	Matches     []string        `json:"matches"`
	CursorStart int             `json:"cursor_start"`
	CursorEnd   int             `json:"cursor_end"`
	Metadata    json.RawMessage `json:"metadata,omitempty"`
}

// InspectReply is the reply to OpInspect: Jupyter's inspect_reply without its status.
type InspectReply struct {
	Found    bool                       `json:"found"`
	Data     map[string]json.RawMessage `json:"data"`
	Metadata json.RawMessage            `json:"metadata,omitempty"`
}

// IsCompleteReply is the reply to OpIsComplete: Jupyter's is_complete_reply.
type IsCompleteReply struct {
	Status string `json:"status"`           // complete, incomplete, invalid or unknown
	Indent string `json:"indent,omitempty"` // when incomplete
}
