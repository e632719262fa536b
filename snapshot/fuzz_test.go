package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseManifest: ParseManifest never panics, and what it accepts is a
// valid manifest that survives a JSON round trip unchanged.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(goodManifest))
	f.Add([]byte(`{"schema":1,"id":"0-000000","seq":0,"created":"2026-01-01T00:00:00Z","lang":"bash","format":"bash-script","size_bytes":0,"checksum":"crc32c:00000000","kept":null,"skipped":null}`))
	f.Add([]byte(`{"schema":1,"id":"../x","seq":-1}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Add([]byte(`{"schema":1e400}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b)
		if err != nil {
			return
		}
		if !ValidID(m.ID) || m.Schema != Schema || m.SizeBytes < 0 || m.Seq < 0 || m.Kept == nil || m.Skipped == nil {
			t.Fatalf("accepted an invalid manifest: %+v", m)
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		m2, err := ParseManifest(out)
		if err != nil {
			t.Fatalf("round trip: %v\n%s", err, out)
		}
		out2, _ := json.Marshal(m2)
		if !bytes.Equal(out, out2) {
			t.Fatalf("round trip changed the manifest:\n%s\n%s", out, out2)
		}
	})
}

// FuzzCopyData: CopyData never panics, never writes more than it says, and
// what it accepts is exactly a chunk stream: the data it copied, written
// back as one chunk and a terminator, reads back the same.
func FuzzCopyData(f *testing.F) {
	f.Add([]byte("5\nhello3\nabc0\n2\n{}"), int64(100))
	f.Add([]byte("0\n"), int64(0))
	f.Add([]byte(""), int64(10))
	f.Add([]byte("\n"), int64(10))
	f.Add([]byte("-1\n"), int64(10))
	f.Add([]byte("99999999999999999999\n"), int64(1<<62))
	f.Add([]byte("11\nshort"), int64(10))
	f.Add([]byte("3\nab"), int64(10))
	f.Fuzz(func(t *testing.T, in []byte, maxChunk int64) {
		var dst bytes.Buffer
		n, err := CopyData(&dst, bufio.NewReader(bytes.NewReader(in)), maxChunk)
		if n != int64(dst.Len()) {
			t.Fatalf("returned %d, wrote %d", n, dst.Len())
		}
		if n > int64(len(in)) {
			t.Fatalf("copied %d bytes from %d", n, len(in))
		}
		if err != nil {
			return
		}
		var re bytes.Buffer
		if err := WriteChunk(&re, dst.Bytes()); err != nil {
			t.Fatal(err)
		}
		if dst.Len() > 0 {
			if err := WriteChunk(&re, nil); err != nil {
				t.Fatal(err)
			}
		}
		var again bytes.Buffer
		if _, err := CopyData(&again, bufio.NewReader(&re), 0); err != nil && dst.Len() <= DefaultMaxChunk {
			t.Fatalf("re-encoded stream does not read back: %v", err)
		}
		if dst.Len() <= DefaultMaxChunk && !bytes.Equal(again.Bytes(), dst.Bytes()) {
			t.Fatal("re-encoded stream reads back different data")
		}
		// ReadChunk on whatever follows must not panic either.
		_, _ = ReadChunk(bufio.NewReader(bytes.NewReader(in)), 1<<20)
	})
}

// FuzzParseKernelManifest: never panics; what it accepts has an id, and
// non-nil lists.
func FuzzParseKernelManifest(f *testing.F) {
	f.Add([]byte(kernelManifestOK))
	f.Add([]byte(`{"id":"r19","ok":false,"error":"boom","format":"","kept":null,"skipped":null,"info":null}`))
	f.Add([]byte(`{"id":"r1","ok":true}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseKernelManifest(b)
		if err != nil {
			return
		}
		if k.ID == "" || k.Kept == nil || k.Skipped == nil || (k.OK && k.Format == "") {
			t.Fatalf("accepted an invalid kernel manifest: %+v", k)
		}
	})
}
