package tarsafe

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/advice"
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

// Links that each look local but lead outside through one another (u -> ../../.. from three
// folders down leads to the destination's root; x -> u/../../.. then climbs from there) are
// refused, in either order of arrival: whichever comes last, every link that stays resolves
// inside the destination as the host follows it.
func TestExtractRefusesChainedLinksThatLeave(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []entry
	}{
		{"the climbing link last", []entry{
			{name: "d1/d2/d3/u", link: "../../..", typ: tar.TypeSymlink},
			{name: "d1/d2/d3/x", link: "u/../../..", typ: tar.TypeSymlink},
		}},
		{"the climbing link first", []entry{
			{name: "d1/d2/d3/x", link: "u/../../..", typ: tar.TypeSymlink},
			{name: "d1/d2/d3/u", link: "../../..", typ: tar.TypeSymlink},
		}},
		{"through a linked folder", []entry{
			{name: "a/b", typ: tar.TypeDir},
			{name: "up", link: "a/b", typ: tar.TypeSymlink},
			{name: "a/l", link: "../up/../../..", typ: tar.TypeSymlink},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst, canary := setup(t)
			_, err := Extract(mkTar(t, tc.entries...), dst, "", nil)
			require.ErrorIs(t, err, ErrUnsafe)
			// Whatever links are left resolve inside dst.
			require.NoError(t, filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.Type()&os.ModeSymlink == 0 {
					return err
				}
				real, err := filepath.EvalSymlinks(p)
				if err != nil {
					return nil // dangling: leads nowhere
				}
				rel, err := filepath.Rel(dst, real)
				require.NoError(t, err)
				assert.True(t, filepath.IsLocal(rel) || rel == ".", "link %s leads to %s, outside %s", p, real, dst)
				return nil
			}))
			b, err := os.ReadFile(canary)
			require.NoError(t, err)
			assert.Equal(t, "untouched", string(b))
		})
	}
}

// Links that chain and stay inside are kept.
func TestExtractKeepsChainedLinksThatStayInside(t *testing.T) {
	dst, _ := setup(t)
	_, err := Extract(mkTar(t,
		entry{name: "d1/d2/d3/f", body: "here", typ: tar.TypeReg},
		entry{name: "d1/d2/d3/u", link: "../..", typ: tar.TypeSymlink},
		entry{name: "d1/d2/d3/x", link: "u/d2/d3/f", typ: tar.TypeSymlink},
	), dst, "", nil)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dst, "d1/d2/d3/x"))
	require.NoError(t, err)
	assert.Equal(t, "here", string(b))
}

// A backslash is an ordinary character of a file name on Linux: such a file is copied.
func TestExtractKeepsBackslashNames(t *testing.T) {
	dst, _ := setup(t)
	n, err := Extract(mkTar(t, entry{name: `dir/a\b.txt`, body: "x", typ: tar.TypeReg}), dst, "", nil)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	assert.FileExists(t, filepath.Join(dst, "dir", `a\b.txt`))
}

// A file of zeros (a sparse file in the session) arrives as a hole, taking no room on the
// host; its size and content are right.
func TestExtractKeepsHolesAsHoles(t *testing.T) {
	dst, _ := setup(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	const size = 64 << 20
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "sparse.bin", Typeflag: tar.TypeReg, Mode: 0o644, Size: size}))
	_, err := tw.Write(make([]byte, size-5))
	require.NoError(t, err)
	_, err = tw.Write([]byte("tail!"))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	_, err = ExtractWith(&buf, dst, Options{})
	require.NoError(t, err)
	p := filepath.Join(dst, "sparse.bin")
	st, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, int64(size), st.Size())
	blocks := st.Sys().(*syscall.Stat_t).Blocks * 512
	assert.Less(t, blocks, int64(1<<20), "the zeros are a hole, not %d bytes on disk", blocks)
	f, err := os.Open(p)
	require.NoError(t, err)
	defer f.Close()
	tail := make([]byte, 5)
	_, err = f.ReadAt(tail, size-5)
	require.NoError(t, err)
	assert.Equal(t, "tail!", string(tail))
}

// Past the size budget the copy is refused, checked on each entry's size before it is
// written, and what it had written is removed; what was in the destination before stays.
func TestExtractRefusesPastTheBudgetAndLeavesNothing(t *testing.T) {
	dst, _ := setup(t)
	require.NoError(t, os.WriteFile(filepath.Join(dst, "before.txt"), []byte("mine"), 0o644))
	_, err := ExtractWith(mkTar(t,
		entry{name: "out/a.txt", body: "0123456789", typ: tar.TypeReg},
		entry{name: "out/deep/b.txt", body: "0123456789", typ: tar.TypeReg},
	), dst, Options{MaxBytes: 15})
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Contains(t, err.Error(), "CopyOptions.MaxSize")
	assert.Contains(t, advice.CLI(err), "--max-size")
	entries, err := os.ReadDir(dst)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only what was there before")
	assert.Equal(t, "before.txt", entries[0].Name())

	// A refused link undoes the copy too.
	_, err = ExtractWith(mkTar(t,
		entry{name: "out/a.txt", body: "x", typ: tar.TypeReg},
		entry{name: "out/l", link: "../../canary", typ: tar.TypeSymlink},
	), dst, Options{})
	require.ErrorIs(t, err, ErrUnsafe)
	assert.NoDirExists(t, filepath.Join(dst, "out"))
}

// A hard link to a symlink is a symlink in another folder (linkat does not follow it): it is
// checked from where it lands.
func TestExtractRefusesAHardLinkToASymlinkThatLeaves(t *testing.T) {
	dst, _ := setup(t)
	_, err := Extract(mkTar(t,
		entry{name: "t/a/b", typ: tar.TypeDir},
		entry{name: "t/a/b/l", link: "../..", typ: tar.TypeSymlink},
		entry{name: "t/l2", link: "t/a/b/l", typ: tar.TypeLink},
	), dst, "", nil)
	require.ErrorIs(t, err, ErrUnsafe)
	_, err = os.Lstat(filepath.Join(dst, "t", "l2"))
	assert.True(t, os.IsNotExist(err), "the link is not left behind")
}

// A copy that fails part way through a file leaves the file that was there as it was.
func TestExtractReplacesAFileOnlyWhenTheNewOneIsWhole(t *testing.T) {
	dst, _ := setup(t)
	require.NoError(t, os.WriteFile(filepath.Join(dst, "data.csv"), []byte("old"), 0o644))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "data.csv", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1 << 20}))
	_, err := tw.Write(make([]byte, 1000))
	require.NoError(t, err)
	cut := buf.Bytes()[:buf.Len()] // the stream ends inside the file
	_, err = ExtractWith(bytes.NewReader(cut), dst, Options{})
	require.Error(t, err)
	b, err := os.ReadFile(filepath.Join(dst, "data.csv"))
	require.NoError(t, err)
	assert.Equal(t, "old", string(b))
	entries, _ := os.ReadDir(dst)
	assert.Len(t, entries, 1, "no temporary file left")
}
