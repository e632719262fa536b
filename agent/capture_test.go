package agent

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sink records what a capture or limiter delivers, one call at a time.
type sink struct {
	chunks [][]byte
}

func (s *sink) deliver(p []byte) {
	s.chunks = append(s.chunks, append([]byte(nil), p...)) // p may be the reader's buffer
}

func (s *sink) String() string { return string(bytes.Join(s.chunks, nil)) }

func found(c *capture) bool {
	select {
	case <-c.found:
		return true
	default:
		return false
	}
}

// feedAll feeds chunks and checks what must hold after every feed: nothing empty is delivered,
// what is held back is shorter than the nonce, and (until the nonce) delivered + held is all
// that was fed.
func feedAll(t *testing.T, c *capture, s *sink, chunks ...[]byte) {
	t.Helper()
	var fed []byte
	for _, p := range chunks {
		c.feed(p)
		fed = append(fed, p...)
		for _, d := range s.chunks {
			require.NotEmpty(t, d, "empty delivery")
		}
		require.Less(t, len(c.held), max(len(c.nonce), 1), "held back more than a nonce prefix")
		if !c.done {
			require.Equal(t, string(fed), s.String()+string(c.held), "bytes lost or invented before the nonce")
		}
	}
}

const testNonce = "0123456789abcdef0123456789abcdef" // the shape of newNonce's

func TestCaptureNonceAtEveryBoundary(t *testing.T) {
	const before = "line one\nline two, no newline"
	stream := []byte(before + testNonce + "after the nonce: the kernel's own bytes")
	for i := 0; i <= len(stream); i++ {
		t.Run(fmt.Sprint("split at ", i), func(t *testing.T) {
			var s sink
			c := newCapture(testNonce, s.deliver)
			feedAll(t, c, &s, stream[:i], stream[i:])
			assert.True(t, found(c))
			assert.Equal(t, before, s.String())
		})
	}
}

// Every way to cut the nonce into three pieces, with bytes around it.
func TestCaptureNonceInThreePieces(t *testing.T) {
	const before = "out"
	stream := []byte(before + testNonce + "tail")
	start, end := len(before), len(before)+len(testNonce)
	for i := start; i <= end; i++ {
		for j := i; j <= end; j++ {
			var s sink
			c := newCapture(testNonce, s.deliver)
			feedAll(t, c, &s, stream[:i], stream[i:j], stream[j:])
			require.True(t, found(c), "cuts %d,%d", i, j)
			require.Equal(t, before, s.String(), "cuts %d,%d", i, j)
		}
	}
}

func TestCaptureByteAtATime(t *testing.T) {
	stream := []byte("x" + testNonce[:31] + "y" + testNonce + "z")
	var s sink
	c := newCapture(testNonce, s.deliver)
	var chunks [][]byte
	for i := range stream {
		chunks = append(chunks, stream[i:i+1])
	}
	feedAll(t, c, &s, chunks...)
	assert.True(t, found(c))
	assert.Equal(t, "x"+testNonce[:31]+"y", s.String())
}

// Chunks that end in what looks like the start of the nonce but is not: the bytes held back
// are delivered, in order, once the next chunk shows they were user output.
func TestCaptureNonceLikePrefixes(t *testing.T) {
	tests := []struct {
		name   string
		nonce  string
		chunks []string
		want   string // delivered in all
		held   string // held back at the end (no nonce seen)
		found  bool
	}{
		{"prefix then other bytes", testNonce, []string{"abc0123", "X"}, "abc0123X", "", false},
		{"prefix then a newline", testNonce, []string{"0123456789abcdef0123456789abcde", "\n"}, testNonce[:31] + "\n", "", false},
		{"whole nonce but one byte, twice", testNonce, []string{testNonce[:31], testNonce[:31]}, testNonce[:31], testNonce[:31], false},
		{"prefix that restarts the nonce", testNonce, []string{"01230", "123456789abcdef0123456789abcdef!"}, "0123", "", true},
		{"prefix, then the nonce in the next chunk", testNonce, []string{"ab01", testNonce + "rest"}, "ab01", "", true},
		{"self-overlapping nonce", "aab", []string{"aa", "aab"}, "aa", "", true},
		{"self-overlapping nonce across three", "abab", []string{"xab", "a", "bab"}, "x", "", true},
		{"a false start inside the held bytes", "abac", []string{"ab", "ab", "ac"}, "ab", "", true},
		{"false starts one byte at a time", "aab", []string{"a", "a", "a", "a", "b"}, "aa", "", true},
		{"self-overlapping, not there", "abab", []string{"aba", "aba", "c"}, "abaabac", "", false},
		{"one-byte nonce", "\x00", []string{"ab", "c\x00d"}, "abc", "", true},
		{"only a prefix at the end", testNonce, []string{"done", "\n0123"}, "done\n", "0123", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sink
			c := newCapture(tt.nonce, s.deliver)
			var chunks [][]byte
			for _, ch := range tt.chunks {
				chunks = append(chunks, []byte(ch))
			}
			feedAll(t, c, &s, chunks...)
			assert.Equal(t, tt.want, s.String())
			assert.Equal(t, tt.held, string(c.held))
			assert.Equal(t, tt.found, found(c))
		})
	}
}

func TestCaptureDropsAfterNonce(t *testing.T) {
	var s sink
	c := newCapture(testNonce, s.deliver)
	c.feed([]byte("a" + testNonce + "same chunk"))
	c.feed([]byte("a later chunk"))
	c.feed([]byte(testNonce))
	assert.Equal(t, "a", s.String())
	assert.True(t, found(c))
	c.flushHeld() // a nonce already seen: nothing to flush, and no double close of found
	assert.Equal(t, "a", s.String())
}

func TestCaptureNonceFirst(t *testing.T) {
	var s sink
	c := newCapture(testNonce, s.deliver)
	c.feed([]byte(testNonce))
	assert.True(t, found(c))
	assert.Empty(t, s.chunks, "no empty delivery for no output")
}

// The stream's reader reuses its buffer: what is held back must be a copy.
func TestCaptureHeldIsACopy(t *testing.T) {
	var s sink
	c := newCapture(testNonce, s.deliver)
	buf := []byte("out" + testNonce[:10])
	c.feed(buf)
	copy(buf, "XXXXXXXXXXXXX")
	c.feed([]byte("!"))
	assert.Equal(t, "out"+testNonce[:10]+"!", s.String())
}

func TestCaptureFlushHeld(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   string
	}{
		{"held prefix delivered", []string{"killed mid-print ", testNonce[:5]}, "killed mid-print " + testNonce[:5]},
		{"nothing held", []string{"plain"}, "plain"},
		{"nothing at all", nil, ""},
		{"nonce seen", []string{"x" + testNonce[:3], testNonce[3:] + "y"}, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sink
			c := newCapture(testNonce, s.deliver)
			for _, ch := range tt.chunks {
				c.feed([]byte(ch))
			}
			c.flushHeld()
			assert.Equal(t, tt.want, s.String())
			assert.Nil(t, c.held)
			n := len(s.chunks)
			c.feed([]byte("after the end"))
			c.flushHeld()
			assert.Len(t, s.chunks, n, "nothing is delivered after flushHeld")
		})
	}
}

func TestOutStream(t *testing.T) {
	var st outStream
	var s sink
	st.run(io.NopCloser(strings.NewReader("nobody listens"))) // no target: dropped
	c := newCapture(testNonce, s.deliver)
	st.set(c)
	st.run(io.NopCloser(io.MultiReader(strings.NewReader("hello "), strings.NewReader("world"+testNonce+"junk"))))
	assert.Equal(t, "hello world", s.String())
	assert.True(t, found(c))
	st.set(nil)
	st.run(io.NopCloser(strings.NewReader("between executions")))
	assert.Equal(t, "hello world", s.String())
}

// FuzzCapture inserts the nonce at a random point of random data, feeds the stream in random
// chunks, and checks that what is delivered is exactly the stream before the nonce's first
// occurrence. Without the nonce, flushHeld delivers all of it.
func FuzzCapture(f *testing.F) {
	f.Add([]byte("hello\n"), uint(6), uint64(1), testNonce, true)
	f.Add([]byte("0123456789abcdef0123"), uint(20), uint64(2), testNonce, true)
	f.Add([]byte("abababab"), uint(3), uint64(3), "abab", true)
	f.Add([]byte("aaaaaaa"), uint(0), uint64(4), "aab", false)
	f.Add([]byte{}, uint(0), uint64(5), "", true)
	f.Fuzz(func(t *testing.T, data []byte, pos uint, seed uint64, nonce string, insert bool) {
		if nonce == "" {
			nonce = testNonce
		}
		stream := data
		if insert {
			p := int(pos % uint(len(data)+1))
			stream = append(append(append([]byte(nil), data[:p]...), nonce...), data[p:]...)
		}
		want, wantFound := stream, false
		if i := bytes.Index(stream, []byte(nonce)); i >= 0 {
			want, wantFound = stream[:i], true
		}

		var s sink
		c := newCapture(nonce, s.deliver)
		rng := rand.New(rand.NewPCG(seed, seed>>32))
		buf := make([]byte, 0, len(stream))
		for rest := stream; ; {
			n := 0
			if len(rest) > 0 {
				n = rng.IntN(min(len(rest), 2*len(nonce)+3) + 1) // often shorter than the nonce, sometimes 0
			}
			// Feed through one reused buffer, as outStream does.
			buf = append(buf[:0], rest[:n]...)
			c.feed(buf)
			clear(buf)
			rest = rest[n:]
			for _, d := range s.chunks {
				if len(d) == 0 {
					t.Fatal("empty delivery")
				}
			}
			if got := s.String(); !strings.HasPrefix(string(want), got) {
				t.Fatalf("delivered %q, not a prefix of %q", got, want)
			}
			if len(c.held) >= len(nonce) {
				t.Fatalf("holding %d bytes for a nonce of %d", len(c.held), len(nonce))
			}
			if len(rest) == 0 {
				break
			}
		}
		if found(c) != wantFound {
			t.Fatalf("found %v, want %v", found(c), wantFound)
		}
		c.flushHeld()
		if got := s.String(); got != string(want) {
			t.Fatalf("delivered %q, want %q", got, want)
		}
	})
}

func TestLimiter(t *testing.T) {
	const marker = "<capped>"
	tests := []struct {
		name        string
		limit       int64
		writes      []string
		want        string
		wantDropped int64
	}{
		{"under the cap", 10, []string{"abc", "def"}, "abcdef", 0},
		{"exactly at the cap in one write", 10, []string{"0123456789"}, "0123456789", 0},
		{"exactly at the cap in two writes", 10, []string{"01234", "56789"}, "0123456789", 0},
		{"one over in one write", 10, []string{"0123456789X"}, "0123456789" + marker, 1},
		{"over across writes", 10, []string{"0123", "456789XY"}, "0123456789" + marker, 2},
		{"at the cap, then more", 10, []string{"0123456789", "X"}, "0123456789" + marker, 1},
		{"at the cap, then more and more", 10, []string{"01234", "56789", "X", "YZ", ""}, "0123456789" + marker, 3},
		{"far over, marker once", 4, []string{"abcdefgh", "ijkl", "mnop"}, "abcd" + marker, 12},
		{"empty writes at the cap", 3, []string{"abc", "", ""}, "abc", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s sink
			l := limiter{limit: tt.limit, send: s.deliver, marker: marker}
			for _, w := range tt.writes {
				l.write([]byte(w))
			}
			assert.Equal(t, tt.want, s.String())
			assert.LessOrEqual(t, strings.Count(s.String(), marker), 1, "the marker at most once")
			assert.Equal(t, tt.wantDropped, l.dropped)
			assert.Equal(t, min(tt.limit, int64(len(strings.Join(tt.writes, "")))), l.sent)
		})
	}
}

func TestCapMarker(t *testing.T) {
	m := capMarker(4 << 20)
	assert.Contains(t, m, "4.0 MiB")
	assert.Contains(t, m, "--max-output")
	assert.True(t, strings.HasPrefix(m, "\n") && strings.HasSuffix(m, "\n"), "on lines of its own")
}

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{1 << 20, "1.0 MiB"},
		{4 << 20, "4.0 MiB"},
		{1 << 30, "1 GiB"},
		{3 << 30, "3 GiB"},
		{1<<30 + 1<<29, "1536.0 MiB"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, humanBytes(tt.n), "humanBytes(%d)", tt.n)
	}
}

// headTailModel is what headTail must produce, computed the simple way.
func headTailModel(limit int, all []byte) (string, int64) {
	half := limit / 2
	if len(all) <= 2*half {
		return string(all), 0
	}
	dropped := int64(len(all) - 2*half)
	return fmt.Sprintf("%s\n[... %d bytes of output omitted ...]\n%s", all[:half], dropped, all[len(all)-half:]), dropped
}

func TestHeadTail(t *testing.T) {
	digits := func(n int) string {
		var b strings.Builder
		for i := range n {
			b.WriteByte('0' + byte(i%10))
		}
		return b.String()
	}
	tests := []struct {
		name        string
		max         int
		writes      []string
		want        string
		wantDropped int64
	}{
		{"nothing", 10, nil, "", 0},
		{"below half", 10, []string{"abc"}, "abc", 0},
		{"exactly half", 10, []string{"abcde"}, "abcde", 0},
		{"below the cap", 10, []string{"abcdefgh"}, "abcdefgh", 0},
		{"at the cap", 10, []string{"abcd", "efghij"}, "abcdefghij", 0},
		{"one over", 10, []string{"0123456789X"}, "01234\n[... 1 bytes of output omitted ...]\n6789X", 1},
		{"tail wraps exactly once", 10, []string{digits(15)}, "01234\n[... 5 bytes of output omitted ...]\n01234", 5},
		{"tail wraps mid-ring", 10, []string{digits(13)}, "01234\n[... 3 bytes of output omitted ...]\n89012", 3},
		{"far above in small writes", 10, strings.Split(digits(1003), ""), "01234\n[... 993 bytes of output omitted ...]\n89012", 993},
		{"far above in one write", 10, []string{digits(1003)}, "01234\n[... 993 bytes of output omitted ...]\n89012", 993},
		{"odd max keeps max-1", 5, []string{"abcdef"}, "ab\n[... 2 bytes of output omitted ...]\nef", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := headTail{max: tt.max}
			for _, w := range tt.writes {
				h.write([]byte(w))
			}
			got, dropped := h.text()
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantDropped, dropped)
			assert.Equal(t, int64(len(strings.Join(tt.writes, ""))), h.total)
			assert.LessOrEqual(t, len(h.head)+len(h.tail), tt.max, "never keeps more than max")
		})
	}
}

// A cap too small to split keeps nothing but still counts (and must not loop or divide by 0).
func TestHeadTailTinyMax(t *testing.T) {
	for _, limit := range []int{0, 1} {
		h := headTail{max: limit}
		h.write([]byte("abc"))
		h.write([]byte("d"))
		got, dropped := h.text()
		assert.Equal(t, int64(4), dropped, "max %d", limit)
		assert.Contains(t, got, "4 bytes of output omitted", "max %d", limit)
	}
}

// Random writes against the model, for caps and totals around every boundary.
func TestHeadTailRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		limit := 2 + rng.IntN(40)
		total := rng.IntN(5 * limit)
		all := make([]byte, total)
		for i := range all {
			all[i] = 'a' + byte(rng.IntN(26))
		}
		h := headTail{max: limit}
		for rest := all; len(rest) > 0; {
			n := rng.IntN(len(rest) + 1)
			h.write(rest[:n])
			rest = rest[n:]
		}
		got, dropped := h.text()
		want, wantDropped := headTailModel(limit, all)
		require.Equal(t, want, got, "max %d total %d", limit, total)
		require.Equal(t, wantDropped, dropped, "max %d total %d", limit, total)
	}
}
