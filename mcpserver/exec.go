package mcpserver

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/session"
)

type runCodeIn struct {
	Code     string  `json:"code" jsonschema:"the code to run, as a notebook cell: Python statements (the value of a final expression is returned as the result) or bash commands"`
	Language string  `json:"language,omitempty" jsonschema:"python or bash; leave it out for the session's own language (python by default)"`
	Timeout  float64 `json:"timeout,omitempty" jsonschema:"seconds after which the code is interrupted (the state is kept); leave it out for none"`
	inSession
}

// Execution is an execution as run_code returns it: `session exec --json`, with the output
// cut to the budget.
type Execution struct {
	Session    string         `json:"session"`
	Seq        int64          `json:"seq" jsonschema:"the execution's number in the session, from 1"`
	Status     string         `json:"status" jsonschema:"ok, error (the code raised, or its last command failed), timeout, interrupted or crashed (the interpreter died and was brought back)"`
	Stdout     string         `json:"stdout"`
	Stderr     string         `json:"stderr"`
	Result     *string        `json:"result" jsonschema:"the repr of a final expression (Python), else null"`
	Error      *history.Error `json:"error" jsonschema:"the exception raised, else null"`
	DurationMs float64        `json:"duration_ms"`
	Outputs    []Output       `json:"outputs" jsonschema:"rich outputs saved as files (figures, HTML), in the content of the reply unless a display carried the same"`
	Displays   []DisplayInfo  `json:"displays" jsonschema:"the execution's displays in order (display(), figures, the final value's rich forms), each in the content of the reply"`
	State      string         `json:"state,omitempty" jsonschema:"what became of the interpreter's state: saved, pending, failed, unchanged, off or restored"`
	Message    string         `json:"message,omitempty" jsonschema:"what the runtime says about how the execution ended"`
	// Cut counts what the reply leaves out of each stream to stay within the budget.
	StdoutCut int `json:"stdout_cut,omitempty" jsonschema:"characters of stdout left out of this reply (the history has them)"`
	StderrCut int `json:"stderr_cut,omitempty" jsonschema:"characters of stderr left out of this reply"`
	ResultCut int `json:"result_cut,omitempty" jsonschema:"characters of the result left out of this reply"`
}

// Output is a rich output of an execution.
type Output struct {
	Mime string `json:"mime"`
	Path string `json:"path,omitempty" jsonschema:"the file in the session that holds it"`
	URI  string `json:"uri,omitempty" jsonschema:"the resource that reads it"`
}

func addRunCode(s *Server) {
	open := s.cfg.Spec.Network == "bridge"
	addTool(s, &mcp.Tool{
		Name:        "run_code",
		Description: `Run code in a session's persistent interpreter, like a notebook cell: variables, imports and functions stay for the next call (and across restarts), so build on earlier results instead of repeating them. Python: the value of a final expression is returned as the result; display() output (HTML, Markdown, images, JSON) and matplotlib figures come back as content, in order. bash: one persistent shell (variables, functions, the working directory carry over). The working directory is /workspace. Returns stdout, stderr, the result and any error; long output is cut from the middle to ` + fmt.Sprint(s.cfg.OutputBudget) + ` characters per stream. Without a session, runs in this connection's session (created on first use, its name in the reply). Cancelling the call interrupts the code and keeps the state.`,
		InputSchema: schema[runCodeIn](),
		Annotations: hints("Run code", false, false, false, open),
	}, s.runCode)
}

func (s *Server) runCode(ctx context.Context, req *mcp.CallToolRequest, in runCodeIn) (*mcp.CallToolResult, Execution, error) {
	if in.Timeout < 0 || math.IsNaN(in.Timeout) || math.IsInf(in.Timeout, 0) {
		return nil, Execution{}, fmt.Errorf("%w timeout %v: give a number of seconds (or leave it out for none)", session.ErrInvalid, in.Timeout)
	}
	h, err := s.use(ctx, req, in.Session, in.Language)
	if err != nil {
		return nil, Execution{}, err
	}
	release, err := s.run()
	if err != nil {
		return nil, Execution{}, err
	}
	defer release()
	p := s.startProgress(ctx, req)
	defer p.stop()
	var notices []string
	eo := session.ExecOptions{
		Timeout:  time.Duration(in.Timeout * float64(time.Second)),
		Stdout:   p,
		Stderr:   p,
		OnNotice: func(m string) { notices = append(notices, m) },
		Detach:   s.detach,
		// Asks for the displays (display(), figures, the value's rich forms): they come in
		// res.Displays and become the reply's content.
		OnDisplay: func(history.Display) {},
	}
	if eo.Timeout > 0 && eo.Timeout < time.Millisecond {
		eo.Timeout = time.Millisecond
	}
	// Cancelling ctx (notifications/cancelled) interrupts the code; Exec still returns the
	// result, which the SDK then drops.
	res, err := h.Exec(ctx, in.Code, eo)
	if err != nil {
		select {
		case <-s.detach:
			return nil, Execution{}, fmt.Errorf("the server stopped before the code ended: it goes on in session %s and lands in its history (see session_context)", h.Name())
		default:
		}
		return nil, Execution{}, err
	}
	p.stop()
	out := s.execution(res)
	content := s.execContent(ctx, h.Name(), res, notices)
	s.res.outputsOf(h.Name(), out.Outputs)
	return &mcp.CallToolResult{Content: content}, out, nil
}

// execution is the Result cut to the budget.
func (s *Server) execution(res *session.Result) Execution {
	e := Execution{Session: res.Session, Seq: res.Seq, Status: string(res.Status), Error: res.Error, DurationMs: res.DurationMs, Message: res.Message, Outputs: []Output{}, Displays: displayInfos(res.Displays)}
	short := func(v string) (string, int) {
		head, tail, n := cut(v, s.cfg.OutputBudget)
		if n == 0 {
			return v, 0
		}
		return head + fmt.Sprintf("\n[... %d characters cut ...]\n", n) + tail, n
	}
	e.Stdout, e.StdoutCut = short(res.Stdout)
	e.Stderr, e.StderrCut = short(res.Stderr)
	if res.Result != nil {
		r, n := short(*res.Result)
		e.Result, e.ResultCut = &r, n
	}
	if res.Error != nil && len(res.Error.Traceback) > s.cfg.OutputBudget {
		tb := *res.Error
		tb.Traceback, _ = short(tb.Traceback)
		e.Error = &tb
	}
	if res.State != nil {
		e.State = string(res.State.Status)
	}
	for _, o := range res.Outputs {
		e.Outputs = append(e.Outputs, Output{Mime: o.Mime, Path: o.Path, URI: outputURI(res.Session, o.Path)})
	}
	return e
}

// clip is v cut to the budget for a model to read, the cut said with where the rest is.
func (s *Server) clip(v, what, name string) string {
	head, tail, n := cut(v, s.cfg.OutputBudget)
	if n == 0 {
		return v
	}
	return head + fmt.Sprintf("\n[... runtimectl cut %d characters of %s from the middle, to stay within %d; the session's history has all of it (resource %s) ...]\n", n, what, s.cfg.OutputBudget, historyURI(name)) + tail
}

// execContent is what a model reads of an execution: its output, its result, its rich outputs
// as images, HTML and text, and a last line that says how it ended.
func (s *Server) execContent(ctx context.Context, name string, res *session.Result, notices []string) []mcp.Content {
	var content []mcp.Content
	text := func(t string) { content = append(content, &mcp.TextContent{Text: t}) }
	if res.Stdout != "" {
		text(s.clip(res.Stdout, "stdout", name))
	}
	if res.Stderr != "" {
		text("stderr:\n" + s.clip(res.Stderr, "stderr", name))
	}
	if res.Error != nil && res.Error.Traceback != "" && !strings.Contains(res.Stderr, strings.TrimSpace(res.Error.Traceback)) {
		text("traceback:\n" + s.clip(res.Error.Traceback, "the traceback", name))
	}
	if res.Result != nil {
		r := s.clip(*res.Result, "the result", name)
		if strings.Contains(r, "\n") {
			text("result:\n" + r)
		} else {
			text("result: " + r)
		}
	}
	left, shown := int64(maxRichReply), newShownData()
	content = append(content, s.displayContent(name, res.Seq, res.Displays, res.Result != nil, &left, shown)...)
	content = append(content, s.richContent(ctx, name, res.Outputs, &left, shown)...)
	var last []string
	last = append(last, fmt.Sprintf("session %s, execution %d: %s (%s)", name, res.Seq, res.Status, duration(res.DurationMs)))
	if res.Error != nil {
		last = append(last, res.Error.Name+": "+oneLine(res.Error.Value))
	}
	if res.Message != "" && res.Status != "ok" {
		last = append(last, res.Message)
	}
	if res.State != nil && res.State.Status == history.StateFailed && res.State.Message != "" {
		last = append(last, "warning: "+res.State.Message)
	}
	for _, n := range []struct {
		stream string
		n      int64
	}{{"stdout", res.StdoutTruncated}, {"stderr", res.StderrTruncated}} {
		if n.n > 0 {
			last = append(last, fmt.Sprintf("the session kept %d bytes of %s fewer than were written (its output cap)", n.n, n.stream))
		}
	}
	last = append(last, notices...)
	text(strings.Join(last, "; "))
	return content
}

func duration(ms float64) string {
	d := time.Duration(ms * float64(time.Millisecond))
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

// cut keeps at most max characters of s, the first quarter (head) and the last three quarters
// (tail), and returns how many it left out (0: head is s). It cuts between characters.
func cut(s string, max int) (head, tail string, n int) {
	count := utf8.RuneCountInString(s)
	if count <= max {
		return s, "", 0
	}
	headN := max / 4
	return s[:byteOffset(s, headN)], s[byteOffset(s, count-(max-headN)):], count - max
}

// byteOffset is the byte offset of the rune at index i of s.
func byteOffset(s string, i int) int {
	for off := range s {
		if i == 0 {
			return off
		}
		i--
	}
	return len(s)
}

// progress is the output of a running execution so far, sent to the client as progress
// notifications every ProgressEvery (for a call with a progress token).
type progress struct {
	mu    sync.Mutex
	tail  []byte
	total int64
	done  chan struct{}
	once  sync.Once
}

// progressTail is how much of the latest output a progress notification carries.
const progressTail = 2000

func (s *Server) startProgress(ctx context.Context, req *mcp.CallToolRequest) *progress {
	p := &progress{done: make(chan struct{})}
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return p
	}
	start := time.Now()
	go func() {
		t := time.NewTicker(s.cfg.ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			elapsed := time.Since(start)
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      elapsed.Seconds(),
				Message:       p.message(elapsed),
			})
		}
	}()
	return p
}

// Write receives the execution's output (stdout and stderr, from one goroutine).
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.total += int64(len(b))
	p.tail = append(p.tail, b...)
	if len(p.tail) > 2*progressTail {
		p.tail = append(p.tail[:0], p.tail[len(p.tail)-progressTail:]...)
	}
	return len(b), nil
}

func (p *progress) message(elapsed time.Duration) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	msg := fmt.Sprintf("running for %s", elapsed.Round(time.Second))
	if p.total == 0 {
		return msg + ", no output yet"
	}
	tail := p.tail
	if len(tail) > progressTail {
		tail = tail[len(tail)-progressTail:]
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s, %d bytes of output so far; the latest:\n%s", msg, p.total, strings.ToValidUTF8(string(tail), "\uFFFD"))
}

func (p *progress) stop() { p.once.Do(func() { close(p.done) }) }
