package execproto

import (
	"time"

	"github.com/runtimectl/runtimectl/contract"
)

// Request operations.
const (
	OpExec      = "exec"      // run code; streams Stdout/Stderr, ends with Result
	OpSnapshot  = "snapshot"  // take a snapshot now and wait until it is saved; Reply SnapshotReply
	OpRestore   = "restore"   // restart the interpreter from a snapshot (EmptyState: with none); Reply RestoreInfo
	OpDrain     = "drain"     // wait until no snapshot is pending; Reply Status
	OpStatus    = "status"    // Reply Status
	OpVars      = "vars"      // Reply VarsReply
	OpInterrupt = "interrupt" // interrupt whatever runs now (from another connection); Reply Status
	OpFiles     = "files"     // list the workspace's files, newest first; Reply FilesReply
	// OpClaim makes a warm pool's member the session Name: answered once (Reply ClaimReply);
	// every other claim, from then on, is refused with code "claimed". What keeps two starts
	// from taking one member.
	OpClaim = "claim"
)

// EmptyState, as the Snapshot of an OpRestore, restarts the interpreter with an empty state
// (a Jupyter kernel's clean restart); it is unsaved until the next snapshot, like a restore's.
const EmptyState = "empty"

// Statuses of an execution (defined once, in package contract).
const (
	StatusOK          = contract.StatusOK
	StatusError       = contract.StatusError
	StatusTimeout     = contract.StatusTimeout
	StatusInterrupted = contract.StatusInterrupted
	StatusCrashed     = contract.StatusCrashed
)

// Error is an exception raised by the code, or a failing status (bash), as it travels.
type Error struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

// Output is a rich output of an execution, a file in the session's workspace.
type Output struct {
	Mime string `json:"mime"`
	Path string `json:"path"`
	// Data is the file's content (base64 in JSON) when it is at most OutputDataMax bytes and
	// the execution's outputs together at most OutputDataTotal; else only the path is given.
	Data []byte `json:"data,omitempty"`
}

// The bounds of the data that outputs carry in a result.
const (
	OutputDataMax   = 1 << 20
	OutputDataTotal = 4 << 20
)

// State says what became of the interpreter's state after an execution.
type State struct {
	Status     contract.StateStatus `json:"status"`
	Snapshot   string               `json:"snapshot,omitempty"`
	Error      string               `json:"error,omitempty"`
	RestoredTo *int64               `json:"restored_to,omitempty"`
	Message    string               `json:"message,omitempty"`
}

// Hello is the first frame of every connection, from the agent.
type Hello struct {
	Protocol int    `json:"protocol"`
	Agent    string `json:"agent"` // the agent's version
	Lang     string `json:"lang"`
	Session  string `json:"session"`
	// Restore tells how the interpreter's state was brought back when the agent (or its kernel)
	// last started, so that the first client after a restart can tell the person.
	Restore *RestoreInfo `json:"restore,omitempty"`
}

// Request is what a client asks of the agent.
type Request struct {
	Op string `json:"op"`
	// Exec
	Code      string `json:"code,omitempty"`
	TimeoutMs int64  `json:"timeout_ms,omitempty"` // 0: no timeout
	MaxOutput int64  `json:"max_output,omitempty"` // bytes per stream delivered; 0: the agent's default
	// IgnoreDiskCap runs the code even when the workspace is past its disk cap (to free space).
	IgnoreDiskCap bool `json:"ignore_disk_cap,omitempty"`
	// Displays asks for the execution's Display frames (a client that does not know them
	// leaves it false and gets none; the history records them either way).
	Displays bool `json:"displays,omitempty"`
	// Env (KEY=VALUE) and Workdir hold for this execution only: set before the code runs, put
	// back after it (Workdir relative to the workspace, or absolute; it must exist).
	Env     []string `json:"env,omitempty"`
	Workdir string   `json:"workdir,omitempty"`
	// Restore
	Snapshot string `json:"snapshot,omitempty"`
	// Snapshot
	Note string `json:"note,omitempty"`
	// Claim: the session the member becomes
	Name string `json:"name,omitempty"`
	// Complete, Inspect (Code too): the cursor in Unicode code points, as Jupyter counts it,
	// and Inspect's detail level (0 or 1).
	CursorPos   int `json:"cursor_pos,omitempty"`
	DetailLevel int `json:"detail_level,omitempty"`
}

// ClaimReply answers the claim that took a pool member.
type ClaimReply struct {
	Claimed bool `json:"claimed"`
}

// Result is the end of an execution: the same fields as `runtimectl session exec --json`.
// Stdout and Stderr are filled by the client from the streamed frames (capped); the agent's
// Result frame leaves them empty.
type Result struct {
	Session    string          `json:"session"`
	Seq        int64           `json:"seq"`
	Status     contract.Status `json:"status"`
	Stdout     string          `json:"stdout"`
	Stderr     string          `json:"stderr"`
	Result     *string         `json:"result"`
	Error      *Error          `json:"error"`
	DurationMs float64         `json:"duration_ms"`
	Outputs    []Output        `json:"outputs"`
	// Displays are the execution's rich outputs in order (filled by the client from the
	// Display frames, like Stdout and Stderr).
	Displays []Display `json:"displays,omitempty"`
	// State says what became of the interpreter's state: the snapshot taken, pending or
	// failed, and after a crash the execution it was brought back to.
	State *State `json:"state,omitempty"`
	// Restored is set when the state was brought back before this execution ran (the
	// container or the interpreter had been restarted).
	Restored *RestoreInfo `json:"restored,omitempty"`
	// Message explains a crash or timeout in one line.
	Message string `json:"message,omitempty"`
	// Truncated counts output bytes that were not delivered because of the output cap.
	StdoutTruncated int64 `json:"stdout_truncated,omitempty"`
	StderrTruncated int64 `json:"stderr_truncated,omitempty"`
}

// RestoreInfo tells what state the interpreter was started with.
type RestoreInfo struct {
	Snapshot string    `json:"snapshot,omitempty"` // "" when it started empty
	Seq      int64     `json:"seq"`                // the execution the snapshot follows
	Restored []string  `json:"restored"`
	Failed   []Skipped `json:"failed"`
	// Copies names what came back as a copy of what it shared before (a NumPy view whose
	// owner a snapshot could not keep shared with it); its values are those of the snapshot.
	Copies []Skipped `json:"copies,omitempty"`
	// Messages: corrupt snapshots passed over, executions found crashed, and the like.
	Messages []string `json:"messages,omitempty"`
}

// ErrorReply is the payload of an Error frame.
type ErrorReply struct {
	Code    string `json:"code"` // "busy", "bad_request", "not_found", "internal"
	Message string `json:"message"`
}

// Notice is the payload of a Notice frame.
type Notice struct {
	Message string `json:"message"`
}

// Status is the agent's state, the reply to OpStatus and OpDrain.
type Status struct {
	Lang           string `json:"lang"`
	Running        int64  `json:"running"` // seq of the execution running now, 0 if idle
	Queued         int    `json:"queued"`
	NextSeq        int64  `json:"next_seq"`
	LastExec       string `json:"last_exec,omitempty"` // RFC 3339 end of the last execution
	Snapshot       string `json:"snapshot,omitempty"`  // latest saved snapshot id
	PendingSeq     int64  `json:"pending_seq,omitempty"`
	KernelPID      int    `json:"kernel_pid"`
	KernelRestarts int    `json:"kernel_restarts"`
	// DiskUsed is the workspace's size as last measured (-1: not measured yet); DiskLimit is its
	// cap (0: none).
	DiskUsed  int64 `json:"disk_used"`
	DiskLimit int64 `json:"disk_limit,omitempty"`
	// DiskEntries is the workspace's files, folders and links as last measured, EntryLimit
	// their cap; StateUsed is the state volume's size (history, snapshots) as last measured
	// (-1: not yet; 0 from agents before it).
	DiskEntries int64 `json:"disk_entries,omitempty"`
	EntryLimit  int64 `json:"entry_limit,omitempty"`
	StateUsed   int64 `json:"state_used,omitempty"`
}

// SnapshotReply is the reply to OpSnapshot.
type SnapshotReply struct {
	ID        string    `json:"id"`
	Seq       int64     `json:"seq"`
	SizeBytes int64     `json:"size_bytes"`
	Kept      []string  `json:"kept"`
	Skipped   []Skipped `json:"skipped"`
}

// Var describes one variable of the session, the reply to OpVars.
type Var struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Shape   string `json:"shape,omitempty"`
	Len     *int64 `json:"len,omitempty"`
	Size    int64  `json:"size"`
	Preview string `json:"preview"`
}

// VarsReply is the reply to OpVars.
type VarsReply struct {
	Vars    []Var    `json:"vars"`
	Modules []string `json:"modules"`
	Private []string `json:"private"`
}

// Skipped names a variable that was not saved or not restored, and why.
type Skipped struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// File is one file of the workspace.
type File struct {
	Path     string    `json:"path"` // relative to /workspace
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// FilesReply is the reply to OpFiles.
type FilesReply struct {
	Files     []File `json:"files"` // newest first, capped
	Total     int    `json:"total"`
	TotalSize int64  `json:"total_size"`
}
