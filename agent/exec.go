package agent

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/snapshot"
)

// streamOut is one output stream of one execution: what reaches the client (capped) and what
// the history keeps (head and tail).
type streamOut struct {
	lim  limiter
	keep headTail
}

// exec runs one execution from start to end: the history's start record, the code, its output
// and end, interrupts and timeouts, a crash and the kernel's recovery, the end record, the
// Result frame, and the snapshot that follows.
func (a *Agent) exec(ctx context.Context, j *job) {
	started := time.Now()
	seq := a.log.Reserve()
	code := j.req.Code
	notify := func(msg string) {
		_ = j.conn.SendJSON(execproto.TypeNotice, j.id, execproto.Notice{Message: msg})
	}
	for _, w := range a.takeWarnings() {
		notify(w) // e.g. the previous execution's snapshot failed after its result was sent
	}
	var recordErrs []string
	if err := a.record(history.Record{Kind: history.KindStart, Seq: seq, Code: code, Status: contract.StatusRunning, Started: started.UTC()}); err != nil {
		recordErrs = append(recordErrs, err.Error())
	}
	a.mu.Lock()
	a.running, a.runSeq = j, seq
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.running, a.runSeq, a.lastExec = nil, 0, time.Now()
		a.mu.Unlock()
	}()

	maxOut := a.cfg.MaxOutput
	if j.req.MaxOutput > 0 {
		maxOut = j.req.MaxOutput
	}
	marker := capMarker(maxOut)
	mkStream := func(t execproto.Type) *streamOut {
		s := &streamOut{keep: headTail{max: a.cfg.HistoryOutput}}
		s.lim = limiter{limit: maxOut, marker: marker, send: func(p []byte) {
			s.keep.write(p)
			_ = j.conn.Send(t, j.id, p) // a client that went away does not stop the execution
		}}
		return s
	}
	out, errs := mkStream(execproto.TypeStdout), mkStream(execproto.TypeStderr)
	nonce := newNonce()
	capOut := newCapture(nonce, out.lim.write)
	capErr := newCapture(nonce, errs.lim.write)
	k := a.k
	k.stdout.set(capOut)
	k.stderr.set(capErr)
	defer k.stdout.set(nil)
	defer k.stderr.set(nil)

	res := &execproto.Result{Session: a.cfg.Session, Seq: seq, Outputs: []execproto.Output{}}
	var (
		done         *kernelEvent
		driverErr    *kernelEvent    // the driver answered with an error event instead of done
		violation    string          // how the driver broke the kernel protocol: treated as a crash
		nonceSeen    time.Time       // when both streams had ended with no done event yet
		reason       contract.Status // timeout or interrupted once we interrupted the code
		crashed      bool
		pidsFull     bool // the container's pids limit stayed reached: everything was killed
		restoredInfo *execproto.RestoreInfo
	)
	oomBefore := a.oomSeen
	var snapID string
	reqID := fmt.Sprintf("x%d", seq)
	req := map[string]any{"op": "exec", "id": reqID, "seq": seq, "code": code, "nonce": nonce}
	if needsBase64(code) {
		req["code_b64"] = base64.StdEncoding.EncodeToString([]byte(code))
	}
	if err := k.send(req); err != nil {
		crashed = true
	}

	var timeoutC, graceC <-chan time.Time
	if j.req.TimeoutMs > 0 {
		t := time.NewTimer(time.Duration(j.req.TimeoutMs) * time.Millisecond)
		defer t.Stop()
		timeoutC = t.C
	}
	interruptC := (<-chan struct{})(j.interrupt)
	ctxDone := ctx.Done()
	beginInterrupt := func(why contract.Status) {
		if reason != "" {
			return
		}
		reason = why
		k.signal(syscall.SIGINT)
		graceC = time.After(a.cfg.Grace)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()

wait:
	for !crashed {
		select {
		case ev, ok := <-k.events:
			switch {
			case !ok:
				// The driver closed its event pipe: dead, or alive and deaf. Either way it
				// cannot answer any more.
				if !k.exitsSoon() {
					violation = "it closed its event pipe"
				}
				crashed = true
			case ev.Op == opInvalid:
				violation, crashed = ev.Message, true
			case ev.Op == "done" && ev.ID == reqID:
				done = &ev
				break wait
			case ev.Op == "error" && (ev.ID == reqID || ev.ID == ""):
				driverErr = &ev
				break wait
			default:
				a.kernelEvent(ev)
			}
		case <-k.exited:
			crashed = true
		case r := <-a.snapDone:
			a.finishSnapshot(r)
		case <-tick.C:
			a.checkSnapshotWriter()
			if a.pids.exhausted() {
				pidsFull, crashed = true, true
			}
			if capOut.ended() && capErr.ended() {
				// The code ended (the nonces came) but the driver has not said done.
				if nonceSeen.IsZero() {
					nonceSeen = time.Now()
				} else if time.Since(nonceSeen) > doneAfterNonce {
					violation, crashed = fmt.Sprintf("it ended the output but sent no done event within %s", doneAfterNonce), true
				}
			}
		case <-timeoutC:
			beginInterrupt(execproto.StatusTimeout)
		case <-interruptC:
			interruptC = nil
			beginInterrupt(execproto.StatusInterrupted)
		case <-ctxDone:
			ctxDone = nil
			beginInterrupt(execproto.StatusInterrupted)
		case <-graceC:
			// The code did not stop: kill the interpreter and bring the state back.
			graceC = nil
			crashed = true
		}
	}

	// The state after an execution that ran: the snapshot that follows it, per the policy.
	stateAfter := func(changed bool) {
		a.sched.ran(seq, changed)
		switch {
		case a.cfg.SnapshotPolicy != contract.SnapshotEvery:
			res.State = &execproto.State{Status: contract.StateOff}
		case !a.sched.isDirty():
			res.State = &execproto.State{Status: contract.StateUnchanged, Snapshot: a.sched.savedID}
		default:
			if a.sched.inflight == nil && a.k.alive() {
				// Asked of the kernel right after the result is sent (below), before the next
				// request: the result does not wait for the fork, the next execution does not
				// overtake the snapshot.
				snapID = snapshot.NewID(seq)
				res.State = &execproto.State{Status: contract.StatePending, Snapshot: snapID}
			}
			if res.State == nil {
				res.State = &execproto.State{Status: contract.StatePending, Message: "saved by the next snapshot, after the one being written"}
			}
		}
	}

	switch {
	case driverErr != nil:
		// The driver is alive and answering, but its handler failed: the code may or may not
		// have run, so the state may have changed.
		waitFound(capOut, capErr, 500*time.Millisecond)
		msg := driverErr.errorText()
		res.Status = execproto.StatusError
		res.Error = &execproto.Error{Name: "DriverError", Value: msg}
		res.Message = "the interpreter's driver failed on this execution: " + msg + "; the session goes on"
		stateAfter(true)
	case done != nil:
		// All output written before the end is in the pipes ahead of the nonces.
		waitFound(capOut, capErr, 5*time.Second)
		res.Status = done.Status
		res.Result = done.Result
		res.Error = done.execError()
		if done.Outputs != nil {
			res.Outputs = done.Outputs
		}
		if done.Status == execproto.StatusInterrupted && reason == execproto.StatusTimeout {
			res.Status = execproto.StatusTimeout
			res.Message = fmt.Sprintf("the code ran past its timeout of %s and was interrupted; the session's state is kept", time.Duration(j.req.TimeoutMs)*time.Millisecond)
		}
		stateAfter(done.Changed == nil || *done.Changed)
	default:
		// Crashed, killed after the grace, or the container is going away.
		time.Sleep(50 * time.Millisecond) // let the readers take what the pipes still hold
		capOut.flushHeld()
		capErr.flushHeld()
		var why string
		switch {
		case pidsFull:
			res.Status = execproto.StatusCrashed
			k.kill()
			why = a.pids.reason()
			a.pids.reset()
		case reason == execproto.StatusTimeout:
			res.Status = execproto.StatusTimeout
			why = fmt.Sprintf("the code ran past its timeout of %s and did not stop within %s of the interrupt; the interpreter was restarted", time.Duration(j.req.TimeoutMs)*time.Millisecond, a.cfg.Grace)
		case reason == execproto.StatusInterrupted:
			res.Status = execproto.StatusInterrupted
			why = fmt.Sprintf("the code did not stop within %s of the interrupt; the interpreter was restarted", a.cfg.Grace)
		case violation != "" && k.alive():
			res.Status = execproto.StatusCrashed
			k.kill()
			why = "the interpreter's driver stopped following the kernel protocol (" + violation + "); it was killed"
		default:
			res.Status = execproto.StatusCrashed
			if k.alive() {
				k.kill()
			}
			<-k.exited
			why = "the interpreter died during the execution (" + k.exitText() + ")"
			if a.oomSeen = oomKills(); k.killedBy(syscall.SIGKILL) && a.oomSeen > oomBefore {
				why = "the interpreter was killed: out of memory (" + k.exitText() + "); raise the session's --memory or use less"
			}
		}
		info := a.recoverKernel(why)
		restoredInfo = &info
		restoredTo := info.Seq
		res.Message = why + "; state brought back to " + describeState(info)
		res.State = &execproto.State{Status: contract.StateRestored, Snapshot: info.Snapshot, RestoredTo: &restoredTo, Message: res.Message}
		res.Restored = restoredInfo
		if res.Status == execproto.StatusCrashed {
			res.Error = &execproto.Error{Name: "KernelDied", Value: why}
		}
	}

	res.DurationMs = float64(time.Since(started).Microseconds()) / 1000
	res.StdoutTruncated = out.lim.dropped
	res.StderrTruncated = errs.lim.dropped
	stdout, stdoutCut := out.keep.text()
	stderr, stderrCut := errs.keep.text()
	if err := a.record(history.Record{
		Kind: history.KindEnd, Seq: seq, Code: code, Status: res.Status,
		Stdout: stdout, Stderr: stderr,
		StdoutTruncated: stdoutCut + out.lim.dropped, StderrTruncated: stderrCut + errs.lim.dropped,
		Result: res.Result, Error: (*history.Error)(res.Error), Outputs: historyOutputs(res.Outputs),
		Started: started.UTC(), DurationMs: res.DurationMs, State: (*history.State)(res.State),
	}); err != nil {
		recordErrs = append(recordErrs, err.Error())
	}
	for _, e := range recordErrs {
		// The result is still returned; what could not be recorded is said, not hidden.
		notify(e)
		if res.Message != "" {
			res.Message += "; "
		}
		res.Message += e
	}
	_ = j.conn.SendJSON(execproto.TypeResult, j.id, res)
	if snapID != "" && a.sched.inflight == nil {
		a.startSnapshotID(seq, snapID)
	}
	a.ensureReserve()
}

// historyOutputs returns the rich outputs of a result as the history records them.
func historyOutputs(o []execproto.Output) []history.Output {
	out := make([]history.Output, 0, len(o))
	for _, x := range o {
		out = append(out, history.Output(x))
	}
	return out
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
