package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/snapshot"
)

// The run loop. One goroutine (Run) owns the kernel, the snapshot scheduler and the request
// being served, and one select in it receives every event: a request, a kernel event, the
// kernel's exit, a snapshot's end, the watchdog tick, the current execution's timeout, grace
// and interrupt, and the agent's end. Each is handled in one place (the on* methods below);
// nothing else waits on any of them.
//
// A request is served by an op: an execution (exec.go) or a variables listing take the
// kernel's events while they run; the others (snapshot, drain, restore) wait for a snapshot
// through afterSnapshot, a continuation the scheduler runs when the snapshot in flight ends.
// A kernel that died or broke the protocol is replaced the same way (recoverKernel): the
// snapshot its writer was writing lands first, and the loop goes on serving events meanwhile.

// tickEvery is the watchdog's period: the snapshot writer's budget, a driver that closed its
// event pipe, the pids limit, a done event that does not come.
const tickEvery = 100 * time.Millisecond

// exitGrace is how long a driver whose event pipe closed has to exit before it is taken for
// alive and deaf (a protocol violation) rather than dying.
const exitGrace = 500 * time.Millisecond

// Run owns the kernel until ctx ends; then it lets the execution running stop (interrupt,
// then grace), saves what is unsaved (within the snapshot budget), stops the kernel and
// closes the history. Requests still queued then are not run.
func (a *Agent) Run(ctx context.Context) {
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	go a.syncer(ctx) // what it has not synced when ctx ends, the log's Close does
	go a.diskWatch(ctx)
	ctxDone := ctx.Done()
	for !a.over {
		a.idle(ctx)
		if a.over {
			break
		}
		var (
			jobs                  <-chan *job
			events                <-chan kernelEvent
			exited                <-chan struct{}
			timeoutC, graceC      <-chan time.Time
			interruptC, listTimer <-chan struct{}
		)
		if a.cur == nil && !a.recovering && !a.stopping {
			jobs = a.jobs
		}
		if !a.recovering {
			if !a.k.eventsClosed() {
				events = a.k.events
			}
			if !a.k.exitSeen {
				exited = a.k.exited
			}
		}
		if x := a.exe; x != nil && !x.ended {
			timeoutC, graceC, interruptC = x.timeoutC, x.graceC, x.interruptC
		}
		if l := a.listing; l != nil {
			listTimer = l.expired
		}
		select {
		case <-ctxDone:
			ctxDone = nil
			a.onStop()
		case j := <-jobs:
			<-a.queued
			a.begin(ctx, j)
		case r := <-a.snapDone:
			a.finishSnapshot(r)
		case ev, ok := <-events:
			a.onKernelEvent(ev, ok)
		case <-exited:
			a.onKernelExited()
		case <-tick.C:
			a.onTick()
		case <-timeoutC:
			a.exe.beginInterrupt(execproto.StatusTimeout)
		case <-interruptC:
			a.exe.interruptC = nil
			a.exe.beginInterrupt(execproto.StatusInterrupted)
		case <-graceC:
			// The code did not stop: kill the interpreter and bring the state back.
			a.exe.graceC = nil
			a.exe.crash()
		case <-listTimer:
			a.listing.fail(fmt.Sprintf("the interpreter did not list its variables within %s", listTimeout))
		}
	}
	a.k.kill()
	a.log.Close()
}

// idle does what the loop does between events when no request is being served: replace a
// kernel that died or broke the protocol between executions, start the snapshot the policy
// wants, and, once the agent is stopping, the last snapshot and the end.
func (a *Agent) idle(ctx context.Context) {
	if a.cur != nil || a.recovering {
		return
	}
	k := a.k
	switch {
	case k.exitSeen:
		why := fmt.Sprintf("the interpreter ended between executions (%s)", k.exitText())
		a.recoverKernel(why, a.noteRecovery(why))
		return
	case k.eventsClosed() && time.Since(k.closedAt) > exitGrace:
		why := "the interpreter's driver stopped following the kernel protocol between executions (it closed its event pipe)"
		a.recoverKernel(why, a.noteRecovery(why))
		return
	case a.pids.exhausted():
		why := a.pids.reason()
		k.kill() // first: nothing else can start while the limit is reached
		a.pids.reset()
		a.recoverKernel(why, a.noteRecovery(why))
		return
	case a.disk.stop.Load() != nil && a.sched.inflight == nil && !a.sched.autoDue():
		// (After the snapshot that follows the last execution: its state is kept.)
		why := a.takeDiskStop()
		k.kill() // the interpreter and every process of the session user
		a.recoverKernel(why, a.noteRecovery(why))
		return
	}
	if a.stopping {
		if !a.closing {
			a.closing = true
			a.afterSnapshot(func() {
				if a.sched.drainDue() && a.k.alive() && a.startSnapshot(a.log.NextSeq()-1) != nil {
					a.afterSnapshot(func() { a.over = true })
					return
				}
				a.over = true
			})
		}
		return
	}
	if a.sched.autoDue() && k.alive() {
		a.startSnapshot(a.log.NextSeq() - 1)
	}
}

// noteRecovery returns what follows a recovery between executions: a note in the history.
func (a *Agent) noteRecovery(why string) func(execproto.RestoreInfo) {
	return func(info execproto.RestoreInfo) {
		a.note(why + "; state brought back to " + describeState(info))
	}
}

// onStop is the agent's end (the container stops): the execution running is interrupted; the
// rest happens in idle once it has ended.
func (a *Agent) onStop() {
	a.stopping = true
	if x := a.exe; x != nil && !x.ended {
		x.beginInterrupt(execproto.StatusInterrupted)
	}
}

// onKernelEvent handles one event of the kernel (ok false: its event pipe closed).
func (a *Agent) onKernelEvent(ev kernelEvent, ok bool) {
	if !ok {
		a.k.closedAt = time.Now()
	}
	if ok && ev.Op == opSnapshotStarted {
		if a.sched.inflight != nil {
			a.sched.inflight.pid = ev.PID
		}
		return
	}
	switch {
	case a.exe != nil && !a.exe.ended:
		a.exe.kernelEvent(ev, ok)
	case a.listing != nil:
		a.listing.kernelEvent(ev, ok)
	case ok && ev.Op == opInvalid:
		why := "the interpreter's driver stopped following the kernel protocol between executions (" + ev.Message + ")"
		a.k.kill()
		a.recoverKernel(why, a.noteRecovery(why))
	}
	// Other events between executions (a late answer) are dropped; a closed pipe is seen by idle.
}

// onKernelExited handles the interpreter's exit.
func (a *Agent) onKernelExited() {
	a.k.exitSeen = true
	switch {
	case a.exe != nil && !a.exe.ended:
		a.exe.crash()
	case a.listing != nil:
		a.listing.fail("the interpreter ended while listing variables")
	}
	// Between executions, idle brings it back.
}

// onTick is the watchdog: the snapshot writer's budget, the pids limit, the current
// execution's done event.
func (a *Agent) onTick() {
	a.checkSnapshotWriter()
	if x := a.exe; x != nil && !x.ended {
		x.tick()
	}
}

// begin starts serving one request.
func (a *Agent) begin(ctx context.Context, j *job) {
	a.cur = j
	switch j.req.Op {
	case execproto.OpExec:
		if why := checkExecEnv(a.cfg.Workdir, &j.req); why != "" {
			_ = j.conn.SendError(j.id, "bad_request", why)
			a.end(j)
			return
		}
		if why := a.diskRefusal(j.req); why != "" {
			_ = j.conn.SendError(j.id, contract.DiskCapCode, why)
			a.end(j)
			return
		}
		if x := a.startExec(ctx, j); a.cur == j {
			a.exe = x // (an execution whose request could not reach the kernel has ended already)
		}
	case execproto.OpSnapshot:
		a.manualSnapshot(j)
	case execproto.OpDrain:
		a.drain(j)
	case execproto.OpRestore:
		a.restoreTo(j)
	case execproto.OpVars, execproto.OpComplete, execproto.OpInspect, execproto.OpIsComplete:
		a.query(j)
	default:
		_ = j.conn.SendError(j.id, "bad_request", fmt.Sprintf("unknown operation %q", j.req.Op))
		a.end(j)
	}
}

// end finishes serving the current request j: the loop takes the next one.
func (a *Agent) end(j *job) {
	if a.cur != j {
		return
	}
	a.cur, a.exe, a.listing = nil, nil, nil
	if j.finished != nil {
		j.finished()
	}
}

// afterSnapshot runs f once no snapshot is being written: now when none is, else when the one
// in flight has ended (saved or not). f runs on the loop.
func (a *Agent) afterSnapshot(f func()) {
	s := a.sched.inflight
	if s == nil {
		f()
		return
	}
	s.waiters = append(s.waiters, func(snapResult) { f() })
}

func (a *Agent) checkSnapshotWriter() {
	s := a.sched.inflight
	if s == nil {
		return
	}
	if time.Since(s.started) > a.cfg.SnapshotBudget {
		killWriter(s.pid)
		a.k.abortSnapshotRead()
		return
	}
	if s.pid > 0 && s.pid != a.k.pid && processGone(s.pid) {
		// The writer is gone; give the reader a moment to finish what it already sent, then
		// make its blocked read fail so it drops the partial snapshot.
		if s.goneAt.IsZero() {
			s.goneAt = time.Now()
		} else if time.Since(s.goneAt) > 500*time.Millisecond {
			a.k.abortSnapshotRead()
		}
	}
}

func (a *Agent) startSnapshot(seq int64) *inflight {
	return a.startSnapshotID(seq, snapshot.NewID(seq))
}

// startSnapshotID asks the kernel for a snapshot named id of the state after execution seq.
func (a *Agent) startSnapshotID(seq int64, id string) *inflight {
	if err := a.k.send(driverRequest{Op: opSnapshot, ID: id}); err != nil {
		return nil
	}
	s := a.sched.start(id, seq)
	a.expect <- snapExpect{id: id, seq: seq}
	return s
}

// finishSnapshot records a snapshot's end in the scheduler and the history, then runs what
// waited for it.
func (a *Agent) finishSnapshot(r snapResult) {
	prev := a.sched.savedID
	s := a.sched.finish(r)
	state := history.State{Status: contract.StateSaved, Snapshot: r.id}
	if r.err != nil {
		state = history.State{Status: contract.StateFailed, Snapshot: r.id, Error: r.err.Error(),
			Message: fmt.Sprintf("the state after execution %d was not saved: %v; the previous snapshot (%s) stays the latest; the next execution or `session stop` tries again", r.seq, r.err, orNone(prev))}
		a.warn(state.Message)
	}
	if r.seq > 0 {
		if err := a.record(history.Record{Kind: history.KindState, Seq: r.seq, State: &state}); err != nil {
			a.warn(err.Error())
		}
	}
	if s != nil {
		for _, w := range s.waiters {
			w(r)
		}
	}
}

func orNone(id string) string {
	if id == "" {
		return "none"
	}
	return id
}

// recoverKernel replaces a dead, hung or broken kernel with one started from the latest good
// snapshot, then calls then with what was restored. A snapshot that a writer of its own (a
// fork of the kernel) is writing lands first; one the kernel wrote itself died with it. The
// loop goes on receiving events meanwhile (snapshot ends, the watchdog), not requests.
func (a *Agent) recoverKernel(reason string, then func(execproto.RestoreInfo)) {
	a.recovering = true
	replace := func() {
		a.k.kill()
		// The kernel's own snapshot stream, if it was writing one, ends with it.
		a.afterSnapshot(func() {
			info := a.bringUpRetrying("")
			info.Messages = append([]string{reason}, info.Messages...)
			a.oomSeen = oomKills()
			a.mu.Lock()
			a.restarts++
			a.mu.Unlock()
			a.setRestore(info)
			a.recovering = false
			then(info)
		})
	}
	if s := a.sched.inflight; s != nil && s.pid != 0 && s.pid != a.k.pid {
		a.afterSnapshot(replace)
		return
	}
	replace()
}

func (a *Agent) manualSnapshot(j *job) {
	a.afterSnapshot(func() {
		s := a.startSnapshot(a.log.NextSeq() - 1)
		if s == nil {
			_ = j.conn.SendError(j.id, "internal", "the interpreter is not running; try again")
			a.end(j)
			return
		}
		s.waiters = append(s.waiters, func(r snapResult) {
			defer a.end(j)
			if r.err != nil {
				_ = j.conn.SendError(j.id, "internal", "snapshot failed: "+r.err.Error())
				return
			}
			m := r.manifest
			_ = j.conn.SendJSON(execproto.TypeReply, j.id, execproto.SnapshotReply{
				ID: m.ID, Seq: m.Seq, SizeBytes: m.SizeBytes, Kept: m.Kept, Skipped: toSkipped(m.Skipped),
			})
		})
	})
}

func toSkipped(s []snapshot.Skipped) []execproto.Skipped {
	out := make([]execproto.Skipped, 0, len(s))
	for _, x := range s {
		out = append(out, execproto.Skipped{Name: x.Name, Type: x.Type, Reason: x.Reason})
	}
	return out
}

// drain waits for the snapshot in flight and, when anything ran since the latest good snapshot
// that may have changed the state (a snapshot that failed included, under either policy), takes
// one: what `session stop` (and gc, and --upgrade) asks before it stops the container.
func (a *Agent) drain(j *job) {
	reply := func() {
		st := a.Status()
		st.Snapshot = a.sched.savedID
		_ = j.conn.SendJSON(execproto.TypeReply, j.id, st)
		a.end(j)
	}
	a.afterSnapshot(func() {
		if a.sched.drainDue() && a.k.alive() && a.startSnapshot(a.log.NextSeq()-1) != nil {
			a.afterSnapshot(reply)
			return
		}
		reply()
	})
}

func (a *Agent) restoreTo(j *job) {
	id := j.req.Snapshot
	if id == execproto.EmptyState {
		a.afterSnapshot(func() { a.resetEmpty(j) })
		return
	}
	if err := a.checkSnapshot(id); err != nil {
		_ = j.conn.SendError(j.id, "not_found", err.Error())
		a.end(j)
		return
	}
	a.afterSnapshot(func() {
		defer a.end(j)
		info := a.bringUpRetrying(id)
		a.setRestore(info)
		if info.Snapshot != id {
			a.note(fmt.Sprintf("restore of snapshot %s failed; state brought back to %s", id, describeState(info)))
			_ = j.conn.SendError(j.id, "internal", fmt.Sprintf("restore %s failed (%s); state brought back to %s instead", id, joinMessages(info.Messages), describeState(info)))
			return
		}
		a.note(fmt.Sprintf("state restored to snapshot %s (after execution %d)", info.Snapshot, info.Seq))
		// The live state is now an older one than the latest snapshot's: it is unsaved until a
		// snapshot after the restore is, or a restart would bring the newer one back.
		a.sched.ran(a.log.NextSeq()-1, true)
		_ = j.conn.SendJSON(execproto.TypeReply, j.id, info)
	})
}

// resetEmpty restarts the interpreter with an empty state (OpRestore of EmptyState).
func (a *Agent) resetEmpty(j *job) {
	defer a.end(j)
	a.retireKernel()
	k, err := startKernel(a.kernelConfig(), nil, kernelReadyTimeout)
	if err != nil {
		info := a.bringUpRetrying("")
		a.setRestore(info)
		_ = j.conn.SendError(j.id, "internal", fmt.Sprintf("the interpreter did not start with an empty state (%v); state brought back to %s", err, describeState(info)))
		return
	}
	var info execproto.RestoreInfo
	a.install(k, nil, &info)
	info.Restored, info.Failed = nonNil(info.Restored), []execproto.Skipped{}
	a.setRestore(info)
	a.note("state reset: the interpreter started again with an empty state")
	// Unsaved until a snapshot after it is taken, or a restart would bring the old state back.
	a.sched.ran(a.log.NextSeq()-1, true)
	_ = j.conn.SendJSON(execproto.TypeReply, j.id, info)
}

// checkSnapshot reports whether snapshot id exists and can be opened.
func (a *Agent) checkSnapshot(id string) error {
	f, _, err := a.store.Open(id)
	if err != nil {
		return fmt.Errorf("snapshot %q: %w; list the session's snapshots to pick another", id, err)
	}
	f.Close()
	return nil
}

// listing is a request that the interpreter answers (variables, complete, inspect,
// is_complete) waiting for its answer, which is passed on as the reply.
type listing struct {
	a       *Agent
	j       *job
	op      driverOp
	id      string
	timer   *time.Timer
	expired <-chan struct{}
}

// listTimeout bounds the kernel's answer to a variables request (a variable for the tests).
var listTimeout = 30 * time.Second

// query asks the interpreter what j asks (vars, complete, inspect, is_complete).
func (a *Agent) query(j *job) {
	op := driverOp(j.req.Op)
	id := "v" + newNonce()[:8]
	req := driverRequest{Op: opVars, ID: id}
	if op != opVars {
		req = queryRequest(op, id, j.req.Code, j.req.CursorPos, j.req.DetailLevel)
	}
	if err := a.k.send(req); err != nil {
		_ = j.conn.SendError(j.id, "internal", "the interpreter is not running")
		a.end(j)
		return
	}
	expired := make(chan struct{})
	l := &listing{a: a, j: j, op: op, id: id, expired: expired}
	l.timer = time.AfterFunc(listTimeout, func() { close(expired) })
	a.listing = l
}

func (l *listing) kernelEvent(ev kernelEvent, ok bool) {
	switch {
	case !ok:
		l.fail("the interpreter ended while listing variables")
	case ev.Op == l.op && ev.ID == l.id:
		l.timer.Stop()
		_ = l.j.conn.Send(execproto.TypeReply, l.j.id, ev.raw)
		l.a.end(l.j)
	case ev.Op == opError && ev.ID == l.id && l.op != opVars:
		// A driver without the request (bash, node, Python without IPython): the neutral
		// answer, so that a notebook front end never sees an error for it.
		l.timer.Stop()
		_ = l.j.conn.SendJSON(execproto.TypeReply, l.j.id, neutralReply(l.op, l.j.req))
		l.a.end(l.j)
	case ev.Op == opError && (ev.ID == l.id || ev.ID == "") || ev.Op == opInvalid:
		l.fail("the interpreter could not list its variables: " + ev.errorText())
	}
}

// neutralReply answers a complete, inspect or is_complete request that the driver cannot.
func neutralReply(op driverOp, req execproto.Request) any {
	switch op {
	case opComplete:
		pos := req.CursorPos
		return execproto.CompleteReply{Matches: []string{}, CursorStart: pos, CursorEnd: pos, Metadata: json.RawMessage("{}")}
	case opInspect:
		return execproto.InspectReply{Data: map[string]json.RawMessage{}, Metadata: json.RawMessage("{}")}
	}
	return execproto.IsCompleteReply{Status: "unknown"}
}

func (l *listing) fail(msg string) {
	l.timer.Stop()
	_ = l.j.conn.SendError(l.j.id, "internal", msg)
	l.a.end(l.j)
}
