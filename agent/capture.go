package agent

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

// outStream reads one of the kernel's output pipes for the kernel's whole life and hands what
// it reads to the capture of the execution that is running. Bytes read while no execution runs
// (a background process writing between executions) are dropped.
type outStream struct {
	mu     sync.Mutex
	target *capture
}

func (s *outStream) set(c *capture) {
	s.mu.Lock()
	s.target = c
	s.mu.Unlock()
}

// run reads r until it ends, then closes it. It is the stream's only reader.
func (s *outStream) run(r io.ReadCloser) {
	defer r.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			s.mu.Lock()
			t := s.target
			s.mu.Unlock()
			if t != nil {
				t.feed(buf[:n])
			}
		}
		if err != nil {
			return
		}
	}
}

// capture is one execution's view of one output stream. It passes bytes on until it sees the
// execution's nonce, holding back only a tail that could be the start of the nonce, so user
// output is delivered as written (never a fixed marker that code could print).
type capture struct {
	mu      sync.Mutex
	nonce   []byte
	held    []byte
	done    bool
	found   chan struct{}
	deliver func(p []byte) // called from the stream's reader goroutine

	// sync, when set, is the execution's display token: each one in the stream is cut out
	// and onSync is called (outside mu) before a byte after it is delivered (display.go).
	sync   []byte
	onSync func()
}

func newCapture(nonce string, deliver func([]byte)) *capture {
	return &capture{nonce: []byte(nonce), found: make(chan struct{}), deliver: deliver}
}

func (c *capture) feed(p []byte) {
	for p != nil {
		p = c.feedPart(p)
		if p != nil {
			c.onSync() // a display token was cut out: the display goes first
		}
	}
}

// feedPart delivers p up to the nonce or the first display token; it returns what follows
// the token (non-nil, maybe empty) when it stopped at one.
func (c *capture) feedPart(p []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return nil
	}
	data := p
	if len(c.held) > 0 {
		data = append(c.held, p...)
		c.held = nil
	}
	i := bytes.Index(data, c.nonce)
	if len(c.sync) > 0 {
		if j := bytes.Index(data, c.sync); j >= 0 && (i < 0 || j < i) {
			if j > 0 {
				c.deliver(data[:j])
			}
			return append([]byte{}, data[j+len(c.sync):]...)
		}
	}
	if i >= 0 {
		if i > 0 {
			c.deliver(data[:i])
		}
		c.done = true
		close(c.found)
		return nil
	}
	k := overlap(data, c.nonce)
	if len(c.sync) > 0 {
		k = max(k, overlap(data, c.sync))
	}
	if len(data)-k > 0 {
		c.deliver(data[:len(data)-k])
	}
	if k > 0 {
		c.held = append([]byte(nil), data[len(data)-k:]...)
	}
	return nil
}

// flushHeld delivers what was held back, for an execution that ended without its nonce (the
// kernel died).
func (c *capture) flushHeld() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done && len(c.held) > 0 {
		c.deliver(c.held)
		c.held = nil
	}
	c.done = true
}

// overlap returns the length of the longest suffix of data that is a proper prefix of nonce.
func overlap(data, nonce []byte) int {
	max := len(nonce) - 1
	if max > len(data) {
		max = len(data)
	}
	for k := max; k > 0; k-- {
		if bytes.Equal(data[len(data)-k:], nonce[:k]) {
			return k
		}
	}
	return 0
}

// limiter delivers at most limit bytes of a stream, then one marker, then drops the rest while
// counting it.
type limiter struct {
	limit   int64
	sent    int64
	dropped int64
	marked  bool // the marker was sent
	send    func(p []byte)
	marker  string
}

func (l *limiter) write(p []byte) {
	if room := l.limit - l.sent; room > 0 && len(p) > 0 {
		n := min(room, int64(len(p)))
		l.send(p[:n])
		l.sent += n
		p = p[n:]
	}
	if len(p) == 0 {
		return
	}
	// The first byte past the cap, whether it came in the write that reached the cap or later.
	l.dropped += int64(len(p))
	if !l.marked {
		l.marked = true
		l.send([]byte(l.marker))
	}
}

func capMarker(limit int64) string {
	return fmt.Sprintf("\n[runtimectl: output capped at %s for this execution; the rest is dropped; raise it with --max-output]\n", humanBytes(limit))
}

// headTail keeps the first and the last max/2 bytes of a stream, for the history record.
type headTail struct {
	max     int
	head    []byte
	tail    []byte // ring
	tailPos int
	total   int64
}

func (h *headTail) write(p []byte) {
	h.total += int64(len(p))
	half := h.max / 2
	if half == 0 {
		return // a cap too small to split keeps nothing (and the ring below would divide by 0)
	}
	if room := half - len(h.head); room > 0 {
		n := min(room, len(p))
		h.head = append(h.head, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 {
		if len(h.tail) < half {
			n := min(half-len(h.tail), len(p))
			h.tail = append(h.tail, p[:n]...)
			p = p[n:]
			continue
		}
		n := copy(h.tail[h.tailPos:], p)
		h.tailPos = (h.tailPos + n) % half
		p = p[n:]
	}
}

// text returns the kept bytes and how many were dropped in between.
func (h *headTail) text() (string, int64) {
	if h.total <= int64(len(h.head)+len(h.tail)) {
		return string(h.head) + string(h.tail), 0
	}
	tail := append(append([]byte(nil), h.tail[h.tailPos:]...), h.tail[:h.tailPos]...)
	dropped := h.total - int64(len(h.head)+len(tail))
	return fmt.Sprintf("%s\n[... %d bytes of output omitted ...]\n%s", h.head, dropped, tail), dropped
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// ended reports whether the nonce has been seen.
func (c *capture) ended() bool {
	select {
	case <-c.found:
		return true
	default:
		return false
	}
}
