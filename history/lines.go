package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxLineBytes bounds one line of history.jsonl: 64 MiB. [Log.Append]
// refuses a longer record (cap the output first, see [CapOutput]) and the
// readers report a longer line as a problem and skip it.
const MaxLineBytes = 64 << 20

// lineLimit is MaxLineBytes; tests lower it to stay fast.
var lineLimit = MaxLineBytes

// line is one line of a history file, as seen by lineScanner.
type line struct {
	no         int    // 1-based line number
	start      int64  // offset of the line's first byte
	data       []byte // the line without its newline; nil when tooLong
	size       int64  // length of the line without its newline
	terminated bool   // the line ends with '\n' (false only for the last line)
	tooLong    bool   // longer than the scanner's max: data was dropped
}

// lineScanner splits a stream into lines of any length, keeping at most max
// bytes of one line in memory. Unlike bufio.Scanner it reads past a line that
// is too long instead of stopping, and says whether the last line had its
// newline.
type lineScanner struct {
	r      *bufio.Reader
	max    int
	lineNo int
	off    int64
	buf    []byte
}

func newLineScanner(r io.Reader, max int) *lineScanner {
	return &lineScanner{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next line, or io.EOF when there is none. The data of the
// returned line is only valid until the next call.
func (s *lineScanner) next() (line, error) {
	l := line{no: s.lineNo + 1, start: s.off}
	s.buf = s.buf[:0]
	for {
		chunk, err := s.r.ReadSlice('\n')
		s.off += int64(len(chunk))
		if err == nil {
			l.terminated = true
			chunk = chunk[:len(chunk)-1]
		}
		l.size += int64(len(chunk))
		if !l.tooLong {
			if l.size > int64(s.max) {
				l.tooLong = true
				s.buf = s.buf[:0]
			} else {
				s.buf = append(s.buf, chunk...)
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			if l.size == 0 {
				return line{}, io.EOF
			}
		default:
			return line{}, err
		}
		break
	}
	s.lineNo++
	if !l.tooLong {
		l.data = s.buf
	}
	return l, nil
}

// blank reports whether b holds only JSON whitespace.
func blank(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return false
		}
	}
	return true
}

// decodeRecord parses one line into a Record and checks what the mergers
// rely on: a known schema, a known kind and a positive seq.
func decodeRecord(b []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return Record{}, fmt.Errorf("not a record: %w", err)
	}
	switch {
	case r.Schema == 0:
		return Record{}, errors.New("record has no schema")
	case r.Schema > Schema:
		return Record{}, fmt.Errorf("record schema %d is newer than this program reads (%d)", r.Schema, Schema)
	case r.Schema < 0:
		return Record{}, fmt.Errorf("record schema %d is not valid", r.Schema)
	case !knownKind(r.Kind):
		return Record{}, fmt.Errorf("unknown record kind %q", r.Kind)
	case r.Seq <= 0:
		return Record{}, fmt.Errorf("record seq %d is not positive", r.Seq)
	}
	return r, nil
}

// seqOf reads only the seq of a line that is valid JSON but not a record
// that this version understands (a newer schema, say), so that sequence
// numbers are never reused.
func seqOf(b []byte) (int64, bool) {
	var v struct {
		Seq int64 `json:"seq"`
	}
	if json.Unmarshal(b, &v) != nil {
		return 0, false
	}
	return v.Seq, true
}
