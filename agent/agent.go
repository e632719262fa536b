package agent

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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
	cfg Config
	// claimedAs is the session a warm pool's member became (OpClaim): the name it gives from
	// then on; nil for a session made as itself.
	claimedAs atomic.Pointer[string]
	log       *history.Log
	store     *snapshot.Store

	jobs   chan *job
	queued chan struct{} // one token per job waiting, to bound the queue

	// Owned by the run loop (loop.go).
	k        *kernel
	expect   chan snapExpect
	snapDone chan snapResult
	sched    scheduler
	oomSeen  int64 // the cgroup's OOM-kill count as of the last look (read only after a crash)
	pids     pidsWatch
	syncReq  chan struct{} // a pending fsync of the history, for the syncer
	// loadFailures counts, per snapshot, the kernels that failed to start from it.
	loadFailures map[string]int
	cur          *job       // the request being served, nil between requests
	exe          *execution // cur, when it is an execution
	listing      *listing   // cur, when it is a variables listing
	recovering   bool       // a dead or broken kernel is being replaced (recoverKernel)
	stopping     bool       // the agent's context ended
	closing      bool       // the last snapshot was asked for
	over         bool       // Run returns

	diskUsed atomic.Int64  // the workspace's size as last measured; -1 before the first
	diskKick chan struct{} // asks the disk watchdog for a measurement
	disk     diskState     // entries, the state volume, a stop past the cap (diskcap.go)

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
	log.SetLimit(cfg.HistoryMax)
	store, err := snapshot.OpenStore(cfg.StateDir, cfg.KeepSnapshots, snapshot.WithMaxBytes(cfg.SnapshotMaxBytes))
	if err != nil {
		return nil, err
	}
	a := &Agent{
		cfg:      cfg,
		log:      log,
		store:    store,
		jobs:     make(chan *job, cfg.QueueLimit),
		queued:   make(chan struct{}, cfg.QueueLimit),
		oomSeen:  oomKills(),
		syncReq:  make(chan struct{}, 1),
		diskKick: make(chan struct{}, 1),
		sched:    scheduler{policy: cfg.SnapshotPolicy},

		loadFailures: map[string]int{},
	}
	a.diskUsed.Store(-1)
	a.disk.state.Store(-1)
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
	a.loadClaim()
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

func newNonce() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
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
	return execproto.Hello{Agent: a.cfg.Version, Lang: a.cfg.Lang.Name, Session: a.sessionName(), Restore: &r}
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
		DiskUsed:       a.diskUsed.Load(),
		DiskLimit:      a.cfg.DiskLimit,
		DiskEntries:    a.disk.entries.Load(),
		EntryLimit:     a.cfg.entryLimit(),
		StateUsed:      a.disk.state.Load(),
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

// sessionName is the session the agent serves: its settings', or the one a claim made it.
func (a *Agent) sessionName() string {
	if n := a.claimedAs.Load(); n != nil {
		return *n
	}
	return a.cfg.Session
}

// kernelConfig is the configuration an interpreter starts with, named as the session is now.
func (a *Agent) kernelConfig() Config {
	cfg := a.cfg
	cfg.Session = a.sessionName()
	return cfg
}
