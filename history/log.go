package history

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// Log is history.jsonl opened for appending. It is safe for concurrent use.
// Only one Log (one process) may append to a file at a time.
type Log struct {
	path string

	mu       sync.Mutex
	f        *os.File // nil once closed
	size     int64    // bytes in the file: where the next record goes
	next     int64    // the next seq to hand out
	starts   map[int64]Record
	ends     map[int64]bool
	problems []string
	repairs  []string
	// lastSaved is the newest record that says a snapshot was saved.
	lastSaved Record
	// limit bounds the file (SetLimit, cut.go); cuts counts the cuts, noCutBefore delays the
	// next try after one that found nothing to cut.
	limit       int64
	cuts        int
	noCutBefore int64
}

// Open opens the history file at path for appending, creating it (mode
// 0600) if it does not exist, and scans it:
//
//   - A last line without its newline is a torn write. When it is a
//     complete record (only the newline is missing), Open adds the newline;
//     otherwise it truncates the file back to the end of the previous line.
//     Either way it says so in [Log.Repairs].
//   - A line before the last that cannot be read is neither removed nor
//     guessed at: it is reported in [Log.Problems] with its line number, and
//     Open succeeds.
//
// The scan gives [Log.NextSeq] (one more than the highest seq seen, 1 for an
// empty file) and [Log.Unfinished] (start records with no end record).
func Open(path string) (*Log, error) {
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, fs.ErrNotExist)

	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	l := &Log{path: path, f: f, next: 1, starts: map[int64]Record{}, ends: map[int64]bool{}}
	if err := l.scan(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("open history %s: %w", path, err)
	}
	if created {
		if err := syncDir(filepath.Dir(path)); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("open history %s: %w", path, err)
		}
	}
	return l, nil
}

// scan reads the whole file once, from the start, and repairs a torn tail.
func (l *Log) scan() error {
	if _, err := l.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	sc := newLineScanner(l.f, lineLimit)
	for {
		ln, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
		if !ln.terminated {
			// Only the last line can lack its newline.
			return l.repairTail(ln)
		}
		l.size = sc.off
		l.take(ln)
	}
	l.size = sc.off
	return nil
}

// take accounts for one complete line.
func (l *Log) take(ln line) {
	if ln.tooLong {
		l.problems = append(l.problems, fmt.Sprintf("line %d: %d bytes, longer than the %d-byte limit", ln.no, ln.size, lineLimit))
		return
	}
	if blank(ln.data) {
		return
	}
	rec, err := decodeRecord(ln.data)
	if err != nil {
		l.problems = append(l.problems, fmt.Sprintf("line %d: %v", ln.no, err))
		if seq, ok := seqOf(ln.data); ok && seq >= l.next {
			l.next = seq + 1 // never hand out a seq that a newer writer used
		}
		return
	}
	l.note(rec)
}

// repairTail deals with a last line that has no newline.
func (l *Log) repairTail(ln line) error {
	if !ln.tooLong && jsonObject(ln.data) {
		// The record is whole: only the newline is missing. Keep it.
		if _, err := l.f.Write([]byte{'\n'}); err != nil {
			return fmt.Errorf("complete line %d: %w", ln.no, err)
		}
		if err := l.f.Sync(); err != nil {
			return fmt.Errorf("complete line %d: %w", ln.no, err)
		}
		l.size = ln.start + ln.size + 1
		l.repairs = append(l.repairs, fmt.Sprintf("line %d: added the missing newline at the end of the file", ln.no))
		ln.terminated = true
		l.take(ln)
		return nil
	}
	if err := l.f.Truncate(ln.start); err != nil {
		return fmt.Errorf("truncate torn line %d: %w", ln.no, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("truncate torn line %d: %w", ln.no, err)
	}
	l.size = ln.start
	l.repairs = append(l.repairs, fmt.Sprintf("line %d: removed a torn last line (%d bytes without a newline)", ln.no, ln.size))
	return nil
}

// jsonObject reports whether b is one whole JSON object.
func jsonObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r")
	return len(b) > 0 && b[0] == '{' && json.Valid(b)
}

// note updates the seq counter and the unfinished set for one record.
// Callers hold mu (or own l exclusively).
func (l *Log) note(r Record) {
	if r.Seq >= l.next {
		l.next = r.Seq + 1
	}
	switch r.Kind {
	case KindStart:
		if !l.ends[r.Seq] { // a start after its end is ignored, as Parse does
			l.starts[r.Seq] = r
		}
	case KindEnd:
		l.ends[r.Seq] = true
		delete(l.starts, r.Seq)
	}
	if (r.Kind == KindEnd || r.Kind == KindState) && r.State != nil && r.State.Status == StateSaved && r.State.Snapshot != "" {
		l.lastSaved = r
	}
}

// LastSaved returns the newest record that says a snapshot was saved (its State names it);
// ok is false when the history records none.
func (l *Log) LastSaved() (r Record, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSaved, l.lastSaved.State != nil
}

// Append writes r as one line (Schema is set to [Schema]) with a single
// write call, then fsyncs the file. It refuses an unknown kind, a seq that
// is not positive and a line longer than [MaxLineBytes]. When the write
// fails part way, or the fsync fails, Append cuts the file back so that later
// records do not land on a torn line and a retry does not repeat the record.
func (l *Log) Append(r Record) error { return l.appendRecord(r, true) }

// AppendNoSync appends like Append but leaves the fsync to the next Append or to [Log.Sync]:
// the record is in the host's page cache when it returns, so a container that is killed loses
// nothing; only a crash of the whole host before the fsync could.
func (l *Log) AppendNoSync(r Record) error { return l.appendRecord(r, false) }

// EncodeRecord returns r as one line of history.jsonl (with its newline), exactly as a Log
// appends it: for writers that make a history file without a Log (a fork's first record).
func EncodeRecord(r Record) ([]byte, error) {
	r.Schema = Schema
	if !knownKind(r.Kind) {
		return nil, fmt.Errorf("history record: unknown kind %q", r.Kind)
	}
	if r.Seq <= 0 {
		return nil, fmt.Errorf("history record: seq %d is not positive", r.Seq)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil { // Encode adds the newline
		return nil, fmt.Errorf("history record %d: %w", r.Seq, err)
	}
	if buf.Len()-1 > lineLimit {
		return nil, fmt.Errorf("history record %d: %d bytes, more than the %d-byte line limit", r.Seq, buf.Len()-1, lineLimit)
	}
	return buf.Bytes(), nil
}

func (l *Log) appendRecord(r Record, sync bool) error {
	line, err := EncodeRecord(r)
	if err != nil {
		return fmt.Errorf("append %w", err)
	}
	buf := bytes.NewBuffer(line)

	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("append history record %d: %w", r.Seq, os.ErrClosed)
	}
	n, err := l.f.Write(buf.Bytes())
	if err != nil {
		if n > 0 {
			_ = l.f.Truncate(l.size) // best effort: Open repairs what is left
		}
		return fmt.Errorf("append history record %d: %w", r.Seq, err)
	}
	if !sync {
		l.size += int64(n)
		l.note(r)
		l.cutAfterEnd(r)
		return nil
	}
	if err := l.f.Sync(); err != nil {
		// Not known to be on disk: take it back, so that a caller that tries again (after
		// freeing space, say) does not write the record twice.
		_ = l.f.Truncate(l.size)
		return fmt.Errorf("append history record %d: sync: %w", r.Seq, err)
	}
	l.size += int64(n)
	l.note(r)
	l.cutAfterEnd(r)
	return nil
}

// cutAfterEnd cuts the file past its limit after an end record (never between an execution's
// start and end). A cut that fails leaves the file as it was, to be tried after the next.
func (l *Log) cutAfterEnd(r Record) {
	if r.Kind == KindEnd && l.limit > 0 && l.size > l.limit {
		_ = l.cutLocked()
	}
}

// Reserve returns the next seq and moves the counter on, so that the seq is
// never handed out again by this Log.
func (l *Log) Reserve() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	seq := l.next
	l.next++
	return seq
}

// NextSeq is the seq that [Log.Reserve] would return now: one more than the
// highest seq in the file (or reserved), 1 for an empty file.
func (l *Log) NextSeq() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

// Unfinished returns the start records whose seq has no end record, by seq:
// executions that a crash cut short, to be closed with an end record of
// status "crashed". It follows the records appended since Open.
func (l *Log) Unfinished() []Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Record, 0, len(l.starts))
	for _, r := range l.starts {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Record) int { return cmp.Compare(a.Seq, b.Seq) })
	return out
}

// Problems lists the lines that Open could not read, each with its line
// number. They are left in the file as they are.
func (l *Log) Problems() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.problems)
}

// Repairs lists what Open changed in the file (a torn last line).
func (l *Log) Repairs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.repairs)
}

// Sync makes every record appended so far durable (an fsync of the file). It does not hold the
// Log's lock during the fsync, so appends go on meanwhile; a record appended during the call may
// or may not be covered. After Close it returns nil: Close itself leaves nothing unwritten that
// Sync could still save.
func (l *Log) Sync() error {
	l.mu.Lock()
	f := l.f
	l.mu.Unlock()
	if f == nil {
		return nil
	}
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("sync history %s: %w", l.path, err)
	}
	return nil
}

// Close fsyncs and closes the file. Append fails after Close; Close again is a no-op.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := errors.Join(l.f.Sync(), l.f.Close())
	l.f = nil
	if err != nil {
		return fmt.Errorf("close history %s: %w", l.path, err)
	}
	return nil
}

// syncDir fsyncs a directory so that a new entry in it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}
