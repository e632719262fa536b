package tarsafe

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type entry struct {
	name, link, body string
	typ              byte
}

func mkTar(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		require.NoError(t, tw.WriteHeader(h))
		if e.typ == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return &buf
}

// A canary beside the destination must never be read or written.
func setup(t *testing.T) (dst, canary string) {
	parent := t.TempDir()
	dst = filepath.Join(parent, "dst")
	require.NoError(t, os.Mkdir(dst, 0o755))
	canary = filepath.Join(parent, "canary")
	require.NoError(t, os.WriteFile(canary, []byte("untouched"), 0o644))
	return dst, canary
}

func TestExtractRefusesEscapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []entry
	}{
		{"dotdot", []entry{{name: "../canary", body: "x", typ: tar.TypeReg}}},
		{"nested dotdot", []entry{{name: "a/../../canary", body: "x", typ: tar.TypeReg}}},
		{"absolute", []entry{{name: "/tmp/evil", body: "x", typ: tar.TypeReg}}},
		{"symlink out", []entry{{name: "l", link: "../canary", typ: tar.TypeSymlink}}},
		{"symlink absolute", []entry{{name: "l", link: "/etc/passwd", typ: tar.TypeSymlink}}},
		{"symlink then write through it", []entry{{name: "d", link: "..", typ: tar.TypeSymlink}, {name: "d/canary", body: "x", typ: tar.TypeReg}}},
		{"hardlink out", []entry{{name: "h", link: "../canary", typ: tar.TypeLink}}},
		{"device", []entry{{name: "dev", typ: tar.TypeChar}}},
		{"fifo", []entry{{name: "p", typ: tar.TypeFifo}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst, canary := setup(t)
			_, err := Extract(mkTar(t, tc.entries...), dst, "", nil)
			require.Error(t, err)
			b, rerr := os.ReadFile(canary)
			require.NoError(t, rerr)
			assert.Equal(t, "untouched", string(b))
		})
	}
}

func TestExtractWritesFilesFoldersAndInsideLinks(t *testing.T) {
	dst, _ := setup(t)
	n, err := Extract(mkTar(t,
		entry{name: "out/", typ: tar.TypeDir},
		entry{name: "out/a.txt", body: "A", typ: tar.TypeReg},
		entry{name: "out/sub/b.txt", body: "B", typ: tar.TypeReg},
		entry{name: "out/link", link: "a.txt", typ: tar.TypeSymlink},
		entry{name: "out/hard", link: "out/a.txt", typ: tar.TypeLink},
	), dst, "renamed", nil)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	b, err := os.ReadFile(filepath.Join(dst, "renamed", "sub", "b.txt"))
	require.NoError(t, err)
	assert.Equal(t, "B", string(b))
	b, err = os.ReadFile(filepath.Join(dst, "renamed", "link"))
	require.NoError(t, err)
	assert.Equal(t, "A", string(b))
	b, err = os.ReadFile(filepath.Join(dst, "renamed", "hard"))
	require.NoError(t, err)
	assert.Equal(t, "A", string(b))
}

func TestExtractFilter(t *testing.T) {
	dst, _ := setup(t)
	n, err := Extract(mkTar(t,
		entry{name: "w/final_a.csv", body: "1", typ: tar.TypeReg},
		entry{name: "w/tmp.csv", body: "2", typ: tar.TypeReg},
	), dst, "", func(name string, h *tar.Header) bool { return filepath.Base(name) == "final_a.csv" })
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.NoFileExists(t, filepath.Join(dst, "w", "tmp.csv"))
}

func TestWriteConfinesSymlinksAndSetsOwner(t *testing.T) {
	src := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(src, "f"), []byte("data"), 0o600))
	require.NoError(t, os.Symlink("f", filepath.Join(src, "inside")))
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, src, "data/in", 1000, 1000))
	tr := tar.NewReader(&buf)
	names := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names[h.Name] = h
		assert.Equal(t, 1000, h.Uid)
		assert.Equal(t, 1000, h.Gid)
	}
	assert.Contains(t, names, "data/")
	assert.Contains(t, names, "data/in/")
	assert.Contains(t, names, "data/in/f")
	assert.Equal(t, "f", names["data/in/inside"].Linkname)

	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(src, "outside")))
	assert.ErrorIs(t, Write(&bytes.Buffer{}, src, "x", 1000, 1000), ErrUnsafe)
	assert.ErrorIs(t, Write(&bytes.Buffer{}, src, "../x", 1000, 1000), ErrUnsafe)
}

func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../a", "/a", "a/../..", "a\\b", "./a/", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := CleanName(s)
		if err == nil && !filepath.IsLocal(c) {
			t.Fatalf("CleanName(%q) = %q, not local", s, c)
		}
	})
}
