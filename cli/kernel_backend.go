package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/jupyter"
	"github.com/runtimectl/runtimectl/session"
)

// kernelBackend is a Jupyter kernel's language: a runtimectl session, through the library.
type kernelBackend struct {
	c     *session.Client
	spec  session.Spec
	clean bool
	log   *slog.Logger

	// marker is the file that tells the kernel Jupyter starts next with the same connection
	// file that it follows a restart (written by Shutdown, read by start).
	marker string

	// ipython is set once the session has sent a display: its results and figures are
	// displays from then on.
	ipython atomic.Bool

	mu sync.Mutex
	s  *session.Session
	// notice is said on stderr by the next execution: what came back when the kernel
	// started a stopped session (a restart, a notebook reopened).
	notice string
}

func newKernelBackend(c *session.Client, spec session.Spec, clean bool, log *slog.Logger) *kernelBackend {
	return &kernelBackend{c: c, spec: spec, clean: clean, log: log}
}

// start starts (or joins) the kernel's session.
func (b *kernelBackend) start(ctx context.Context) error {
	s, info, err := b.c.Start(ctx, b.spec)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.s = s
	b.mu.Unlock()
	restarted := false
	if b.marker != "" {
		if _, err := os.Stat(b.marker); err == nil {
			restarted = true
			_ = os.Remove(b.marker)
		}
	}
	r := s.Restored()
	switch {
	case (info.Started || info.Recreate) && r != nil && r.Snapshot != "":
		b.notice = restoredNotice(s.Name(), r)
	case restarted && !b.clean:
		// The old kernel was killed before the session had stopped: it never stopped, and its
		// interpreter still holds the state.
		b.notice = fmt.Sprintf("[runtimectl] session %s kept running through the restart, with its state\n", s.Name())
	}
	return nil
}

func restoredNotice(name string, r *session.RestoreInfo) string {
	names := "no variables"
	if len(r.Restored) > 0 {
		names = strings.Join(r.Restored, ", ")
		if len(names) > 300 {
			names = names[:300] + "..."
		}
	}
	msg := fmt.Sprintf("[runtimectl] session %s came back with its state: snapshot %s (after execution %d): %s\n", name, r.Snapshot, r.Seq, names)
	for _, f := range r.Failed {
		msg += fmt.Sprintf("[runtimectl] not restored: %s (%s): %s\n", f.Name, f.Type, f.Reason)
	}
	return msg
}

func (b *kernelBackend) session() *session.Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.s
}

func (b *kernelBackend) close() {
	if s := b.session(); s != nil {
		s.Close()
	}
}

func (b *kernelBackend) Info(context.Context) jupyter.KernelInfo {
	l, _ := kernelLang(b.spec.Lang)
	return jupyter.KernelInfo{
		Implementation: "runtimectl", ImplementationVersion: Version, LanguageInfo: l.info,
		Banner:    fmt.Sprintf("runtimectl %s kernel: session %s (its state survives restarts; `runtimectl session rm %s` removes it)", l.display, b.spec.Name, b.spec.Name),
		HelpLinks: []jupyter.HelpLink{{Text: "runtimectl", URL: "https://github.com/runtimectl/runtimectl"}},
	}
}

// errReply is an execute_reply for a failure of the runtime, not of the code.
func errReply(name string, err error) jupyter.ExecuteReply {
	line := errLine(err)
	return jupyter.ExecuteReply{Status: jupyter.StatusError, Ename: name, Evalue: line, Traceback: []string{name + ": " + line}}
}

func (b *kernelBackend) Execute(ctx context.Context, req jupyter.ExecuteRequest, out *jupyter.Publisher) jupyter.ExecuteReply {
	s := b.session()
	count := int64(0)
	if st, err := s.Status(ctx); err == nil {
		count = st.NextSeq
	} else {
		b.log.Warn("session status", "session", s.Name(), "err", err)
	}
	out.Input(req.Code, count)
	b.mu.Lock()
	notice := b.notice
	b.notice = ""
	b.mu.Unlock()
	if notice != "" {
		out.Stream(jupyter.Stderr, notice)
	}
	// Both streams are held a moment and sent in one stream message, as ipykernel's buffered
	// streams are (print('x') is one "x\n", not "x" and "\n"); what one holds is sent before
	// anything on the other, or a display.
	stdout := newHeldStream(func(p string) { out.Stream(jupyter.Stdout, p) })
	stderr := newHeldStream(func(p string) { out.Stream(jupyter.Stderr, p) })
	defer stderr.stop()
	defer stdout.stop()
	opts := session.ExecOptions{
		StreamOnly: true,
		Stdout: writerFunc(func(p []byte) {
			stderr.flush() // what came before on stderr goes first
			stdout.write(string(p))
		}),
		Stderr: writerFunc(func(p []byte) {
			stdout.flush()
			stderr.write(string(p))
		}),
		// A session stopped behind the kernel's back comes back by itself; that is the server
		// log's to say, not the cell's (its outputs stay those of ipykernel).
		OnNotice: func(m string) { b.log.Info(m, "session", s.Name()) },
	}
	// IPython's displays (display(), figures, the final value) come as they are produced, in
	// their place among the streams; a session that sends them has its results and figures in
	// them, not in Result and Outputs.
	var pmu sync.Mutex
	var pages []any
	sawDisplay := false
	opts.OnDisplay = func(d history.Display) {
		stdout.flush()
		stderr.flush()
		pmu.Lock()
		sawDisplay = true
		pmu.Unlock()
		data := jupyter.Bundle(d.Data)
		switch d.Kind {
		case contract.DisplayResult:
			out.Result(count, data, d.Metadata)
		case contract.DisplayData:
			out.Display(data, d.Metadata, d.DisplayID, false)
		case contract.DisplayUpdate:
			out.Display(data, d.Metadata, d.DisplayID, true)
		case contract.DisplayClear:
			out.Clear(d.Wait)
		case contract.DisplayPage:
			pmu.Lock()
			pages = append(pages, map[string]any{"source": "page", "data": data, "start": 0})
			pmu.Unlock()
		}
	}
	res, err := s.Exec(ctx, req.Code, opts)
	stdout.flush()
	if err != nil {
		stderr.flush()
		return errReply("RuntimectlError", err)
	}
	if res.Error != nil {
		stderr.dropSuffix(res.Error.Traceback) // the error message carries it
	}
	stderr.flush()
	reply := jupyter.ExecuteReply{Status: jupyter.StatusOK, ExecutionCount: res.Seq}
	pmu.Lock()
	reply.Payload = pages
	if sawDisplay {
		b.ipython.Store(true)
	}
	pmu.Unlock()
	if b.ipython.Load() {
		res.Result, res.Outputs = nil, nil // what they hold came as displays
	}
	// The value's rich forms (exec-N-result.html, .png) belong to its execute_result, as in
	// ipykernel; the figures left open are displays after it.
	var displays []jupyter.Bundle
	var result jupyter.Bundle
	if res.Result != nil {
		result = jupyter.TextBundle(*res.Result)
	}
	for _, o := range res.Outputs {
		d, ok := outputBundle(o)
		switch {
		case !ok:
		case result != nil && strings.Contains(path.Base(o.Path), "-result."):
			result[o.Mime] = d[o.Mime]
		default:
			displays = append(displays, d)
		}
	}
	if result != nil {
		out.Result(res.Seq, result, nil)
	}
	for _, d := range displays {
		out.Display(d, nil, "", false)
	}
	switch {
	case res.Error != nil:
		reply.Status, reply.Ename, reply.Evalue = jupyter.StatusError, res.Error.Name, res.Error.Value
		reply.Traceback = tracebackLines(res.Error.Traceback, res.Error.Name, res.Error.Value)
		if res.Message != "" && res.Status == history.StatusCrashed {
			reply.Traceback = append(reply.Traceback, res.Message)
		}
	case res.Status == history.StatusInterrupted:
		reply.Status, reply.Ename, reply.Traceback = jupyter.StatusError, "KeyboardInterrupt", []string{"KeyboardInterrupt"}
	case res.Status == history.StatusCrashed || res.Status == history.StatusTimeout:
		reply.Status, reply.Ename, reply.Evalue = jupyter.StatusError, "RuntimectlError", res.Message
		reply.Traceback = []string{res.Message}
	}
	return reply
}

// outputBundle is a rich output (a figure saved by the code) as a display's bundle.
func outputBundle(o history.Output) (jupyter.Bundle, bool) {
	if len(o.Data) == 0 {
		return nil, false
	}
	var v any = string(o.Data)
	if strings.HasPrefix(o.Mime, "image/") && o.Mime != "image/svg+xml" {
		v = base64.StdEncoding.EncodeToString(o.Data)
	}
	d, _ := json.Marshal(v)
	b := jupyter.TextBundle(fmt.Sprintf("<%s %s>", o.Mime, path.Base(o.Path)))
	b[o.Mime] = d
	return b, true
}

// tracebackLines is a traceback's text as Jupyter's list of lines.
func tracebackLines(tb, name, value string) []string {
	tb = strings.TrimRight(tb, "\n")
	if tb == "" {
		if value == "" {
			return []string{name}
		}
		return []string{name + ": " + value}
	}
	return strings.Split(tb, "\n")
}

// Complete, Inspect and IsComplete are the interpreter's (IPython's in Python sessions; the
// neutral answers elsewhere).
func (b *kernelBackend) Complete(ctx context.Context, req jupyter.CompleteRequest) (jupyter.CompleteReply, error) {
	r, err := b.session().Complete(ctx, req.Code, req.CursorPos)
	if err != nil {
		return jupyter.CompleteReply{}, err
	}
	return jupyter.CompleteReply{Matches: r.Matches, CursorStart: r.CursorStart, CursorEnd: r.CursorEnd, Metadata: r.Metadata}, nil
}

func (b *kernelBackend) Inspect(ctx context.Context, req jupyter.InspectRequest) (jupyter.InspectReply, error) {
	r, err := b.session().Inspect(ctx, req.Code, req.CursorPos, req.DetailLevel)
	if err != nil {
		return jupyter.InspectReply{}, err
	}
	return jupyter.InspectReply{Found: r.Found, Data: jupyter.Bundle(r.Data), Metadata: r.Metadata}, nil
}

func (b *kernelBackend) IsComplete(ctx context.Context, req jupyter.IsCompleteRequest) (jupyter.IsCompleteReply, error) {
	r, err := b.session().IsComplete(ctx, req.Code)
	if err != nil {
		return jupyter.IsCompleteReply{}, err
	}
	return jupyter.IsCompleteReply{Status: r.Status, Indent: r.Indent}, nil
}

// History answers from the session's history: line numbers are its seqs.
func (b *kernelBackend) History(ctx context.Context, req jupyter.HistoryRequest) ([]jupyter.HistoryEntry, error) {
	execs, _, err := b.c.History(ctx, b.spec.Name)
	if err != nil {
		return nil, err
	}
	var entries []jupyter.HistoryEntry
	seen := map[string]bool{}
	for _, e := range execs {
		if req.HistAccessType == "range" && ((req.Start > 0 && e.Seq < int64(req.Start)) || (req.Stop > 0 && e.Seq >= int64(req.Stop))) {
			continue
		}
		if req.HistAccessType == "search" && req.Pattern != "" {
			if ok, _ := path.Match(req.Pattern, e.Code); !ok {
				continue
			}
		}
		if req.Unique {
			if seen[e.Code] {
				continue
			}
			seen[e.Code] = true
		}
		entries = append(entries, jupyter.HistoryEntry{Session: 1, Line: e.Seq, Input: e.Code, Output: e.Result})
	}
	if (req.HistAccessType == "tail" || req.HistAccessType == "search") && req.N > 0 && len(entries) > req.N {
		entries = entries[len(entries)-req.N:]
	}
	return entries, nil
}

func (b *kernelBackend) Interrupt(ctx context.Context) error {
	s := b.session()
	if s == nil {
		return nil // still starting: nothing runs
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.Interrupt(ctx)
	return err
}

// Shutdown stops the session, which keeps everything; a restart's new kernel process starts it
// again and its agent restores the state. A clean restart (--clean-restart) resets the
// interpreter to an empty state instead and leaves the session running for the new process.
func (b *kernelBackend) Shutdown(ctx context.Context, restart bool) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	s := b.session()
	if restart && b.marker != "" {
		_ = os.WriteFile(b.marker, []byte(s.Name()+"\n"), 0o600)
	}
	if restart && b.clean {
		b.log.Info("kernel restart: resetting the session to an empty state", "session", s.Name())
		_, err := s.Reset(ctx)
		return err
	}
	b.log.Info("kernel shutdown: stopping the session", "session", s.Name(), "restart", restart)
	return s.Stop(ctx)
}

// heldStream forwards a stream with a short delay: the chunks of one write (print's text and
// its newline) go in one message, and a traceback the interpreter writes on stderr just before
// the end of an execution can be taken out again (the error message carries it, as ipykernel's
// does). What is held is sent within 100 ms, or before anything on the other stream, or at
// the end.
type heldStream struct {
	mu    sync.Mutex
	held  string
	send  func(string)
	timer *time.Timer
	done  bool
}

func newHeldStream(send func(string)) *heldStream { return &heldStream{send: send} }

func (h *heldStream) write(p string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held += p
	if h.timer == nil && !h.done {
		h.timer = time.AfterFunc(100*time.Millisecond, h.flush)
	}
}

func (h *heldStream) flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
	if h.held != "" {
		h.send(h.held)
		h.held = ""
	}
}

// dropSuffix takes tb out of what is held when it ends with it.
func (h *heldStream) dropSuffix(tb string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if tb != "" && strings.HasSuffix(h.held, tb) {
		h.held = strings.TrimSuffix(h.held, tb)
	}
}

func (h *heldStream) stop() {
	h.mu.Lock()
	h.done = true
	h.mu.Unlock()
	h.flush()
}

// writerFunc is a function as an io.Writer (the execution's output, chunk by chunk).
type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}
