package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/history"
)

// reserveSize is the room kept on the volume for the history: code that fills the session's
// disk must not make the runtime lose the record of what happened.
const reserveSize = 2 << 20

// reservePath is a file of zeros in the state directory; the agent removes it to write a history
// record when the volume is full, and makes it again once there is room.
func (a *Agent) reservePath() string { return filepath.Join(a.cfg.StateDir, contract.ReserveFile) }

// ensureReserve (re)creates the reserve when it is missing and the volume has room for it and
// more. It never fails: without a reserve, history writes only lose their safety net.
func (a *Agent) ensureReserve() {
	path := a.reservePath()
	if st, err := os.Lstat(path); err == nil && st.Mode().IsRegular() && st.Size() == reserveSize {
		return
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(a.cfg.StateDir, &fs); err != nil || int64(fs.Bavail)*fs.Bsize < 4*reserveSize {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return
	}
	_, err = f.Write(make([]byte, reserveSize)) // written, not sparse: the blocks are really taken
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		_ = os.Remove(path)
	}
}

// record appends one history record. When the volume is full, it frees the reserve and tries
// again, then tries once more without the record's output; the error says what happened, for
// the caller to report (the record is never dropped silently).
func (a *Agent) record(r history.Record) error {
	var err error
	switch r.Kind {
	case history.KindStart:
		err = a.log.AppendNoSync(r) // the fsync after its end record covers it
	case history.KindEnd, history.KindState:
		// Written now, so a killed container loses nothing (the page cache is the host's), and
		// fsynced by the syncer: the execution's result does not wait for the disk.
		if err = a.log.AppendNoSync(r); err == nil {
			a.syncSoon()
		}
	default:
		err = a.log.Append(r)
	}
	if err == nil || !(errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) {
		return err
	}
	full := fmt.Errorf("the session's volume is full (%w)", err)
	if rerr := os.Remove(a.reservePath()); rerr == nil {
		if err2 := a.log.Append(r); err2 == nil {
			return fmt.Errorf("%w: runtimectl used its reserve to record execution %d; free space in /workspace, or snapshots and history stop being saved", full, r.Seq)
		}
	}
	if r.Stdout != "" || r.Stderr != "" {
		r.StdoutTruncated += int64(len(r.Stdout))
		r.StderrTruncated += int64(len(r.Stderr))
		r.Stdout, r.Stderr = "", "[runtimectl: the output was not kept: the session's volume is full]\n"
		if err2 := a.log.Append(r); err2 == nil {
			return fmt.Errorf("%w: execution %d was recorded without its output; free space in /workspace", full, r.Seq)
		}
	}
	return fmt.Errorf("%w: execution %d could not be recorded in the history; free space in /workspace", full, r.Seq)
}

// syncSoon asks the syncer for an fsync of the history. Requests made while one is pending
// are folded into it: the fsync that follows covers them all.
func (a *Agent) syncSoon() {
	select {
	case a.syncReq <- struct{}{}:
	default:
	}
}

// syncer fsyncs the history when asked, until ctx ends. An fsync that fails is reported to the
// next execution's client: the records are written, but their durability across a crash of the
// host is not known.
func (a *Agent) syncer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.syncReq:
			if err := a.log.Sync(); err != nil {
				a.warn(err.Error() + "; the latest history records may not survive a crash of the host")
			}
		}
	}
}

// note appends a note to the latest execution's record, when there is one.
func (a *Agent) note(msg string) {
	if seq := a.log.NextSeq() - 1; seq > 0 {
		if err := a.record(history.Record{Kind: history.KindNote, Seq: seq, Note: msg}); err != nil {
			a.warn(err.Error())
		}
	}
}

// warn keeps a message for the next execution's client (as a notice) and logs it.
func (a *Agent) warn(msg string) {
	a.cfg.Logger.Warn(msg)
	a.mu.Lock()
	a.warnings = append(a.warnings, msg)
	if len(a.warnings) > 20 {
		a.warnings = a.warnings[len(a.warnings)-20:]
	}
	a.mu.Unlock()
}

// takeWarnings returns the messages kept for the next client and forgets them.
func (a *Agent) takeWarnings() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.warnings
	a.warnings = nil
	return w
}
