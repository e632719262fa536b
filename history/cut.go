package history

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// SetLimit bounds the file: once an append takes it past max bytes (0: no bound), the oldest
// executions are cut, keeping the newest records that fit in half of max, from an execution's
// start record on, and a note record on the first execution kept says what was cut. The cut
// is a new file renamed over the old one (temp file, fsync, rename, fsync of the folder), so a
// reader sees the history before or after it, never half of it.
func (l *Log) SetLimit(max int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.limit = max
}

// Cuts reports how many times the history was cut since Open.
func (l *Log) Cuts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cuts
}

// cutLocked cuts the file as SetLimit says. Callers hold mu. A failure leaves the file whole.
func (l *Log) cutLocked() error {
	if l.limit <= 0 || l.size <= l.limit || l.size < l.noCutBefore {
		return nil
	}
	keep := l.limit / 2
	from := l.size - keep
	src, err := os.OpenFile(l.path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer src.Close()
	if _, err := src.Seek(from, io.SeekStart); err != nil {
		return err
	}
	sc := newLineScanner(src, lineLimit)
	cutAt, first := int64(-1), int64(0)
	for skip := true; ; skip = false {
		ln, err := sc.next()
		if err != nil || !ln.terminated {
			break
		}
		if skip || ln.tooLong {
			continue // the first line may be a part of one
		}
		if r, err := decodeRecord(ln.data); err == nil && r.Kind == KindStart {
			cutAt, first = from+ln.start, r.Seq
			break
		}
	}
	if cutAt < 0 {
		// No execution starts in the newest half (one very large record): try again once the
		// file has grown by half the limit.
		l.noCutBefore = l.size + keep
		return nil
	}
	note, err := EncodeRecord(Record{Kind: KindNote, Seq: first, Note: fmt.Sprintf(
		"the history before execution %d was cut (%d bytes of records): the state volume keeps at most %d bytes of history, the newest executions first", first, cutAt, l.limit)})
	if err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(l.path), ".cut-"+filepath.Base(l.path))
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	done := false
	defer func() {
		if !done {
			out.Close()
			_ = os.Remove(tmp)
		}
	}()
	if _, err := out.Write(note); err != nil {
		return err
	}
	if _, err := src.Seek(cutAt, io.SeekStart); err != nil {
		return err
	}
	// The records kept, but those of executions before the cut that came late (the state
	// record of a snapshot that ended after the next execution began).
	n := int64(0)
	w := bufio.NewWriterSize(out, 64<<10)
	sc = newLineScanner(io.LimitReader(src, l.size-cutAt), lineLimit)
	for {
		ln, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if ln.tooLong {
			continue
		}
		if seq, ok := seqOf(ln.data); ok && seq < first {
			continue
		}
		if _, err := w.Write(ln.data); err != nil {
			return err
		}
		if err := w.WriteByte('\n'); err != nil {
			return err
		}
		n += int64(len(ln.data)) + 1
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := out.Sync(); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	done = true
	if err := os.Rename(tmp, l.path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := syncDir(filepath.Dir(l.path)); err != nil {
		return err
	}
	f, err := os.OpenFile(l.path, os.O_RDWR|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return errors.Join(fmt.Errorf("reopen the cut history: %w", err), l.f.Close())
	}
	_ = l.f.Close()
	l.f = f
	l.size = int64(len(note)) + n
	l.cuts++
	for seq := range l.starts {
		if seq < first {
			delete(l.starts, seq)
		}
	}
	for seq := range l.ends {
		if seq < first {
			delete(l.ends, seq)
		}
	}
	return nil
}
