package jupyter

import "encoding/json"

// Bundle is a mime bundle: mime type to value, as Jupyter puts it in a message (text/plain a
// string, image/png a base64 string, application/json a JSON value).
type Bundle map[string]json.RawMessage

// TextBundle is a bundle of text/plain alone.
func TextBundle(s string) Bundle {
	b, _ := json.Marshal(s)
	return Bundle{"text/plain": b}
}

// LanguageInfo is kernel_info_reply's language_info.
type LanguageInfo struct {
	Name              string `json:"name"`
	Version           string `json:"version"`
	Mimetype          string `json:"mimetype"`
	FileExtension     string `json:"file_extension"`
	PygmentsLexer     string `json:"pygments_lexer,omitempty"`
	CodemirrorMode    any    `json:"codemirror_mode,omitempty"`
	NbconvertExporter string `json:"nbconvert_exporter,omitempty"`
}

// HelpLink is one of kernel_info_reply's help_links.
type HelpLink struct {
	Text string `json:"text"`
	URL  string `json:"url"`
}

// KernelInfo is the content of a kernel_info_reply; the Kernel fills Status and
// ProtocolVersion.
type KernelInfo struct {
	Status                string       `json:"status"`
	ProtocolVersion       string       `json:"protocol_version"`
	Implementation        string       `json:"implementation"`
	ImplementationVersion string       `json:"implementation_version"`
	LanguageInfo          LanguageInfo `json:"language_info"`
	Banner                string       `json:"banner"`
	HelpLinks             []HelpLink   `json:"help_links"`
	Debugger              bool         `json:"debugger"`
}

// ExecuteRequest is the content of an execute_request.
type ExecuteRequest struct {
	Code            string            `json:"code"`
	Silent          bool              `json:"silent"`
	StoreHistory    *bool             `json:"store_history,omitempty"`
	UserExpressions map[string]string `json:"user_expressions,omitempty"`
	AllowStdin      bool              `json:"allow_stdin"`
	StopOnError     *bool             `json:"stop_on_error,omitempty"`
}

// Execution statuses of an execute_reply.
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusAborted = "aborted"
)

// ExecuteReply is the content of an execute_reply. When Status is error the Kernel also
// publishes Ename, Evalue and Traceback as an error message on iopub.
type ExecuteReply struct {
	Status          string         `json:"status"`
	ExecutionCount  int64          `json:"execution_count"`
	UserExpressions map[string]any `json:"user_expressions"`
	Payload         []any          `json:"payload"`
	Ename           string         `json:"ename,omitempty"`
	Evalue          string         `json:"evalue,omitempty"`
	Traceback       []string       `json:"traceback,omitempty"`
}

// CompleteRequest is the content of a complete_request.
type CompleteRequest struct {
	Code      string `json:"code"`
	CursorPos int    `json:"cursor_pos"`
}

// CompleteReply is the content of a complete_reply (the Kernel sets Status).
type CompleteReply struct {
	Status      string          `json:"status"`
	Matches     []string        `json:"matches"`
	CursorStart int             `json:"cursor_start"`
	CursorEnd   int             `json:"cursor_end"`
	Metadata    json.RawMessage `json:"metadata"`
}

// InspectRequest is the content of an inspect_request.
type InspectRequest struct {
	Code        string `json:"code"`
	CursorPos   int    `json:"cursor_pos"`
	DetailLevel int    `json:"detail_level"`
}

// InspectReply is the content of an inspect_reply (the Kernel sets Status).
type InspectReply struct {
	Status   string          `json:"status"`
	Found    bool            `json:"found"`
	Data     Bundle          `json:"data"`
	Metadata json.RawMessage `json:"metadata"`
}

// IsCompleteRequest is the content of an is_complete_request.
type IsCompleteRequest struct {
	Code string `json:"code"`
}

// IsCompleteReply is the content of an is_complete_reply: status complete, incomplete
// (with Indent), invalid or unknown.
type IsCompleteReply struct {
	Status string `json:"status"`
	Indent string `json:"indent,omitempty"`
}

// MarshalJSON gives an incomplete reply its indent always, "" included, as ipykernel does
// (the spec's indent is a field of every incomplete reply); the other statuses have none.
func (r IsCompleteReply) MarshalJSON() ([]byte, error) {
	if r.Status == "incomplete" {
		return json.Marshal(struct {
			Status string `json:"status"`
			Indent string `json:"indent"`
		}{r.Status, r.Indent})
	}
	return json.Marshal(struct {
		Status string `json:"status"`
	}{r.Status})
}

// HistoryRequest is the content of a history_request.
type HistoryRequest struct {
	Output         bool   `json:"output"`
	Raw            bool   `json:"raw"`
	HistAccessType string `json:"hist_access_type"` // range, tail or search
	Session        int    `json:"session"`
	Start          int    `json:"start"`
	Stop           int    `json:"stop"`
	N              int    `json:"n"`
	Pattern        string `json:"pattern"`
	Unique         bool   `json:"unique"`
}

// HistoryEntry is one execution of the history: its count, its code and (when asked) its
// output as text.
type HistoryEntry struct {
	Session int
	Line    int64
	Input   string
	Output  *string
}

// ShutdownRequest is the content of a shutdown_request and its reply.
type ShutdownRequest struct {
	Restart bool `json:"restart"`
}

// Stream names.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)
