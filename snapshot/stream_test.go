package snapshot

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const kernelManifestOK = `{"id":"r18","ok":true,"error":null,"format":"python-pickle5",` +
	`"kept":["a","df","f"],"skipped":[{"name":"fh","type":"_io.TextIOWrapper","reason":"cannot pickle '_io.TextIOWrapper' object"}],` +
	`"info":{"interpreter":"Python 3.11.2","pickler":"pickle protocol 5 + dill 0.3.6"}}`

// stream builds an fd-5 stream: data chunks, the terminator, the manifest.
func stream(t *testing.T, manifest string, chunks ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, c := range chunks {
		require.NoError(t, WriteChunk(&b, []byte(c)))
	}
	require.NoError(t, WriteChunk(&b, nil))
	require.NoError(t, WriteChunk(&b, []byte(manifest)))
	return b.Bytes()
}

func TestStreamRoundTrip(t *testing.T) {
	big := strings.Repeat("0123456789", 100_000) // larger than bufio's buffer
	tests := []struct {
		name   string
		chunks []string
	}{
		{"no data", nil},
		{"one chunk", []string{"hello"}},
		{"several chunks", []string{"a", "bc", "\n0\n", "def"}},
		{"binary", []string{"\x00\xff\n\r", "10\n"}},
		{"large", []string{big, big[:7]}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReader(bytes.NewReader(stream(t, kernelManifestOK, tt.chunks...)))
			var dst bytes.Buffer
			n, err := CopyData(&dst, r, 1<<30)
			require.NoError(t, err)
			want := strings.Join(tt.chunks, "")
			assert.Equal(t, int64(len(want)), n)
			assert.Equal(t, want, dst.String())

			b, err := ReadChunk(r, 1<<20)
			require.NoError(t, err)
			assert.Equal(t, kernelManifestOK, string(b))
			_, err = r.ReadByte()
			assert.ErrorIs(t, err, io.EOF, "nothing left")

			k, err := ParseKernelManifest(b)
			require.NoError(t, err)
			assert.True(t, k.OK)
			assert.Equal(t, []string{"a", "df", "f"}, k.Kept)
		})
	}
}

func TestCopyDataMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int64
		msg  string
		n    int64
	}{
		{"empty stream", "", 100, "unexpected EOF", 0},
		{"empty header", "\n", 100, "empty", 0},
		{"letters", "abc\nabc0\n", 100, "not a decimal", 0},
		{"negative", "-1\n", 100, "not a decimal", 0},
		{"plus sign", "+1\nx0\n", 100, "not a decimal", 0},
		{"leading space", " 1\nx0\n", 100, "not a decimal", 0},
		{"trailing space", "1 \nx0\n", 100, "not a decimal", 0},
		{"CRLF", "1\r\nx0\r\n", 100, "not a decimal", 0},
		{"hex", "0x10\n", 100, "not a decimal", 0},
		{"over the limit", "101\n", 100, "larger than the 100-byte limit", 0},
		{"way over int64", "99999999999999999999\n", 100, "longer than 19 digits", 0},
		{"int64 overflow", "9999999999999999999\n", 1 << 62, "out of range", 0},
		{"short body", "5\nabc", 100, "unexpected EOF", 3},
		{"no terminator", "3\nabc", 100, "unexpected EOF", 3},
		{"header cut", "3\nabc1", 100, "unexpected EOF", 3},
		{"bad second header", "3\nabcX\n", 100, "not a decimal", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dst bytes.Buffer
			n, err := CopyData(&dst, bufio.NewReader(strings.NewReader(tt.in)), tt.max)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.msg)
			assert.Equal(t, tt.n, n)
			assert.Equal(t, int64(dst.Len()), n)
		})
	}
}

func TestCopyDataDefaultMax(t *testing.T) {
	_, err := CopyData(io.Discard, bufio.NewReader(strings.NewReader("1073741825\n")), 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "larger than the 1073741824-byte limit")
	n, err := CopyData(io.Discard, bufio.NewReader(strings.NewReader("2\nab00\n")), -1)
	require.NoError(t, err, "leading zeros are still a number")
	assert.Equal(t, int64(2), n)
}

type failAfter struct {
	left int
	n    int
}

var errDiskFull = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.left {
		f.n += f.left
		n := f.left
		f.left = 0
		return n, errDiskFull
	}
	f.left -= len(p)
	f.n += len(p)
	return len(p), nil
}

func TestCopyDataDestinationFails(t *testing.T) {
	r := bufio.NewReader(bytes.NewReader(stream(t, kernelManifestOK, "abcdef", "ghijkl", "mno")))
	dst := &failAfter{left: 8}
	n, err := CopyData(dst, r, 100)
	require.ErrorIs(t, err, errDiskFull)
	assert.Equal(t, int64(8), n)
	// The stream is still in step: the manifest comes next.
	b, err := ReadChunk(r, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, kernelManifestOK, string(b))
}

type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return len(p) / 2, nil }

func TestCopyDataShortWrite(t *testing.T) {
	r := bufio.NewReader(bytes.NewReader(stream(t, "{}", "abcd")))
	_, err := CopyData(shortWriter{}, r, 100)
	require.ErrorIs(t, err, io.ErrShortWrite)
}

func TestReadChunk(t *testing.T) {
	b, err := ReadChunk(bufio.NewReader(strings.NewReader("0\n")), 10)
	require.NoError(t, err)
	assert.Empty(t, b)

	tests := []struct {
		name, in, msg string
		max           int
	}{
		{"over max", "11\n01234567890", "larger than the 10-byte limit", 10},
		{"short", "5\nab", "unexpected EOF", 10},
		{"no body", "5\n", "unexpected EOF", 10},
		{"nothing", "", "unexpected EOF", 10},
		{"garbage", "{\"id\":1}", "not a decimal", 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadChunk(bufio.NewReader(strings.NewReader(tt.in)), tt.max)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errDiskFull }

func TestWriteChunkError(t *testing.T) {
	require.ErrorIs(t, WriteChunk(errWriter{}, []byte("x")), errDiskFull)
}

func TestParseKernelManifest(t *testing.T) {
	k, err := ParseKernelManifest([]byte(kernelManifestOK))
	require.NoError(t, err)
	assert.Equal(t, KernelManifest{
		ID: "r18", OK: true, Format: "python-pickle5",
		Kept:    []string{"a", "df", "f"},
		Skipped: []Skipped{{Name: "fh", Type: "_io.TextIOWrapper", Reason: "cannot pickle '_io.TextIOWrapper' object"}},
		Info:    map[string]string{"interpreter": "Python 3.11.2", "pickler": "pickle protocol 5 + dill 0.3.6"},
	}, k)

	k, err = ParseKernelManifest([]byte(`{"id":"r19","ok":false,"error":"pickler timed out","retry":true,"format":"","kept":null,"skipped":null,"info":null,"new_field":1}`))
	require.NoError(t, err)
	assert.False(t, k.OK)
	require.NotNil(t, k.Error)
	assert.Equal(t, "pickler timed out", *k.Error)
	assert.True(t, k.Retry)
	assert.Equal(t, []string{}, k.Kept)
	assert.Equal(t, []Skipped{}, k.Skipped)

	bad := []struct{ name, in, msg string }{
		{"empty", ``, "EOF"},
		{"not an object", `"ok"`, "cannot unmarshal"},
		{"no id", `{"ok":true,"format":"f"}`, `no "id"`},
		{"no ok", `{"id":"r1","format":"f"}`, `no "ok"`},
		{"null ok", `{"id":"r1","ok":null,"format":"f"}`, `no "ok"`},
		{"ok without format", `{"id":"r1","ok":true}`, "format"},
		{"skipped without name", `{"id":"r1","ok":true,"format":"f","skipped":[{"type":"t"}]}`, "no name"},
		{"wrong type", `{"id":"r1","ok":"yes"}`, "cannot unmarshal"},
		{"trailing", kernelManifestOK + `x`, "data after"},
		{"two objects", kernelManifestOK + kernelManifestOK, "data after"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseKernelManifest([]byte(tt.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}
