package agent

import (
	"errors"
	"fmt"
	"time"

	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/snapshot"
)

// maxRestoreFailures is how many times the agent starts an interpreter from one snapshot that
// kills it (or keeps it from becoming ready) before it passes that snapshot over for the one
// before it, and at the end for an empty state.
const maxRestoreFailures = 2

// kernelReadyTimeout bounds a kernel's start, restoring its snapshot included.
var kernelReadyTimeout = 2 * time.Minute

// retireKernel ends the current kernel, if any, and the snapshot reader it fed: the one place
// that closes a kernel's channel of expected snapshots, so none is closed twice.
func (a *Agent) retireKernel() {
	if a.k != nil && a.k.alive() {
		a.k.kill()
	}
	if a.expect != nil {
		close(a.expect)
		a.expect = nil
	}
}

// bringUp replaces the kernel with a new one started from the snapshot prefer (when not ""),
// else from the latest good one. A snapshot that cannot be opened is passed over, and one from
// which the interpreter failed to start maxRestoreFailures times too (in this agent's life);
// after all of them the kernel starts with an empty state. info.Messages says what was passed
// over and why. The error is returned only when not even an empty kernel starts.
func (a *Agent) bringUp(prefer string) (execproto.RestoreInfo, error) {
	a.retireKernel()
	var info execproto.RestoreInfo
	var candidates []string
	if prefer != "" {
		candidates = append(candidates, prefer)
	}
	ms, errs := a.store.List()
	for _, e := range errs {
		var p snapshot.Problem
		if errors.As(e, &p) {
			info.Messages = append(info.Messages, fmt.Sprintf("snapshot %s is unusable (%v); passed over", p.ID, p.Err))
		}
	}
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].ID != prefer {
			candidates = append(candidates, ms[i].ID)
		}
	}
	tried := false
	for _, id := range candidates {
		if a.loadFailures[id] >= maxRestoreFailures {
			continue // said when it happened
		}
		f, m, err := a.store.Open(id)
		if err != nil {
			info.Messages = append(info.Messages, fmt.Sprintf("snapshot %s is unusable (%v); passed over", id, err))
			continue
		}
		tried = true
		for a.loadFailures[id] < maxRestoreFailures {
			if _, err := f.Seek(0, 0); err != nil {
				break
			}
			k, err := startKernel(a.kernelConfig(), f, kernelReadyTimeout)
			if err == nil {
				f.Close()
				a.install(k, &m, &info)
				return info, nil
			}
			a.loadFailures[id]++
			a.cfg.Logger.Error("start kernel from snapshot", "snapshot", id, "err", err)
			if a.loadFailures[id] >= maxRestoreFailures {
				// Is it the snapshot? An interpreter that cannot start with an empty state
				// either fails for the container's reasons (the pids limit still reached by
				// a fork bomb's last processes, no memory): the snapshot is kept, and the
				// caller tries again later, rather than going on without the session's state.
				ek, eerr := startKernel(a.kernelConfig(), nil, kernelReadyTimeout)
				if eerr != nil {
					a.loadFailures[id] = 0
					f.Close()
					return info, fmt.Errorf("the interpreter starts neither from snapshot %s (%v) nor with an empty state (%v); the snapshot is kept for the next try", id, err, eerr)
				}
				ek.kill()
				info.Messages = append(info.Messages, fmt.Sprintf("the interpreter failed to start from snapshot %s %d times (%v); passed over", id, a.loadFailures[id], err))
			}
		}
		f.Close()
	}
	if tried || len(info.Messages) > 0 {
		info.Messages = append(info.Messages, "no usable snapshot; starting with an empty state")
	}
	k, err := startKernel(a.kernelConfig(), nil, kernelReadyTimeout)
	if err != nil {
		return info, err
	}
	a.install(k, nil, &info)
	return info, nil
}

// install makes k the agent's kernel, started from the snapshot m (nil: an empty state).
func (a *Agent) install(k *kernel, m *snapshot.Manifest, info *execproto.RestoreInfo) {
	a.k = k
	a.expect = make(chan snapExpect, 1)
	a.snapDone = make(chan snapResult, 1)
	go a.readSnapshots(k, a.expect, a.snapDone)
	info.Restored = nonNil(k.ready.Restored)
	info.Failed = k.ready.Failed
	if info.Failed == nil {
		info.Failed = []execproto.Skipped{}
	}
	info.Copies = k.ready.Copies
	if m != nil {
		// What the snapshot could not hold did not come back either: say so with the rest.
		for _, sk := range m.Skipped {
			info.Failed = append(info.Failed, execproto.Skipped{Name: sk.Name, Type: sk.Type, Reason: "not in the snapshot: " + sk.Reason})
		}
		info.Snapshot = m.ID
		info.Seq = m.Seq
		if len(info.Messages) > 0 {
			info.Messages = append(info.Messages, fmt.Sprintf("state restored from snapshot %s (after execution %d)", m.ID, m.Seq))
		}
	}
	a.sched.restarted(info.Snapshot, info.Seq)
}

// bringUpRetrying is bringUp for a loop that must have a kernel: it tries again every second
// (logging why) until one starts.
func (a *Agent) bringUpRetrying(prefer string) execproto.RestoreInfo {
	for {
		info, err := a.bringUp(prefer)
		if err == nil {
			return info
		}
		a.cfg.Logger.Error("restart kernel", "err", err)
		time.Sleep(time.Second)
	}
}
