package agent

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/runtimectl/runtimectl/snapshot"
)

// snapExpect tells a kernel's snapshot reader which snapshot the next stream on fd 5 is.
type snapExpect struct {
	id  string
	seq int64
}

// snapResult is a finished snapshot stream.
type snapResult struct {
	id       string
	seq      int64
	manifest snapshot.Manifest
	err      error
}

// inflight is the one snapshot being written.
type inflight struct {
	id      string
	seq     int64
	pid     int // the writer, once the kernel has said; 0 before
	started time.Time
	goneAt  time.Time // when the writer was first seen gone
	covers  int64     // the scheduler's dirty mark when it was asked for: what it saves
	// coversBook is the scheduler's bookkeeping mark when it was asked for.
	coversBook int64
	waiters    []func(snapResult)
}

// readSnapshots is the only reader of a kernel's fd 5, for the kernel's life.
func (a *Agent) readSnapshots(k *kernel, expect <-chan snapExpect, done chan<- snapResult) {
	for e := range expect {
		m, err := a.receiveSnapshot(k, e)
		done <- snapResult{id: e.id, seq: e.seq, manifest: m, err: err}
	}
}

// errWriter passes writes on until the first error, then swallows them, so that a full disk
// does not leave the fd-5 stream half read.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err == nil {
		_, e.err = e.w.Write(p)
	}
	return len(p), nil
}

func (a *Agent) receiveSnapshot(k *kernel, e snapExpect) (snapshot.Manifest, error) {
	// A deadline left by an abort that came after the previous stream was read must not fail
	// this one; and aborts only apply while the stream is being read.
	_ = k.snap.SetReadDeadline(time.Time{})
	k.reading.Store(true)
	defer k.reading.Store(false)
	for {
		w, cerr := a.store.Create(e.id)
		var dst io.Writer = io.Discard
		if cerr == nil {
			dst = w
		}
		ew := &errWriter{w: dst}
		_, err := snapshot.CopyData(ew, k.snapBuf, 1<<31)
		if err != nil {
			if w != nil {
				w.Abort()
			}
			a.resyncSnapshots(k)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return snapshot.Manifest{}, errors.New("the snapshot writer died or ran past its time budget")
			}
			return snapshot.Manifest{}, fmt.Errorf("read snapshot stream: %w", err)
		}
		b, err := snapshot.ReadChunk(k.snapBuf, 64<<20)
		if err != nil {
			if w != nil {
				w.Abort()
			}
			a.resyncSnapshots(k)
			return snapshot.Manifest{}, fmt.Errorf("read snapshot manifest: %w", err)
		}
		km, err := snapshot.ParseKernelManifest(b)
		if err != nil {
			if w != nil {
				w.Abort()
			}
			return snapshot.Manifest{}, fmt.Errorf("snapshot manifest: %w", err)
		}
		if km.Retry {
			if w != nil {
				w.Abort()
			}
			continue
		}
		if cerr != nil {
			return snapshot.Manifest{}, fmt.Errorf("create snapshot file: %w", cerr)
		}
		if ew.err != nil {
			w.Abort()
			return snapshot.Manifest{}, fmt.Errorf("write snapshot: %w", ew.err)
		}
		if !km.OK {
			w.Abort()
			msg := "the interpreter could not write its state"
			if km.Error != nil {
				msg = *km.Error
			}
			return snapshot.Manifest{}, errors.New(msg)
		}
		k.reading.Store(false) // the stream is read; what is left is the disk
		m, err := w.Commit(snapshot.Manifest{
			Seq:     e.seq,
			Lang:    a.cfg.Lang.Name,
			Format:  km.Format,
			Kept:    km.Kept,
			Skipped: km.Skipped,
			Info:    km.Info,
		})
		if err != nil {
			return snapshot.Manifest{}, fmt.Errorf("save snapshot: %w", err)
		}
		return m, nil
	}
}

// resyncSnapshots drops whatever a dead writer left in the pipe, so the next stream starts
// clean. Only one writer exists at a time, and it is gone by now.
func (a *Agent) resyncSnapshots(k *kernel) {
	buf := make([]byte, 64<<10)
	for {
		_ = k.snap.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := k.snap.Read(buf); err != nil {
			break
		}
	}
	_ = k.snap.SetReadDeadline(time.Time{})
	k.snapBuf.Reset(k.snap)
}

// abortSnapshotRead makes the reader's blocked read fail, after the writer died.
func (k *kernel) abortSnapshotRead() {
	if k.reading.Load() {
		_ = k.snap.SetReadDeadline(time.Now())
	}
}

// killWriter ends a snapshot writer that ran past its budget.
func killWriter(pid int) {
	if pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
