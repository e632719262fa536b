package agent

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/snapshot"
)

// streamOut is one output stream of one execution: what reaches the client (capped) and what
// the history keeps (head and tail).
type streamOut struct {
	lim       limiter
	keep      headTail
	delivered atomic.Int64 // bytes sent to the client, for the displays' positions
}

// execution is one exec request from its start record to its Result: its streams and caps,
// timers, how it ended, and the snapshot that follows. The run loop feeds it the events that
// are its own (kernel events, the kernel's exit, the watchdog tick, its timeout, grace and
// interrupt) until it has ended.
type execution struct {
	a       *Agent
	j       *job
	k       *kernel // the kernel it runs on (replaced by a recovery)
	seq     int64
	code    string
	reqID   string
	started time.Time

	out, errs      *streamOut
	capOut, capErr *capture
	gate           *displayGate
	disp           *displays
	res            *execproto.Result
	recordErrs     []string
	oomBefore      int64

	reason    contract.Status // timeout or interrupted once the code was interrupted
	violation string          // how the driver broke the kernel protocol: treated as a crash
	nonceSeen time.Time       // when both streams had ended with no done event yet
	pidsFull  bool            // the container's pids limit stayed reached: everything was killed
	diskOver  string          // the workspace passed its cap: everything was killed, and why
	snapID    string          // the snapshot to ask for once the result is sent
	ended     bool            // the code's end was seen: no more events for it

	timer      *time.Timer
	timeoutC   <-chan time.Time
	graceC     <-chan time.Time
	interruptC <-chan struct{}
}

func (x *execution) notify(msg string) {
	_ = x.j.conn.SendJSON(execproto.TypeNotice, x.j.id, execproto.Notice{Message: msg})
}

// startExec begins an execution: the history's start record, the output capture, the request
// to the kernel and the timers. What follows comes from the run loop.
func (a *Agent) startExec(ctx context.Context, j *job) *execution {
	x := &execution{a: a, j: j, k: a.k, seq: a.log.Reserve(), code: j.req.Code, started: time.Now(), oomBefore: a.oomSeen}
	for _, w := range a.takeWarnings() {
		x.notify(w) // e.g. the previous execution's snapshot failed after its result was sent
	}
	if err := a.record(history.Record{Kind: history.KindStart, Seq: x.seq, Code: x.code, Status: contract.StatusRunning, Started: x.started.UTC()}); err != nil {
		x.recordErrs = append(x.recordErrs, err.Error())
	}
	a.mu.Lock()
	a.running, a.runSeq = j, x.seq
	a.mu.Unlock()

	maxOut := a.cfg.MaxOutput
	if j.req.MaxOutput > 0 {
		maxOut = j.req.MaxOutput
	}
	marker := capMarker(maxOut)
	mkStream := func(t execproto.Type) *streamOut {
		s := &streamOut{keep: headTail{max: a.cfg.HistoryOutput}}
		s.lim = limiter{limit: maxOut, marker: marker, send: func(p []byte) {
			s.keep.write(p)
			s.delivered.Add(int64(len(p)))
			_ = j.conn.Send(t, j.id, p) // a client that went away does not stop the execution
		}}
		return s
	}
	x.out, x.errs = mkStream(execproto.TypeStdout), mkStream(execproto.TypeStderr)
	nonce := newNonce()
	x.capOut = newCapture(nonce, x.out.lim.write)
	x.capErr = newCapture(nonce, x.errs.lim.write)
	sync := newNonce()
	x.disp = &displays{toClient: j.req.Displays, out: &x.out.delivered, err: &x.errs.delivered, send: func(d execproto.Display) {
		_ = j.conn.SendJSON(execproto.TypeDisplay, j.id, d)
	}}
	x.gate = newDisplayGate(x.disp.emit)
	x.capOut.sync, x.capOut.onSync = []byte(sync), func() { x.gate.arrive(0) }
	x.capErr.sync, x.capErr.onSync = []byte(sync), func() { x.gate.arrive(1) }
	x.k.stdout.set(x.capOut)
	x.k.stderr.set(x.capErr)
	x.res = &execproto.Result{Session: a.sessionName(), Seq: x.seq, Outputs: []execproto.Output{}}

	if j.req.TimeoutMs > 0 {
		x.timer = time.NewTimer(time.Duration(j.req.TimeoutMs) * time.Millisecond)
		x.timeoutC = x.timer.C
	}
	x.interruptC = j.interrupt
	if ctx.Err() != nil {
		x.beginInterrupt(execproto.StatusInterrupted)
	}
	x.reqID = fmt.Sprintf("x%d", x.seq)
	req := execRequest(x.reqID, x.seq, x.code, nonce, sync, j.req.Env, j.req.Workdir)
	// The session's name goes with every execution: a warm pool's member that a start claimed
	// has its interpreter started under the member's, and takes the session's from the first.
	req.Session = a.sessionName()
	if err := x.k.send(req); err != nil {
		x.crash()
	}
	return x
}

// kernelEvent handles an event of the kernel while the code runs (ok false: the event pipe
// closed).
func (x *execution) kernelEvent(ev kernelEvent, ok bool) {
	switch {
	case !ok:
		// The driver closed its event pipe: dead (its exit follows at once), or alive and deaf
		// (tick says so after exitGrace). Either way it cannot answer any more.
	case ev.Op == opInvalid:
		x.violation = ev.Message
		x.crash()
	case ev.Op == opDisplay && ev.ID == x.reqID:
		x.gate.display(ev.N, displayOf(ev))
	case ev.Op == opDone && ev.ID == x.reqID:
		x.finishDone(ev)
	case ev.Op == opError && (ev.ID == x.reqID || ev.ID == ""):
		x.finishDriverError(ev)
	}
}

// tick is the execution's watchdog: the pids limit, a driver that closed its event pipe and
// lives on, a done event that does not come after the output ended.
func (x *execution) tick() {
	switch {
	case x.a.pids.exhausted():
		x.pidsFull = true
		x.crash()
	case x.diskOver == "" && !x.j.req.IgnoreDiskCap && x.a.disk.stop.Load() != nil:
		x.diskOver = x.a.takeDiskStop()
		x.crash()
	case x.k.eventsClosed() && time.Since(x.k.closedAt) > exitGrace && x.k.alive():
		x.violation = "it closed its event pipe"
		x.crash()
	case x.capOut.ended() && x.capErr.ended():
		// The code ended (the nonces came) but the driver has not said done.
		if x.nonceSeen.IsZero() {
			x.nonceSeen = time.Now()
		} else if time.Since(x.nonceSeen) > doneAfterNonce {
			x.violation = fmt.Sprintf("it ended the output but sent no done event within %s", doneAfterNonce)
			x.crash()
		}
	}
}

// beginInterrupt interrupts the code (its timeout, the client's interrupt, the agent's end);
// code that has not stopped within the grace is killed (the loop's grace timer).
func (x *execution) beginInterrupt(why contract.Status) {
	if x.reason != "" || x.ended {
		return
	}
	x.reason = why
	x.k.signal(syscall.SIGINT)
	x.graceC = time.After(x.a.cfg.Grace)
}

// stateAfter records the state after an execution that ran: the snapshot that follows it, per
// the policy.
func (x *execution) stateAfter(changed bool) {
	a, res := x.a, x.res
	a.sched.ran(x.seq, changed)
	switch {
	case a.cfg.SnapshotPolicy != contract.SnapshotEvery:
		res.State = &execproto.State{Status: contract.StateOff}
	case !a.sched.isDirty():
		res.State = &execproto.State{Status: contract.StateUnchanged, Snapshot: a.sched.savedID}
	case a.sched.inflight == nil && a.k.alive():
		// Asked of the kernel right after the result is sent (complete), before the next
		// request: the result does not wait for the fork, the next execution does not
		// overtake the snapshot.
		x.snapID = snapshot.NewID(x.seq)
		res.State = &execproto.State{Status: contract.StatePending, Snapshot: x.snapID}
	default:
		res.State = &execproto.State{Status: contract.StatePending, Message: "saved by the next snapshot, after the one being written"}
	}
}

// finishDriverError ends an execution whose driver answered with an error event instead of
// done: the driver is alive and answering, but its handler failed; the code may or may not
// have run, so the state may have changed.
func (x *execution) finishDriverError(ev kernelEvent) {
	x.ended = true
	waitFound(x.capOut, x.capErr, 500*time.Millisecond)
	msg := ev.errorText()
	x.res.Status = execproto.StatusError
	x.res.Error = &execproto.Error{Name: "DriverError", Value: msg}
	x.res.Message = "the interpreter's driver failed on this execution: " + msg + "; the session goes on"
	x.stateAfter(true)
	x.complete()
}

// finishDone ends an execution with the driver's done event.
func (x *execution) finishDone(done kernelEvent) {
	x.ended = true
	res := x.res
	// All output written before the end is in the pipes ahead of the nonces.
	waitFound(x.capOut, x.capErr, 5*time.Second)
	res.Status = done.Status
	res.Result = done.Result
	res.Error = done.execError()
	if done.Outputs != nil {
		res.Outputs = done.Outputs
		attachOutputData(x.a.cfg.Workdir, res.Outputs)
	}
	if done.Status == execproto.StatusInterrupted && x.reason == execproto.StatusTimeout {
		res.Status = execproto.StatusTimeout
		res.Message = fmt.Sprintf("the code ran past its timeout of %s and was interrupted; the session's state is kept", time.Duration(x.j.req.TimeoutMs)*time.Millisecond)
	}
	changed := done.Changed == nil || *done.Changed
	if done.Fingerprint {
		changed = x.k.fp.changed()
	}
	if !changed && done.Bookkeeping {
		x.a.sched.touched(x.seq)
	}
	x.stateAfter(changed)
	x.complete()
}

// crash ends an execution whose interpreter died, broke the protocol, filled the pids limit,
// or did not stop within the grace of an interrupt: the kernel is killed and replaced from the
// latest good snapshot, and the result says what happened and what came back.
func (x *execution) crash() {
	if x.ended {
		return
	}
	x.ended = true
	a, k, res := x.a, x.k, x.res
	x.gate.close()                    // no display follows: readers held at a token go on
	time.Sleep(50 * time.Millisecond) // let the readers take what the pipes still hold
	x.capOut.flushHeld()
	x.capErr.flushHeld()
	var why string
	switch {
	case x.pidsFull:
		res.Status = execproto.StatusCrashed
		k.kill()
		why = a.pids.reason()
		a.pids.reset()
	case x.diskOver != "":
		res.Status = execproto.StatusCrashed
		k.kill()
		why = x.diskOver
	case x.reason == execproto.StatusTimeout:
		res.Status = execproto.StatusTimeout
		why = fmt.Sprintf("the code ran past its timeout of %s and did not stop within %s of the interrupt; the interpreter was restarted", time.Duration(x.j.req.TimeoutMs)*time.Millisecond, a.cfg.Grace)
	case x.reason == execproto.StatusInterrupted:
		res.Status = execproto.StatusInterrupted
		why = fmt.Sprintf("the code did not stop within %s of the interrupt; the interpreter was restarted", a.cfg.Grace)
	case x.violation != "" && k.alive():
		res.Status = execproto.StatusCrashed
		k.kill()
		why = "the interpreter's driver stopped following the kernel protocol (" + x.violation + "); it was killed"
	default:
		res.Status = execproto.StatusCrashed
		if k.alive() {
			k.kill()
		}
		<-k.exited
		why = "the interpreter died during the execution (" + k.exitText() + ")"
		if a.oomSeen = oomKills(); k.killedBy(syscall.SIGKILL) && a.oomSeen > x.oomBefore {
			why = "the interpreter was killed: out of memory (" + k.exitText() + "); raise the session's --memory or use less"
		}
	}
	a.recoverKernel(why, func(info execproto.RestoreInfo) {
		restoredTo := info.Seq
		res.Message = why + "; state brought back to " + describeState(info)
		res.State = &execproto.State{Status: contract.StateRestored, Snapshot: info.Snapshot, RestoredTo: &restoredTo, Message: res.Message}
		res.Restored = &info
		if res.Status == execproto.StatusCrashed {
			res.Error = &execproto.Error{Name: "KernelDied", Value: why}
		}
		x.complete()
	})
}

// complete records the end of the execution, sends its Result, asks for the snapshot that
// follows, and ends the request.
func (x *execution) complete() {
	a, res := x.a, x.res
	if x.timer != nil {
		x.timer.Stop()
	}
	x.k.stdout.set(nil)
	x.k.stderr.set(nil)
	x.gate.close()
	res.DurationMs = float64(time.Since(x.started).Microseconds()) / 1000
	res.StdoutTruncated = x.out.lim.dropped
	res.StderrTruncated = x.errs.lim.dropped
	stdout, stdoutCut := x.out.keep.text()
	stderr, stderrCut := x.errs.keep.text()
	if err := a.record(history.Record{
		Kind: history.KindEnd, Seq: x.seq, Code: x.code, Status: res.Status,
		Stdout: stdout, Stderr: stderr,
		StdoutTruncated: stdoutCut + x.out.lim.dropped, StderrTruncated: stderrCut + x.errs.lim.dropped,
		Result: res.Result, Error: (*history.Error)(res.Error), Outputs: historyOutputs(res.Outputs),
		Displays: historyDisplays(x.gate, x.disp), Started: x.started.UTC(), DurationMs: res.DurationMs, State: (*history.State)(res.State),
	}); err != nil {
		x.recordErrs = append(x.recordErrs, err.Error())
	}
	for _, e := range x.recordErrs {
		// The result is still returned; what could not be recorded is said, not hidden.
		x.notify(e)
		if res.Message != "" {
			res.Message += "; "
		}
		res.Message += e
	}
	// Nothing runs once the caller has the result: an interrupt or a status request that follows
	// it at once says so, even while the snapshot below is being forked.
	a.mu.Lock()
	a.running, a.runSeq, a.lastExec = nil, 0, time.Now()
	a.mu.Unlock()
	_ = x.j.conn.SendJSON(execproto.TypeResult, x.j.id, res)
	if x.snapID != "" && a.sched.inflight == nil {
		a.startSnapshotID(x.seq, x.snapID)
	}
	a.ensureReserve()
	a.kickDisk()
	a.end(x.j)
}

// historyDisplays returns the displays of an execution as the history keeps them (capped).
func historyDisplays(g *displayGate, ds *displays) []history.Display {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(ds.kept) == 0 {
		return nil
	}
	out := make([]history.Display, len(ds.kept))
	for i, d := range ds.kept {
		out[i] = history.Display(d)
	}
	return history.CapDisplays(out)
}

// historyOutputs returns the rich outputs of a result as the history records them: the path,
// not the data (the file is on the volume).
func historyOutputs(o []execproto.Output) []history.Output {
	out := make([]history.Output, 0, len(o))
	for _, x := range o {
		out = append(out, history.Output{Mime: x.Mime, Path: x.Path})
	}
	return out
}

// attachOutputData reads each output's file into the result, as E2B returns figures with the
// result: files directly in the workspace's outputs folder, opened relative to it with no link
// followed (neither the folder nor the file), each at most OutputDataMax bytes and all at most
// OutputDataTotal. (The agent is root; the code could replace the folder with a link.)
func attachOutputData(workdir string, outs []execproto.Output) {
	dir := filepath.Join(workdir, "outputs")
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(dfd)
	total := 0
	for i := range outs {
		p := filepath.Clean(outs[i].Path)
		if filepath.Dir(p) != dir {
			continue
		}
		fd, err := unix.Openat(dfd, filepath.Base(p), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		f := os.NewFile(uintptr(fd), p)
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() || st.Size() > execproto.OutputDataMax || total+int(st.Size()) > execproto.OutputDataTotal {
			f.Close()
			continue
		}
		b, err := io.ReadAll(io.LimitReader(f, execproto.OutputDataMax+1))
		f.Close()
		if err != nil || len(b) > execproto.OutputDataMax {
			continue
		}
		total += len(b)
		outs[i].Data = b
	}
}

// doneAfterNonce is how long a driver may take to send its done event once the code's output
// has ended with the nonces; past it the driver is taken for broken and restarted.
const doneAfterNonce = 5 * time.Second

// base64Above is the size from which code also travels to the driver as "code_b64": the bash
// driver decodes JSON escapes in pure bash, which slows down with many escapes in large code,
// while base64 costs it a fork and exec of base64(1) (about 4 ms in a session container), too
// much for every small execution.
const base64Above = 8 << 10

// needsBase64 reports whether code goes to the driver as base64 as well: large code, and code
// whose bytes JSON cannot carry exactly (invalid UTF-8 becomes U+FFFD in a JSON string; NUL).
func needsBase64(code string) bool {
	return len(code) >= base64Above || !utf8.ValidString(code) || strings.IndexByte(code, 0) >= 0
}

// waitFound waits until both captures have seen the nonce, at most limit in all; a capture that
// has not by then delivers what it held back.
func waitFound(a, b *capture, limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	expired := false
	for _, c := range []*capture{a, b} {
		if !expired {
			select {
			case <-c.found:
				continue
			case <-t.C:
				expired = true
			}
		}
		c.flushHeld()
	}
}

var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkExecEnv checks an execution's own environment and working directory, making the
// directory absolute (relative to the workspace); it returns why they are refused, or "".
func checkExecEnv(workdir string, req *execproto.Request) string {
	for _, kv := range req.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !envKey.MatchString(k) || strings.IndexByte(kv, 0) >= 0 {
			return fmt.Sprintf("environment entry %q: give KEY=VALUE with a name of letters, digits and _ (not starting with a digit), no NUL", kv)
		}
	}
	if req.Workdir == "" {
		return ""
	}
	dir := req.Workdir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(workdir, dir)
	}
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return fmt.Sprintf("working directory %s: no such folder in the session; make it first (mkdir -p) or give another", dir)
	}
	req.Workdir = filepath.Clean(dir)
	return ""
}
