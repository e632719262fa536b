package agent

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// The driver protocol (docs/kernel-protocol.md), typed: the requests the agent writes on a
// driver's fd 3 and the ops of the events it reads on fd 4. encodeRequest is the one place
// that turns a request into its line.

// driverOp names a request to a driver, or an event from it.
type driverOp string

// Requests (fd 3). A reply event has the op of its request (vars, complete, inspect,
// is_complete) or its own (done for exec, snapshot_started for snapshot).
const (
	opExec       driverOp = "exec"
	opSnapshot   driverOp = "snapshot"
	opVars       driverOp = "vars"
	opComplete   driverOp = "complete"
	opInspect    driverOp = "inspect"
	opIsComplete driverOp = "is_complete"
)

// Events (fd 4) that answer no request of their own name.
const (
	opReady           driverOp = "ready"
	opDone            driverOp = "done"
	opError           driverOp = "error"
	opSnapshotStarted driverOp = "snapshot_started"
	opDisplay         driverOp = "display"
	// opInvalid stands for a line a driver wrote that is not a JSON object: a protocol
	// violation.
	opInvalid driverOp = "invalid"
)

// driverRequest is a request line. Fields that do not apply to the op are left out.
type driverRequest struct {
	Op driverOp `json:"op"`
	ID string   `json:"id"`

	// exec. Code is always written for exec (an empty cell is "code":"").
	Seq     int64   `json:"seq,omitempty"`
	Code    *string `json:"code,omitempty"`
	CodeB64 string  `json:"code_b64,omitempty"`
	Nonce   string  `json:"nonce,omitempty"`
	// Sync is written by the driver on fds 1 and 2 before each display event, which puts the
	// display in its place among the output (display.go).
	Sync   string `json:"sync,omitempty"`
	EnvB64 string `json:"env_b64,omitempty"`
	Cwd    string `json:"cwd,omitempty"`
	// Session is the session's name: a claimed warm pool member's interpreter, started under
	// the member's, takes it as RUNTIMECTL_SESSION from the first execution on.
	Session string `json:"session,omitempty"`

	// complete, inspect (Code too), is_complete
	CursorPos   *int `json:"cursor_pos,omitempty"`
	DetailLevel *int `json:"detail_level,omitempty"`
}

// execRequest is the exec request of an execution: the code (and its bytes in base64 when
// bash would decode the JSON slowly), the per-execution environment and working directory.
func execRequest(id string, seq int64, code, nonce, sync string, env []string, workdir string) driverRequest {
	r := driverRequest{Op: opExec, ID: id, Seq: seq, Code: &code, Nonce: nonce, Sync: sync, Cwd: workdir}
	if needsBase64(code) {
		r.CodeB64 = base64.StdEncoding.EncodeToString([]byte(code))
	}
	if len(env) > 0 {
		// NUL-separated: no value can hold a NUL, and every driver can split on it (bash with
		// read -d '').
		r.EnvB64 = base64.StdEncoding.EncodeToString([]byte(strings.Join(env, "\x00")))
	}
	return r
}

// queryRequest is a complete, inspect or is_complete request.
func queryRequest(op driverOp, id, code string, cursorPos, detailLevel int) driverRequest {
	r := driverRequest{Op: op, ID: id, Code: &code}
	if op != opIsComplete {
		r.CursorPos = &cursorPos
	}
	if op == opInspect {
		r.DetailLevel = &detailLevel
	}
	return r
}

// encodeRequest is the line of a request, newline included.
func encodeRequest(r driverRequest) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
