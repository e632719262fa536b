package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The fd-5 snapshot stream of the kernel protocol (docs/kernel-protocol.md):
// a sequence of chunks, each an ASCII decimal byte count, "\n", then exactly
// that many bytes. Data chunks are followed by the terminator chunk "0\n",
// then by one manifest chunk holding a JSON [KernelManifest].

// DefaultMaxChunk is the bound on one data chunk that CopyData uses when
// given maxChunk <= 0: 1 GiB.
const DefaultMaxChunk = 1 << 30

// maxHeaderDigits bounds a chunk header: enough for any int64.
const maxHeaderDigits = 19

// readHeader reads one chunk header, "<decimal>\n", and returns its value.
// Empty, non-digit (signs and spaces included), over-long headers and values
// over max are errors; io.ErrUnexpectedEOF when the stream ends inside or
// before the header.
func readHeader(r *bufio.Reader, max int64) (int64, error) {
	var digits [maxHeaderDigits]byte
	n := 0
	for {
		c, err := r.ReadByte()
		if errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("chunk header: %w", io.ErrUnexpectedEOF)
		}
		if err != nil {
			return 0, fmt.Errorf("chunk header: %w", err)
		}
		if c == '\n' {
			break
		}
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("chunk header %q: not a decimal byte count", string(digits[:n])+string(rune(c)))
		}
		if n == len(digits) {
			return 0, fmt.Errorf("chunk header %q...: longer than %d digits", string(digits[:n]), maxHeaderDigits)
		}
		digits[n] = c
		n++
	}
	if n == 0 {
		return 0, errors.New("chunk header is empty")
	}
	v, err := strconv.ParseInt(string(digits[:n]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("chunk header %q: %w", string(digits[:n]), err)
	}
	if v > max {
		return 0, fmt.Errorf("chunk of %d bytes is larger than the %d-byte limit", v, max)
	}
	return v, nil
}

// CopyData copies data chunks ("<n>\n" + n bytes) from r to dst until the
// terminator chunk "0\n", and returns the number of bytes written to dst.
// maxChunk bounds a single chunk header value (<= 0 means
// [DefaultMaxChunk]): anything larger, a non-digit or an empty header is an
// error, as is the end of r before the terminator (io.ErrUnexpectedEOF).
//
// When dst fails, CopyData reads on to the terminator, discarding the data,
// so that the manifest chunk can still be read, and then returns dst's
// error. After any other error the stream is out of step and must be
// drained or dropped.
func CopyData(dst io.Writer, r *bufio.Reader, maxChunk int64) (int64, error) {
	if maxChunk <= 0 {
		maxChunk = DefaultMaxChunk
	}
	w := &stickyWriter{w: dst}
	// The data of successive chunks is gathered into writes of copyBuf bytes: a pipe gives at
	// most its capacity (64 KiB) a read, and a file takes a large write for the cost of a small.
	// The buffer starts at 64 KiB (most snapshots are small: one is taken after nearly every
	// execution) and doubles each time it fills, up to copyBuf.
	buf := make([]byte, 64<<10)
	fill := 0
	flush := func() int64 {
		if fill > 0 {
			_, _ = w.Write(buf[:fill])
			if fill == len(buf) && len(buf) < copyBuf {
				buf = make([]byte, min(2*len(buf), copyBuf))
			}
			fill = 0
		}
		return w.n
	}
	for {
		n, err := readHeader(r, maxChunk)
		if err != nil {
			return flush(), fmt.Errorf("snapshot stream: %w", err)
		}
		if n == 0 {
			flush()
			if w.err != nil {
				return w.n, fmt.Errorf("snapshot stream: write data: %w", w.err)
			}
			return w.n, nil
		}
		for got := int64(0); got < n; {
			k, err := r.Read(buf[fill:min(int64(len(buf)), int64(fill)+n-got)])
			fill += k
			got += int64(k)
			if fill == len(buf) {
				flush()
			}
			if errors.Is(err, io.EOF) && got < n {
				return flush(), fmt.Errorf("snapshot stream: chunk of %d bytes ended after %d: %w", n, got, io.ErrUnexpectedEOF)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return flush(), fmt.Errorf("snapshot stream: %w", err)
			}
		}
	}
}

// copyBuf is the size of CopyData's writes to its destination.
const copyBuf = 1 << 20

// stickyWriter passes writes on until the first error, then swallows them,
// so that a failing destination does not stop the reading.
type stickyWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (s *stickyWriter) Write(p []byte) (int, error) {
	if s.err == nil {
		n, err := s.w.Write(p)
		s.n += int64(n)
		if err == nil && n < len(p) {
			err = io.ErrShortWrite
		}
		s.err = err
	}
	return len(p), nil
}

// ReadChunk reads one chunk (for the manifest) and returns its bytes. A
// chunk larger than max bytes is an error, and so is the end of r before
// the chunk is whole.
func ReadChunk(r *bufio.Reader, max int) ([]byte, error) {
	n, err := readHeader(r, int64(max))
	if err != nil {
		return nil, fmt.Errorf("snapshot stream: %w", err)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("snapshot stream: chunk of %d bytes: %w", n, err)
	}
	return b, nil
}

// WriteChunk writes p as one chunk. An empty p writes the terminator chunk
// "0\n". It is what a driver's snapshot writer does, for Go drivers and
// tests.
func WriteChunk(w io.Writer, p []byte) error {
	hdr := strconv.AppendInt(nil, int64(len(p)), 10)
	hdr = append(hdr, '\n')
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("write chunk: %w", err)
	}
	if len(p) == 0 {
		return nil
	}
	if _, err := w.Write(p); err != nil {
		return fmt.Errorf("write chunk: %w", err)
	}
	return nil
}

// KernelManifest is the manifest chunk a driver sends after the data.
type KernelManifest struct {
	// ID is the id of the snapshot request ("r18").
	ID string `json:"id"`
	// OK is false when the snapshot failed; the agent discards the data.
	OK bool `json:"ok"`
	// Error says why it failed; null when OK.
	Error *string `json:"error"`
	// Retry asks the agent to try the snapshot again later.
	Retry bool `json:"retry,omitempty"`
	// Format names the data's format ("python-pickle5", "bash-script").
	Format string `json:"format"`
	// Kept and Skipped are the names saved and left out; never nil after
	// ParseKernelManifest.
	Kept    []string  `json:"kept"`
	Skipped []Skipped `json:"skipped"`
	// Info is what the driver wants to say about itself (interpreter,
	// pickler).
	Info map[string]string `json:"info"`
}

// ParseKernelManifest reads a driver's manifest chunk: one JSON object and
// nothing after it, with an "id" and an "ok" field; when ok, a format; every
// skipped entry with a name. Unknown fields are allowed (drivers may say
// more). Null kept or skipped lists become empty ones. It never panics.
func ParseKernelManifest(b []byte) (KernelManifest, error) {
	var aux struct {
		KernelManifest
		OK *bool `json:"ok"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&aux); err != nil {
		return KernelManifest{}, fmt.Errorf("parse kernel manifest: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return KernelManifest{}, errors.New("parse kernel manifest: data after the JSON object")
	}
	k := aux.KernelManifest
	switch {
	case k.ID == "":
		return KernelManifest{}, errors.New(`parse kernel manifest: no "id"`)
	case aux.OK == nil:
		return KernelManifest{}, errors.New(`parse kernel manifest: no "ok"`)
	}
	k.OK = *aux.OK
	if k.OK && k.Format == "" {
		return KernelManifest{}, errors.New(`parse kernel manifest: "ok" without a "format"`)
	}
	for i, s := range k.Skipped {
		if s.Name == "" {
			return KernelManifest{}, fmt.Errorf("parse kernel manifest: skipped entry %d has no name", i)
		}
	}
	if k.Kept == nil {
		k.Kept = []string{}
	}
	if k.Skipped == nil {
		k.Skipped = []Skipped{}
	}
	return k, nil
}
