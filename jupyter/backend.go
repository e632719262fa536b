package jupyter

import (
	"context"
	"encoding/json"
	"sync"
)

// Backend is the language behind a Kernel. Execute and the requests of the shell socket are
// called one at a time; Interrupt and Shutdown come from the control socket, while an
// execution may be running.
type Backend interface {
	// Info is the kernel_info_reply's content (Status and ProtocolVersion are the Kernel's).
	Info(ctx context.Context) KernelInfo
	// Execute runs req.Code, publishing its outputs through out, and returns the reply. The
	// Kernel publishes the status around it, and the error message of a reply whose status is
	// error.
	Execute(ctx context.Context, req ExecuteRequest, out *Publisher) ExecuteReply
	Complete(ctx context.Context, req CompleteRequest) (CompleteReply, error)
	Inspect(ctx context.Context, req InspectRequest) (InspectReply, error)
	IsComplete(ctx context.Context, req IsCompleteRequest) (IsCompleteReply, error)
	History(ctx context.Context, req HistoryRequest) ([]HistoryEntry, error)
	// Interrupt interrupts the execution running now, if any.
	Interrupt(ctx context.Context) error
	// Shutdown is called once, after the shutdown_reply is sent; the Kernel's Run returns when
	// it does.
	Shutdown(ctx context.Context, restart bool) error
}

// Publisher publishes on iopub the outputs of one request, parented to it. A silent
// execution's Publisher publishes nothing. Safe for concurrent use.
type Publisher struct {
	k      *Kernel
	parent *Message
	silent bool
	mu     sync.Mutex
	count  int64
}

func (p *Publisher) send(msgType string, content any) {
	if p == nil || p.silent {
		return
	}
	p.k.publish(p.parent, msgType, content)
}

// Input publishes execute_input: the code about to run as execution count.
func (p *Publisher) Input(code string, count int64) {
	p.mu.Lock()
	p.count = count
	p.mu.Unlock()
	p.send("execute_input", map[string]any{"code": code, "execution_count": count})
}

// Stream publishes text written to stdout or stderr (Stdout, Stderr).
func (p *Publisher) Stream(name, text string) {
	if text == "" {
		return
	}
	p.send("stream", map[string]any{"name": name, "text": text})
}

// Display publishes display_data (or update_display_data when update is set, with the
// displayID of the display it replaces).
func (p *Publisher) Display(data Bundle, metadata json.RawMessage, displayID string, update bool) {
	content := map[string]any{"data": data, "metadata": object(metadata), "transient": map[string]any{}}
	if displayID != "" {
		content["transient"] = map[string]any{"display_id": displayID}
	}
	kind := "display_data"
	if update {
		kind = "update_display_data"
	}
	p.send(kind, content)
}

// Result publishes execute_result: the value of the execution's last expression.
func (p *Publisher) Result(count int64, data Bundle, metadata json.RawMessage) {
	p.send("execute_result", map[string]any{"execution_count": count, "data": data, "metadata": object(metadata)})
}

// Clear publishes clear_output.
func (p *Publisher) Clear(wait bool) {
	p.send("clear_output", map[string]any{"wait": wait})
}

// Error publishes an error message (the Kernel does it for an execute_reply with status error).
func (p *Publisher) Error(ename, evalue string, traceback []string) {
	if traceback == nil {
		traceback = []string{}
	}
	p.send("error", map[string]any{"ename": ename, "evalue": evalue, "traceback": traceback})
}

func object(m json.RawMessage) json.RawMessage {
	if len(m) == 0 || string(m) == "null" {
		return json.RawMessage("{}")
	}
	return m
}
