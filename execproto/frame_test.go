package execproto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// header builds a raw frame header, for frames that AppendFrame would never write.
func header(n uint32, t byte, id uint32) []byte {
	var h [HeaderSize]byte
	binary.BigEndian.PutUint32(h[0:4], n)
	h[4] = t
	binary.BigEndian.PutUint32(h[5:9], id)
	return h[:]
}

func TestAppendFrameLayout(t *testing.T) {
	b := AppendFrame([]byte("x"), Frame{Type: TypeStdout, ID: 0x01020304, Payload: []byte("hi")})
	assert.Equal(t, []byte{'x', 0, 0, 0, 2, byte(TypeStdout), 1, 2, 3, 4, 'h', 'i'}, b,
		"appended after what was there: length, type, id (big-endian), payload")
}

func TestFrameRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		f    Frame
	}{
		{"empty interrupt", Frame{Type: TypeInterrupt, ID: 7}},
		{"hello json", Frame{Type: TypeHello, Payload: []byte(`{"protocol":1}`)}},
		{"binary stdout", Frame{Type: TypeStdout, ID: 1, Payload: []byte{0, 0xff, 0, 0, 0, 9, 3}}},
		{"largest id", Frame{Type: TypeResult, ID: ^uint32(0), Payload: []byte("{}")}},
		{"every type byte", Frame{Type: TypeNotice, ID: 3, Payload: bytes.Repeat([]byte{byte(TypeNotice)}, 100)}},
		{"max payload", Frame{Type: TypeStderr, ID: 2, Payload: make([]byte, MaxPayload)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, WriteFrame(&buf, tt.f))
			assert.Equal(t, HeaderSize+len(tt.f.Payload), buf.Len())
			got, err := ReadFrame(&buf)
			require.NoError(t, err)
			assert.Equal(t, tt.f.Type, got.Type)
			assert.Equal(t, tt.f.ID, got.ID)
			assert.Equal(t, len(tt.f.Payload), len(got.Payload))
			assert.True(t, bytes.Equal(tt.f.Payload, got.Payload), "payload")
			_, err = ReadFrame(&buf)
			assert.ErrorIs(t, err, io.EOF, "a clean end between frames is io.EOF")
		})
	}
}

func TestReadFrameSequence(t *testing.T) {
	in := []Frame{
		{Type: TypeHello, Payload: []byte(`{"protocol":1}`)},
		{Type: TypeStdout, ID: 1, Payload: []byte("a")},
		{Type: TypeStderr, ID: 2, Payload: []byte("b")},
		{Type: TypeResult, ID: 1, Payload: []byte(`{}`)},
	}
	var wire []byte
	for _, f := range in {
		wire = AppendFrame(wire, f)
	}
	// One byte at a time: ReadFrame must not depend on how the stream is chunked.
	r := &oneByteReader{r: bytes.NewReader(wire)}
	for i, want := range in {
		got, err := ReadFrame(r)
		require.NoError(t, err, "frame %d", i)
		assert.Equal(t, want, got, "frame %d", i)
	}
	_, err := ReadFrame(r)
	assert.Equal(t, io.EOF, err)
}

type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

func TestReadFrameErrors(t *testing.T) {
	whole := AppendFrame(nil, Frame{Type: TypeStdout, ID: 1, Payload: []byte("hello")})
	tests := []struct {
		name    string
		in      []byte
		wantIs  error
		wantMsg string
	}{
		{"empty stream", nil, io.EOF, ""},
		{"torn header", whole[:4], io.ErrUnexpectedEOF, ""},
		{"header only", whole[:HeaderSize], io.ErrUnexpectedEOF, "read stdout frame"},
		{"torn payload", whole[:len(whole)-1], io.ErrUnexpectedEOF, "read stdout frame"},
		{"type zero", header(0, 0, 1), ErrBadFrame, "unknown type 0"},
		{"type past the last", header(0, byte(TypeDisplay)+1, 1), ErrBadFrame, "unknown type 11"},
		{"type 255", header(0, 255, 1), ErrBadFrame, "unknown type 255"},
		{"one byte over max", header(MaxPayload+1, byte(TypeStdout), 1), ErrFrameTooLarge, "16777217 bytes"},
		{"length 4 GiB", header(^uint32(0), byte(TypeResult), 1), ErrFrameTooLarge, "read result frame"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(tt.in))
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.wantIs)
			if tt.wantMsg != "" {
				assert.Contains(t, err.Error(), tt.wantMsg)
			}
		})
	}
}

// A header announcing a huge payload must be refused before anything is allocated or read.
func TestReadFrameTooLargeReadsNoPayload(t *testing.T) {
	r := &countingReader{r: io.MultiReader(bytes.NewReader(header(MaxPayload+1, byte(TypeStdout), 1)), zeros{})}
	_, err := ReadFrame(r)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	assert.Equal(t, int64(HeaderSize), r.n, "only the header is read")
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestWriteFrameTooLarge(t *testing.T) {
	var buf bytes.Buffer
	err := WriteFrame(&buf, Frame{Type: TypeStdout, ID: 1, Payload: make([]byte, MaxPayload+1)})
	require.ErrorIs(t, err, ErrFrameTooLarge)
	assert.Contains(t, err.Error(), "write stdout frame")
	assert.Zero(t, buf.Len(), "nothing written")
}

// WriteFrame promises one Write per frame, so that serialised writers never interleave.
func TestWriteFrameSingleWrite(t *testing.T) {
	w := &writeCounter{}
	require.NoError(t, WriteFrame(w, Frame{Type: TypeStderr, ID: 9, Payload: []byte("abc")}))
	assert.Equal(t, 1, w.calls)
	assert.Equal(t, AppendFrame(nil, Frame{Type: TypeStderr, ID: 9, Payload: []byte("abc")}), w.buf.Bytes())

	werr := errors.New("disk on fire")
	err := WriteFrame(&failWriter{err: werr}, Frame{Type: TypeStdout})
	assert.ErrorIs(t, err, werr)
}

type writeCounter struct {
	calls int
	buf   bytes.Buffer
}

func (w *writeCounter) Write(p []byte) (int, error) { w.calls++; return w.buf.Write(p) }

type failWriter struct{ err error }

func (f *failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestTypeString(t *testing.T) {
	names := map[Type]string{
		TypeHello: "hello", TypeRequest: "request", TypeStdout: "stdout", TypeStderr: "stderr",
		TypeResult: "result", TypeReply: "reply", TypeError: "error", TypeInterrupt: "interrupt",
		TypeNotice: "notice", 0: "type(0)", 200: "type(200)",
	}
	for typ, want := range names {
		assert.Equal(t, want, typ.String())
		assert.Equal(t, !strings.HasPrefix(want, "type("), typ.valid(), "valid(%d)", typ)
	}
}
