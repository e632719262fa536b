package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// Result is the end of an execution: the fields of `runtimectl session exec --json`. It is the
// library's own model, not the protocol's frame; newResult fills it, in one place.
type Result struct {
	Session    string           `json:"session"`
	Seq        int64            `json:"seq"`
	Status     history.Status   `json:"status"`
	Stdout     string           `json:"stdout"`
	Stderr     string           `json:"stderr"`
	Result     *string          `json:"result"`
	Error      *history.Error   `json:"error"`
	DurationMs float64          `json:"duration_ms"`
	Outputs    []history.Output `json:"outputs"`
	// Displays are the execution's rich outputs in order, Jupyter's display_data,
	// execute_result, update_display_data, clear_output and page (Python sessions: display(),
	// figures, the final expression's value); never nil. Each says where it came among the
	// output (StdoutPos, StderrPos: offsets into Stdout and Stderr).
	Displays []history.Display `json:"displays"`
	// State says what became of the interpreter's state: the snapshot taken, pending or
	// failed, and after a crash the execution it was brought back to.
	State *history.State `json:"state,omitempty"`
	// Restored is set when the state was brought back before this execution ran (the
	// container or the interpreter had been restarted).
	Restored *RestoreInfo `json:"restored,omitempty"`
	// Message explains a crash, a timeout or a restart in one line: the CLI prints it from
	// here, never by looking into the output.
	Message string `json:"message,omitempty"`
	// StdoutTruncated and StderrTruncated count output bytes not delivered past the cap.
	StdoutTruncated int64 `json:"stdout_truncated,omitempty"`
	StderrTruncated int64 `json:"stderr_truncated,omitempty"`
}

// newResult is the Result of an execution from the agent's result frame and the output that
// was streamed.
func newResult(session string, w *execproto.Result, stdout, stderr []byte, restored *RestoreInfo) *Result {
	r := &Result{
		Session: session, Seq: w.Seq, Status: w.Status, Stdout: string(stdout), Stderr: string(stderr),
		Result: w.Result, Error: (*history.Error)(w.Error), DurationMs: w.DurationMs,
		Outputs: make([]history.Output, 0, len(w.Outputs)), State: (*history.State)(w.State),
		Restored: w.Restored, Message: w.Message,
		StdoutTruncated: w.StdoutTruncated, StderrTruncated: w.StderrTruncated,
	}
	for _, o := range w.Outputs {
		r.Outputs = append(r.Outputs, history.Output(o))
	}
	r.Displays = make([]history.Display, 0, len(w.Displays))
	for _, d := range w.Displays {
		r.Displays = append(r.Displays, history.Display(d))
	}
	if r.Restored == nil {
		r.Restored = restored
	}
	return r
}

// RestoreInfo tells what state a session's interpreter started with.
type RestoreInfo = execproto.RestoreInfo

var drainRequest = execproto.Request{Op: execproto.OpDrain}

// Session is a handle on one running session. It is safe for concurrent use.
type Session struct {
	c    *Client
	name string
	lang string

	// reconnect is held while the stream is reopened, so that goroutines that find it ended at
	// the same moment open one stream between them, not one each.
	reconnect sync.Mutex
	// start brings the session up and returns a handle with a live stream; nil means Start.
	start func(ctx context.Context) (*Session, StartInfo, error)

	mu   sync.Mutex
	conn *execproto.Client
	// hello is the agent's greeting on the current stream: after a restart it says what state
	// was restored.
	hello execproto.Hello
	// unreported is a restore (the container was started again) that no Exec result has told
	// its caller about yet.
	unreported *RestoreInfo
}

// takeUnreported returns the restore not yet reported, once.
func (s *Session) takeUnreported() *RestoreInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.unreported
	s.unreported = nil
	return r
}

// Name returns the session's name.
func (s *Session) Name() string { return s.name }

// Lang returns the session's language.
func (s *Session) Lang() string { return s.lang }

// Restored returns what the agent said about the state it restored when this handle connected.
func (s *Session) Restored() *RestoreInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hello.Restore
}

// connect opens the private stream to the agent.
func (s *Session) connect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Minute) // the agent may be restoring a large state
	defer cancel()
	rwc, err := s.c.ctr.Dial(cctx, s.name)
	if err != nil {
		return err
	}
	conn, err := execproto.NewClient(cctx, rwc)
	if err != nil {
		rwc.Close()
		return fmt.Errorf("session %q: %w", s.name, err)
	}
	s.mu.Lock()
	s.conn = conn
	s.hello = conn.Hello()
	if s.lang == "" {
		s.lang = s.hello.Lang
	}
	s.mu.Unlock()
	return nil
}

// client returns the live stream, reopening it (and starting the container) when it ended.
// restarted is non-nil when the session had to be brought back.
func (s *Session) client(ctx context.Context) (*execproto.Client, *RestoreInfo, error) {
	if conn := s.live(); conn != nil {
		return conn, nil, nil
	}
	s.reconnect.Lock()
	defer s.reconnect.Unlock()
	if conn := s.live(); conn != nil {
		return conn, nil, nil // another goroutine reopened it while this one waited
	}
	start := s.start
	if start == nil {
		start = func(ctx context.Context) (*Session, StartInfo, error) { return s.c.Start(ctx, Spec{Name: s.name}) }
	}
	ns, info, err := start(ctx)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	s.conn, s.hello = ns.conn, ns.hello
	s.mu.Unlock()
	if info.Started || info.Recreate {
		s.mu.Lock()
		s.unreported = ns.hello.Restore
		s.mu.Unlock()
	}
	return ns.conn, nil, nil
}

// live returns the stream when it is open, else nil.
func (s *Session) live() *execproto.Client {
	s.mu.Lock()
	conn := s.conn
	s.mu.Unlock()
	if conn == nil {
		return nil
	}
	select {
	case <-conn.Done():
		return nil
	default:
		return conn
	}
}

// Stop closes this handle's stream, then snapshots the session and stops its container, as
// Client.Stop does; the volumes and the state stay, and the next Exec on the handle (or a
// Start) brings the session back.
func (s *Session) Stop(ctx context.Context) error {
	s.Close()
	return s.c.Stop(ctx, s.name)
}

// Remove closes this handle's stream and removes the session, running or not: its container
// and both volumes, with its state and history.
func (s *Session) Remove(ctx context.Context) error {
	s.Close()
	return s.c.Remove(ctx, s.name, true)
}

// Terminate is what a test's defer wants: Remove, and a session that is gone already is no
// error.
func (s *Session) Terminate(ctx context.Context) error {
	if err := s.Remove(ctx); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// Close closes this handle's stream and nothing else: the session goes on running (Stop and
// Remove end it).
func (s *Session) Close() error {
	s.mu.Lock()
	conn := s.conn
	s.conn = nil
	s.mu.Unlock()
	if conn != nil {
		return conn.Close()
	}
	return nil
}

// MaxCode bounds the code of one execution; larger code belongs in a file in the session
// (CopyTo), run from there.
const MaxCode = 8 << 20

// DefaultAnswerGrace is how long past its timeout an execution's result may take before Exec
// asks the agent whether it is alive; one that does not answer within ProbeTimeout ends the
// wait with ErrNoAnswer, so a paused container or a stuck engine is told within the timeout
// plus 10 s. One that answers is interrupting the code, killing it after its grace or bringing
// the state back, or the execution is queued: Exec keeps waiting and asks again every
// AnswerGrace.
const DefaultAnswerGrace = 5 * time.Second

// ProbeTimeout bounds the wait for the agent's answer to that question.
const ProbeTimeout = 5 * time.Second

// ExecOptions tune one execution.
type ExecOptions struct {
	// Timeout interrupts the code after this long (status timeout); 0 means none. The agent
	// enforces it in the session; Exec enforces it too: AnswerGrace after it with no result
	// (0: DefaultAnswerGrace), and every AnswerGrace from then on, it asks the agent for its
	// status, and stops waiting with ErrNoAnswer when that gets no answer within ProbeTimeout.
	Timeout     time.Duration
	AnswerGrace time.Duration
	// MaxOutput caps the bytes of each stream delivered; 0 is the session's default.
	MaxOutput int64
	// IgnoreDiskCap runs the code even when the workspace is past the session's disk cap
	// (Spec.Disk), which otherwise refuses it with ErrDiskCap: for code that frees space.
	IgnoreDiskCap bool
	// Env (KEY=VALUE) and Workdir hold for this execution only: set before the code runs and
	// put back after it, as `docker exec -e -w` do. Workdir is relative to /workspace or
	// absolute, and must exist.
	Env     []string
	Workdir string
	// Stdout and Stderr, when set, receive output as it is produced (written from one
	// goroutine; a write error is ignored, the execution goes on). For output as a stream of
	// events instead, use Session.Events.
	Stdout, Stderr io.Writer
	// StreamOnly keeps no copy of what was written to Stdout or Stderr: the Result's Stdout and
	// Stderr are then empty for a stream that had a writer. For large streamed output, which is
	// otherwise held in memory twice.
	StreamOnly bool
	// OnResult receives the repr of a final expression; OnError a raised exception (or a crash),
	// both once, when the execution ends.
	OnResult func(repr string)
	OnError  func(e history.Error)
	// OnNotice receives things the runtime says about the session (a restart, a restore).
	OnNotice func(string)
	// OnDisplay receives each display as it is produced, in its place among the output
	// (called from the goroutine that writes Stdout and Stderr).
	OnDisplay func(history.Display)
	// Detach, when closed, stops waiting for the result; the execution goes on in the session.
	Detach <-chan struct{}
}

// collect returns the handler of one output stream: it keeps a copy in *buf, unless w takes the
// stream and streamOnly says to keep none, and writes to w.
func collect(buf *[]byte, w io.Writer, streamOnly bool) func([]byte) {
	switch {
	case w == nil:
		return func(p []byte) { *buf = append(*buf, p...) }
	case streamOnly:
		return func(p []byte) { _, _ = w.Write(p) }
	default:
		return func(p []byte) {
			*buf = append(*buf, p...)
			_, _ = w.Write(p)
		}
	}
}

// Exec runs code in the session and waits for its end. Cancelling ctx interrupts the code
// (status interrupted), and Exec still returns the Result. When the container dies during the
// execution, the Result has status crashed; the next call brings the session back.
func (s *Session) Exec(ctx context.Context, code string, o ExecOptions) (*Result, error) {
	if len(code) > MaxCode {
		return nil, advice.Errorf("%w code of %d bytes: the limit is %d MiB; copy it into the session as a file (%s) and run that", ErrInvalid, len(code), MaxCode>>20, advice.Words{Lib: "Session.WriteFile", CLI: "`runtimectl session cp`"})
	}
	for _, kv := range o.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return nil, fmt.Errorf("%w environment entry %q: use KEY=VALUE", ErrInvalid, kv)
		}
	}
	if o.Timeout < 0 || (o.Timeout > 0 && o.Timeout < time.Millisecond) {
		return nil, fmt.Errorf("%w timeout %s: give at least 1ms (or none)", ErrInvalid, o.Timeout)
	}
	conn, _, err := s.client(ctx)
	if err != nil {
		return nil, err
	}
	detach, noAnswer, stopDeadline := answerDeadline(o, func(ctx context.Context) error {
		var st execproto.Status
		return conn.Call(ctx, execproto.Request{Op: execproto.OpStatus}, &st)
	})
	defer stopDeadline()
	restored := s.takeUnreported()
	if restored != nil && o.OnNotice != nil {
		o.OnNotice(describeRestore(s.name, restored))
	}
	var stdout, stderr []byte
	h := execproto.Handlers{
		Stdout: collect(&stdout, o.Stdout, o.StreamOnly),
		Stderr: collect(&stderr, o.Stderr, o.StreamOnly),
		Notice: o.OnNotice,
		Display: func(d execproto.Display) {
			if o.OnDisplay != nil {
				o.OnDisplay(history.Display(d))
			}
		},
	}
	if s.lang == "python" || s.lang == "" {
		// `%pip install` and `!pip install` lines: done by the installer first (the session has
		// no network), their output streamed as the code's; the lines become comments.
		rewritten, installs, err := pipLines(code)
		if err != nil {
			return nil, err
		}
		if len(installs) > 0 {
			// every line's index is checked before any line installs
			st, err := s.c.RecordedSettings(ctx, s.name)
			if err != nil {
				return nil, err
			}
			for _, inst := range installs {
				if err := s.c.cellIndex(s.name, st, inst); err != nil {
					return nil, err
				}
			}
		}
		for _, inst := range installs {
			inst.Output = writerFunc(h.Stdout)
			inst.Timeout = o.Timeout // the cell's timeout bounds its installs too
			if err := s.c.Install(ctx, s.name, inst); err != nil {
				return nil, err
			}
		}
		code = rewritten
	}
	req := execproto.Request{Code: code, TimeoutMs: o.Timeout.Milliseconds(), MaxOutput: o.MaxOutput, IgnoreDiskCap: o.IgnoreDiskCap,
		Env: o.Env, Workdir: o.Workdir}
	start := time.Now()
	wire, err := conn.Exec(ctx, req, h, detach)
	if err != nil {
		if noAnswer.Load() {
			return nil, advice.Errorf("%w within %s of the execution's timeout of %s, nor to a status request (is its container paused, or the engine stuck?); the code may still be running there: %s", ErrNoAnswer, time.Since(start).Round(time.Second)-o.Timeout, o.Timeout, adviseHistory(s.name))
		}
		if errors.Is(err, ErrDiskCap) {
			return nil, advice.Errorf("%w (%s)", err, advice.Words{
				Lib: "ExecOptions.IgnoreDiskCap runs code that frees space; Session.ReadFile copies out what you need",
				CLI: "`runtimectl session exec " + s.name + " --ignore-disk-cap CODE` runs code that frees space; `runtimectl session cp` copies out what you need",
			})
		}
		if !errors.Is(err, execproto.ErrClosed) {
			return nil, err
		}
		// The stream ended under us: the container (or its agent) died.
		wire = &execproto.Result{
			Status:     execproto.StatusCrashed,
			Message:    "the session's container stopped during the execution; the next execution brings it back with the state before this one",
			Error:      &execproto.Error{Name: "ContainerDied", Value: "the session's container stopped during the execution"},
			DurationMs: float64(time.Since(start).Microseconds()) / 1000,
		}
	}
	res := newResult(s.name, wire, stdout, stderr, restored)
	if res.Result != nil && o.OnResult != nil {
		o.OnResult(*res.Result)
	}
	if res.Error != nil && o.OnError != nil {
		o.OnError(*res.Error)
	}
	return res, nil
}

// answerDeadline returns the channel that ends Exec's wait: o.Detach, and with a timeout also
// the client's own deadline, which sets noAnswer. From the timeout plus AnswerGrace on, every
// AnswerGrace, the agent is asked for its status (probe, at most ProbeTimeout): one that
// answers is alive, and the execution may only be queued behind another, or the agent is
// killing the code or bringing a large state back, so the wait goes on; one that does not
// ends it. stop releases it.
func answerDeadline(o ExecOptions, probe func(context.Context) error) (detach <-chan struct{}, noAnswer *atomic.Bool, stop func()) {
	noAnswer = new(atomic.Bool)
	if o.Timeout <= 0 {
		return o.Detach, noAnswer, func() {}
	}
	grace := o.AnswerGrace
	if grace <= 0 {
		grace = DefaultAnswerGrace
	}
	d, done := make(chan struct{}), make(chan struct{})
	go func() {
		t := time.NewTimer(o.Timeout + grace)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), min(grace, ProbeTimeout))
				err := probe(ctx)
				cancel()
				if err == nil {
					t.Reset(grace)
					continue
				}
				noAnswer.Store(true)
				close(d)
			case <-o.Detach:
				close(d)
			case <-done:
			}
			return
		}
	}()
	return d, noAnswer, func() { close(done) }
}

func describeRestore(name string, r *RestoreInfo) string {
	msg := fmt.Sprintf("session %s was not running: started it again", name)
	if r == nil {
		return msg
	}
	if r.Snapshot == "" {
		msg += " with an empty state (no snapshot yet)"
	} else {
		msg += fmt.Sprintf(" and restored snapshot %s (state after execution %d): %s", r.Snapshot, r.Seq, nameList(r.Restored))
		if len(r.Failed) > 0 {
			var failed []string
			for _, f := range r.Failed {
				failed = append(failed, fmt.Sprintf("%s (%s: %s)", f.Name, f.Type, f.Reason))
			}
			msg += "; not restored: " + strings.Join(failed, ", ")
		}
		if len(r.Copies) > 0 {
			var copies []string
			for _, c := range r.Copies {
				copies = append(copies, fmt.Sprintf("%s (%s)", c.Name, c.Reason))
			}
			msg += "; back as copies, no longer sharing memory: " + strings.Join(copies, ", ")
		}
	}
	for _, m := range r.Messages {
		msg += "; " + m
	}
	return msg
}

func nameList(names []string) string {
	if len(names) == 0 {
		return "no names"
	}
	if len(names) > 20 {
		return strings.Join(names[:20], ", ") + fmt.Sprintf(" and %d more", len(names)-20)
	}
	return strings.Join(names, ", ")
}

// DescribeRestore says in one line what state a restarted session came back with.
func DescribeRestore(name string, r *RestoreInfo) string { return describeRestore(name, r) }

// Snapshot takes a snapshot now and waits until it is saved.
func (s *Session) Snapshot(ctx context.Context) (execproto.SnapshotReply, error) {
	var rep execproto.SnapshotReply
	conn, _, err := s.client(ctx)
	if err != nil {
		return rep, err
	}
	err = conn.Call(ctx, execproto.Request{Op: execproto.OpSnapshot}, &rep)
	return rep, err
}

// RestoreSnapshot puts the interpreter back in the state of snapshot id: names created after it
// are gone.
func (s *Session) RestoreSnapshot(ctx context.Context, id string) (RestoreInfo, error) {
	var rep RestoreInfo
	conn, _, err := s.client(ctx)
	if err != nil {
		return rep, err
	}
	err = conn.Call(ctx, execproto.Request{Op: execproto.OpRestore, Snapshot: id}, &rep)
	return rep, err
}

// Interrupt interrupts whatever execution runs in the session now.
func (s *Session) Interrupt(ctx context.Context) (bool, error) {
	var rep struct {
		Interrupted bool `json:"interrupted"`
	}
	conn, _, err := s.client(ctx)
	if err != nil {
		return false, err
	}
	err = conn.Call(ctx, execproto.Request{Op: execproto.OpInterrupt}, &rep)
	return rep.Interrupted, err
}

// Status returns the agent's status.
func (s *Session) Status(ctx context.Context) (execproto.Status, error) {
	var st execproto.Status
	conn, _, err := s.client(ctx)
	if err != nil {
		return st, err
	}
	err = conn.Call(ctx, execproto.Request{Op: execproto.OpStatus}, &st)
	return st, err
}

// Vars lists the session's variables.
func (s *Session) Vars(ctx context.Context) (execproto.VarsReply, error) {
	var rep execproto.VarsReply
	conn, _, err := s.client(ctx)
	if err != nil {
		return rep, err
	}
	err = conn.Call(ctx, execproto.Request{Op: execproto.OpVars}, &rep)
	return rep, err
}

// Files lists the workspace's files (not the runtime's state), newest first and at most 200 of
// them, with the count and the size of all.
func (s *Session) Files(ctx context.Context) (execproto.FilesReply, error) {
	var rep execproto.FilesReply
	conn, _, err := s.client(ctx)
	if err != nil {
		return rep, err
	}
	err = conn.Call(ctx, execproto.Request{Op: execproto.OpFiles}, &rep)
	return rep, err
}

// CopyTo copies a host file or folder into the session (see Client.CopyTo).
func (s *Session) CopyTo(ctx context.Context, src, dst string) error {
	return s.c.CopyTo(ctx, s.name, src, dst)
}

// CopyFrom copies a session file or folder to the host (see Client.CopyFrom).
func (s *Session) CopyFrom(ctx context.Context, src, dst string) error {
	return s.c.CopyFrom(ctx, s.name, src, dst)
}

// Context summarises the session for a model's next prompt (see Client.Context).
func (s *Session) Context(ctx context.Context, o ContextOptions) (*Summary, error) {
	return s.c.Context(ctx, s.name, o)
}

// Fork makes a new session from this one's workspace and snapshot at (default the latest).
func (s *Session) Fork(ctx context.Context, name, at string) (*Session, error) {
	return s.c.Fork(ctx, s.name, name, at)
}
