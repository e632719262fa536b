package agent

import (
	"bytes"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// maxFingerprint is the largest fingerprint the agent reads and keeps; past it every execution
// counts as changed (a state that large costs the driver more than a snapshot does).
const maxFingerprint = 64 << 20

// fingerprints is the agent's side of a driver's state fingerprint file (docs/kernel-protocol.md,
// "The state fingerprint"): a memfd that the driver has as RUNTIMECTL_STATE_FD and rewrites at
// ready and at the end of each execution; the agent reads it, empties it and compares it with
// the last one. "Did the state change" is then one comparison in Go instead of the driver's own
// work in its interpreter (bash: a loop over every `declare -p` line). Owned by the run loop,
// like the kernel. A nil *fingerprints is a driver without the file: every method is a no-op and
// changed is true.
type fingerprints struct {
	f      *os.File
	ignore map[string]bool // keys (a line's text before its first '=') left out of the first part
	last   []byte          // the last fingerprint as compared, nil when unknown
	buf    []byte
}

func newFingerprints() (*fingerprints, error) {
	fd, err := unix.MemfdCreate("runtimectl-state", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &fingerprints{f: os.NewFile(uintptr(fd), "runtimectl-state")}, nil
}

// start takes the ready event's list of lines to ignore and the fingerprint written at start-up.
func (p *fingerprints) start(ready kernelEvent) {
	if p == nil {
		return
	}
	p.ignore = make(map[string]bool, len(ready.FingerprintIgnore))
	for _, k := range ready.FingerprintIgnore {
		p.ignore[k] = true
	}
	p.last = p.take()
}

// changed reads the fingerprint of the execution that just ended and reports whether it differs
// from the last one (true when either is unknown).
func (p *fingerprints) changed() bool {
	if p == nil {
		return true
	}
	cur := p.take()
	changed := cur == nil || p.last == nil || !bytes.Equal(cur, p.last)
	p.last = cur
	return changed
}

// take reads the file, empties it (the driver's descriptor shares the offset, so its next write
// starts at 0 again) and returns its comparable form, or nil when it cannot be read or is too
// large.
func (p *fingerprints) take() []byte {
	defer func() {
		_ = p.f.Truncate(0)
		_, _ = p.f.Seek(0, io.SeekStart)
	}()
	st, err := p.f.Stat()
	if err != nil || st.Size() > maxFingerprint {
		return nil
	}
	if int64(cap(p.buf)) < st.Size() {
		p.buf = make([]byte, st.Size())
	}
	b := p.buf[:st.Size()]
	if _, err := p.f.ReadAt(b, 0); err != nil && err != io.EOF {
		return nil
	}
	return comparable(b, p.ignore)
}

// comparable returns a fresh copy of fingerprint b without the lines of its first part (up to its
// first empty line) whose key, the text before the first '=' (the whole line when it has none),
// is in ignore. The rest is kept byte for byte.
func comparable(b []byte, ignore map[string]bool) []byte {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		line, rest, found := bytes.Cut(b, []byte("\n"))
		if len(line) == 0 && found {
			return append(out, b...) // the empty line and what follows
		}
		key := line
		if i := bytes.IndexByte(line, '='); i >= 0 {
			key = line[:i]
		}
		if !ignore[string(key)] {
			out = append(out, line...)
			if found {
				out = append(out, '\n')
			}
		}
		b = rest
	}
	return out
}

func (p *fingerprints) close() {
	if p != nil {
		p.f.Close()
	}
}
