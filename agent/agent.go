package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/snapshot"
)

// Agent serves one session: it owns the kernel, the queue of requests, the history and the
// snapshot store. One goroutine (run) owns the kernel and everything about it; connections only
// enqueue jobs and read results.
type Agent struct {
	cfg   Config
	log   *history.Log
	store *snapshot.Store

	jobs   chan *job
	queued chan struct{} // one token per job waiting, to bound the queue

	// Owned by the run goroutine.
	k        *kernel
	expect   chan snapExpect
	snapDone chan snapResult
	sched    scheduler
	oomSeen  int64 // the cgroup's OOM-kill count as of the last look (read only after a crash)
	pids     pidsWatch
	syncReq  chan struct{} // a pending fsync of the history, for the syncer
	// loadFailures counts, per snapshot, the kernels that failed to start from it.
	loadFailures map[string]int

	mu       sync.Mutex // guards the fields below, read by connections
	restore  execproto.RestoreInfo
	running  *job
	runSeq   int64
	lastExec time.Time
	restarts int
	warnings []string // for the next execution's client: snapshots not saved, a full volume
}

// job is one request waiting for the kernel.
type job struct {
	req       execproto.Request
	conn      *execproto.ServerConn
	id        uint32
	intOnce   sync.Once
	interrupt chan struct{}
	finished  func() // called once the job has run (nil: nothing to do)
}

func (j *job) stop() { j.intOnce.Do(func() { close(j.interrupt) }) }

// New opens the session's state (repairing a torn history line, recording executions that were
// running when the container died as crashed) and starts the kernel from the latest good
// snapshot.
func New(cfg Config) (*Agent, error) {
	cfg.setDefaults()
	if _, limit, ok := pidsUsage(); ok {
		reserveThreads(threadReserve(limit))
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if err := snapshot.CheckPrivateDir(cfg.StateDir); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	removeLegacyState(cfg)
	if len(cfg.Settings) > 0 {
		if err := writeFileAtomic(filepath.Join(cfg.StateDir, contract.SettingsFile), cfg.Settings); err != nil {
			return nil, fmt.Errorf("record session settings: %w", err)
		}
	}
	log, err := history.Open(filepath.Join(cfg.StateDir, contract.HistoryFile))
	if err != nil {
		return nil, err
	}
	store, err := snapshot.OpenStore(cfg.StateDir, cfg.KeepSnapshots)
	if err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:     cfg,
		log:     log,
		store:   store,
		jobs:    make(chan *job, cfg.QueueLimit),
		queued:  make(chan struct{}, cfg.QueueLimit),
		oomSeen: oomKills(),
		syncReq: make(chan struct{}, 1),
		sched:   scheduler{policy: cfg.SnapshotPolicy},

		loadFailures: map[string]int{},
	}
	var msgs []string
	msgs = append(msgs, log.Repairs()...)
	for _, p := range log.Problems() {
		msgs = append(msgs, "history: "+p)
	}
	a.ensureReserve()
	info, err := a.bringUp("")
	if err != nil {
		return nil, err
	}
	for _, r := range log.Unfinished() {
		restoredTo := info.Seq
		msg := fmt.Sprintf("the container or its interpreter stopped during execution %d; state brought back to %s", r.Seq, describeState(info))
		if err := a.record(history.Record{
			Kind: history.KindEnd, Seq: r.Seq, Code: r.Code, Status: execproto.StatusCrashed, Started: r.Started,
			Stderr: msg + "\n",
			State:  &history.State{Status: contract.StateRestored, Snapshot: info.Snapshot, RestoredTo: &restoredTo, Message: msg},
		}); err != nil {
			msgs = append(msgs, err.Error()) // a full volume must not keep the session down
		}
		msgs = append(msgs, msg)
	}
	if saved, ok := log.LastSaved(); ok && info.Snapshot == "" && storeEmpty(store) {
		// Not "no snapshot yet": the history says there were some.
		msgs = append(msgs, fmt.Sprintf("the snapshots are gone from the state volume: the history records snapshot %s saved after execution %d, and none is there now", saved.State.Snapshot, saved.Seq))
	}
	info.Messages = append(msgs, info.Messages...)
	a.setRestore(info)
	return a, nil
}

func storeEmpty(s *snapshot.Store) bool {
	ms, problems := s.List()
	return len(ms) == 0 && len(problems) == 0
}

func describeState(info execproto.RestoreInfo) string {
	if info.Snapshot == "" {
		return "an empty state (no snapshot)"
	}
	return fmt.Sprintf("execution %d (snapshot %s)", info.Seq, info.Snapshot)
}

func (a *Agent) setRestore(info execproto.RestoreInfo) {
	a.mu.Lock()
	a.restore = info
	a.mu.Unlock()
}

func joinMessages(m []string) string {
	if len(m) == 0 {
		return "the interpreter did not start from it"
	}
	return strings.Join(m, "; ")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Hello is the greeting for a new connection.
func (a *Agent) Hello() execproto.Hello {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.restore
	return execproto.Hello{Agent: a.cfg.Version, Lang: a.cfg.Lang.Name, Session: a.cfg.Session, Restore: &r}
}

// Status reports the agent's state without waiting for the kernel.
func (a *Agent) Status() execproto.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := execproto.Status{
		Lang:           a.cfg.Lang.Name,
		Running:        a.runSeq,
		Queued:         len(a.jobs),
		NextSeq:        a.log.NextSeq(),
		KernelRestarts: a.restarts,
	}
	if !a.lastExec.IsZero() {
		st.LastExec = a.lastExec.UTC().Format(time.RFC3339Nano)
	}
	return st
}

// Interrupt interrupts the execution running now, whoever asked for it.
func (a *Agent) Interrupt() bool {
	a.mu.Lock()
	j := a.running
	a.mu.Unlock()
	if j == nil {
		return false
	}
	j.stop()
	return true
}

// Enqueue adds a request to the queue, or refuses it when the queue is full.
func (a *Agent) Enqueue(j *job) error {
	select {
	case a.queued <- struct{}{}:
	default:
		return fmt.Errorf("the session is busy: %d requests are already waiting; try again when they have run", a.cfg.QueueLimit)
	}
	a.jobs <- j
	return nil
}

// Run owns the kernel until ctx ends, then waits for a pending snapshot and stops the kernel.
func (a *Agent) Run(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	go a.syncer(ctx) // what it has not synced when ctx ends, the log's Close does
	for {
		a.maybeSnapshot()
		select {
		case <-ctx.Done():
			a.waitSnapshot(a.cfg.SnapshotBudget)
			a.k.kill()
			a.log.Close()
			return
		case j := <-a.jobs:
			<-a.queued
			a.handle(ctx, j)
			if j.finished != nil {
				j.finished()
			}
		case r := <-a.snapDone:
			a.finishSnapshot(r)
		case ev, ok := <-a.k.events:
			switch {
			case ok && ev.Op != opInvalid:
				a.kernelEvent(ev)
			case ok || !a.k.exitsSoon():
				// A driver that breaks the protocol, or closes its event pipe and lives on,
				// cannot be talked to: it is restarted as if it had died.
				why := "the interpreter's driver stopped following the kernel protocol between executions"
				if ok {
					why += " (" + ev.Message + ")"
				}
				a.k.kill()
				info := a.recoverKernel(why)
				a.note(why + "; state brought back to " + describeState(info))
			default:
				// It died: the exited case below brings it back.
			}
		case <-a.k.exited:
			why := fmt.Sprintf("the interpreter ended between executions (%s)", a.k.exitText())
			info := a.recoverKernel(why)
			a.note(why + "; state brought back to " + describeState(info))
		case <-tick.C:
			a.checkSnapshotWriter()
			if a.pids.exhausted() {
				why := a.pids.reason()
				a.k.kill() // first: nothing else can start while the limit is reached
				info := a.recoverKernel(why)
				a.pids.reset()
				a.note(why + "; state brought back to " + describeState(info))
			}
		}
	}
}

func (a *Agent) kernelEvent(ev kernelEvent) {
	if ev.Op == "snapshot_started" && a.sched.inflight != nil {
		a.sched.inflight.pid = ev.PID
	}
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

// maybeSnapshot starts a snapshot when the policy wants one (see scheduler) and the kernel is
// between executions (which it is whenever run's loop calls this).
func (a *Agent) maybeSnapshot() {
	if !a.sched.autoDue() || !a.k.alive() {
		return
	}
	a.startSnapshot(a.log.NextSeq() - 1)
}

func (a *Agent) startSnapshot(seq int64) *inflight {
	return a.startSnapshotID(seq, snapshot.NewID(seq))
}

// startSnapshotID asks the kernel for a snapshot named id of the state after execution seq.
func (a *Agent) startSnapshotID(seq int64, id string) *inflight {
	if err := a.k.send(map[string]any{"op": "snapshot", "id": id}); err != nil {
		return nil
	}
	s := a.sched.start(id, seq)
	a.expect <- snapExpect{id: id, seq: seq}
	return s
}

func (a *Agent) finishSnapshot(r snapResult) {
	prev := a.sched.savedID
	s := a.sched.finish(r)
	state := history.State{Status: contract.StateSaved, Snapshot: r.id}
	if r.err != nil {
		state = history.State{Status: contract.StateFailed, Snapshot: r.id, Error: r.err.Error(),
			Message: fmt.Sprintf("the state after execution %d was not saved: %v; the previous snapshot (%s) stays the latest; the next execution or `session stop` tries again", r.seq, r.err, orNone(prev))}
	}
	if r.err != nil {
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

// waitSnapshot waits for the snapshot in flight, if any.
func (a *Agent) waitSnapshot(limit time.Duration) {
	deadline := time.After(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	events := a.k.events
	for a.sched.inflight != nil {
		select {
		case r := <-a.snapDone:
			a.finishSnapshot(r)
		case ev, ok := <-events:
			if ok {
				a.kernelEvent(ev)
			} else {
				events = nil // the kernel is dead: do not spin on its closed channel
			}
		case <-tick.C:
			a.checkSnapshotWriter()
		case <-deadline:
			killWriter(a.sched.inflight.pid)
			a.k.abortSnapshotRead()
			r := <-a.snapDone
			a.finishSnapshot(r)
		}
	}
}

// recoverKernel replaces a dead (or hung) kernel with one started from the latest good
// snapshot, after the snapshot in flight (if any) has landed.
func (a *Agent) recoverKernel(reason string) execproto.RestoreInfo {
	if s := a.sched.inflight; s != nil && s.pid != 0 && s.pid != a.k.pid {
		a.waitSnapshot(a.cfg.SnapshotBudget)
	}
	a.k.kill()
	if a.sched.inflight != nil {
		// The writer was the kernel itself; its stream died with it.
		r := <-a.snapDone
		a.finishSnapshot(r)
	}
	info := a.bringUpRetrying("")
	info.Messages = append([]string{reason}, info.Messages...)
	a.oomSeen = oomKills()
	a.mu.Lock()
	a.restarts++
	a.mu.Unlock()
	a.setRestore(info)
	return info
}

func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// handle runs one job from the queue.
func (a *Agent) handle(ctx context.Context, j *job) {
	switch j.req.Op {
	case execproto.OpExec:
		a.exec(ctx, j)
	case execproto.OpSnapshot:
		a.manualSnapshot(j)
	case execproto.OpDrain:
		a.drain(j)
	case execproto.OpRestore:
		a.restoreTo(j)
	case execproto.OpVars:
		a.vars(j)
	default:
		_ = j.conn.SendError(j.id, "bad_request", fmt.Sprintf("unknown operation %q", j.req.Op))
	}
}

func (a *Agent) manualSnapshot(j *job) {
	a.waitSnapshot(a.cfg.SnapshotBudget)
	seq := a.log.NextSeq() - 1
	var res snapResult
	s := a.startSnapshot(seq)
	if s == nil {
		_ = j.conn.SendError(j.id, "internal", "the interpreter is not running; try again")
		return
	}
	s.waiters = append(s.waiters, func(r snapResult) { res = r })
	a.waitSnapshot(a.cfg.SnapshotBudget + time.Minute)
	if res.err != nil {
		_ = j.conn.SendError(j.id, "internal", "snapshot failed: "+res.err.Error())
		return
	}
	m := res.manifest
	_ = j.conn.SendJSON(execproto.TypeReply, j.id, execproto.SnapshotReply{
		ID: m.ID, Seq: m.Seq, SizeBytes: m.SizeBytes, Kept: m.Kept, Skipped: toSkipped(m.Skipped),
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
	a.waitSnapshot(a.cfg.SnapshotBudget)
	if a.sched.drainDue() && a.k.alive() {
		a.startSnapshot(a.log.NextSeq() - 1)
		a.waitSnapshot(a.cfg.SnapshotBudget)
	}
	st := a.Status()
	st.Snapshot = a.sched.savedID
	_ = j.conn.SendJSON(execproto.TypeReply, j.id, st)
}

func (a *Agent) restoreTo(j *job) {
	id := j.req.Snapshot
	if _, _, err := a.openCheck(id); err != nil {
		_ = j.conn.SendError(j.id, "not_found", err.Error())
		return
	}
	a.waitSnapshot(a.cfg.SnapshotBudget)
	info := a.bringUpRetrying(id)
	if info.Snapshot != id {
		a.setRestore(info)
		a.note(fmt.Sprintf("restore of snapshot %s failed; state brought back to %s", id, describeState(info)))
		_ = j.conn.SendError(j.id, "internal", fmt.Sprintf("restore %s failed (%s); state brought back to %s instead", id, joinMessages(info.Messages), describeState(info)))
		return
	}
	a.setRestore(info)
	a.note(fmt.Sprintf("state restored to snapshot %s (after execution %d)", info.Snapshot, info.Seq))
	_ = j.conn.SendJSON(execproto.TypeReply, j.id, info)
}

func (a *Agent) openCheck(id string) (*os.File, snapshot.Manifest, error) {
	f, m, err := a.store.Open(id)
	if err != nil {
		return nil, m, fmt.Errorf("snapshot %q: %w; list them with `runtimectl session snapshots`", id, err)
	}
	f.Close()
	return nil, m, nil
}

func (a *Agent) vars(j *job) {
	id := "v" + newNonce()[:8]
	if err := a.k.send(map[string]any{"op": "vars", "id": id}); err != nil {
		_ = j.conn.SendError(j.id, "internal", "the interpreter is not running")
		return
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-a.k.events:
			if !ok {
				_ = j.conn.SendError(j.id, "internal", "the interpreter ended while listing variables")
				return
			}
			if ev.Op == "vars" && ev.ID == id {
				_ = j.conn.Send(execproto.TypeReply, j.id, ev.raw)
				return
			}
			if ev.Op == "error" && (ev.ID == id || ev.ID == "") || ev.Op == opInvalid {
				_ = j.conn.SendError(j.id, "internal", "the interpreter could not list its variables: "+ev.errorText())
				return
			}
			a.kernelEvent(ev)
		case r := <-a.snapDone:
			a.finishSnapshot(r)
		case <-timeout:
			_ = j.conn.SendError(j.id, "internal", "the interpreter did not list its variables within 30s")
			return
		}
	}
}

// removeLegacyState removes what a session made before the state volume kept in its
// workspace's state folder, once the controller has moved it to the state volume (MigratedFile), and
// only while it is still root's: a folder the session user put in its place is its own.
func removeLegacyState(cfg Config) {
	if _, err := os.Lstat(filepath.Join(cfg.StateDir, contract.MigratedFile)); err != nil {
		return
	}
	legacy := filepath.Join(cfg.Workdir, filepath.Base(contract.LegacyStateDir))
	st, err := os.Lstat(legacy)
	if err != nil {
		return
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || !st.IsDir() || int(sys.Uid) != os.Geteuid() {
		cfg.Logger.Warn("legacy state folder is not root's: left as it is", "path", legacy)
		return
	}
	// Its content is root's; the folder itself is an entry of the user's workspace, which root
	// without CAP_DAC_OVERRIDE may not unlink: then it stays, empty, for the user to remove.
	entries, err := os.ReadDir(legacy)
	if err != nil {
		cfg.Logger.Warn("read the legacy state folder", "path", legacy, "err", err)
		return
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(legacy, e.Name())); err != nil {
			cfg.Logger.Warn("remove the legacy state folder", "path", legacy, "err", err)
			return
		}
	}
	if err := os.Remove(legacy); err != nil {
		_ = os.Chmod(legacy, 0o755)
		cfg.Logger.Info("emptied the legacy state folder (its state is on the state volume); the folder stays for the session user to remove", "path", legacy)
		return
	}
	cfg.Logger.Info("removed the legacy state folder (its state is on the state volume)", "path", legacy)
}

func writeFileAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
