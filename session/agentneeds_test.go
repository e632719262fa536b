package session_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

func TestCopyBothWays(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	ctx := testenv.Ctx(t, 2*time.Minute)
	host := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(host, "sales.csv"), []byte("a,b\n1,2\n"), 0o644))
	dir := filepath.Join(host, "folder")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "sub", "x.txt"), []byte("x"), 0o644))

	require.NoError(t, c.CopyTo(ctx, s.Name(), filepath.Join(host, "sales.csv"), "data/sales.csv"))
	require.NoError(t, c.CopyTo(ctx, s.Name(), dir, "in"))
	r := run(t, s, `import os
st = os.stat("data/sales.csv")
(open("data/sales.csv").read(), st.st_uid, os.stat("data").st_uid, open("in/sub/x.txt").read(), os.stat("in/sub/x.txt").st_uid)`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "('a,b\\n1,2\\n', 1000, 1000, 'x', 1000)", *r.Result, "copied files belong to the session's user")

	// Out again: a file as a new name, a folder into an existing folder.
	out := t.TempDir()
	require.NoError(t, c.CopyFrom(ctx, s.Name(), "data/sales.csv", filepath.Join(out, "copy.csv")))
	b, err := os.ReadFile(filepath.Join(out, "copy.csv"))
	require.NoError(t, err)
	assert.Equal(t, "a,b\n1,2\n", string(b))
	require.NoError(t, c.CopyFrom(ctx, s.Name(), "in", out))
	b, err = os.ReadFile(filepath.Join(out, "in", "sub", "x.txt"))
	require.NoError(t, err)
	assert.Equal(t, "x", string(b))
}

func TestCopyRefusesEscapes(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	ctx := testenv.Ctx(t, 2*time.Minute)
	parent := t.TempDir()
	canary := filepath.Join(parent, "canary")
	require.NoError(t, os.WriteFile(canary, []byte("untouched"), 0o644))
	dst := filepath.Join(parent, "dst")
	require.NoError(t, os.Mkdir(dst, 0o755))

	// Links in the workspace that point out of it, and out of the destination.
	r := run(t, s, `import os
os.makedirs("trap", exist_ok=True)
os.symlink("/etc/passwd", "trap/abs")
os.symlink("../../canary", "trap/rel")
os.link("/workspace/outputs", "trap/h") if False else None`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	err := c.CopyFrom(ctx, s.Name(), "trap", dst)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "outside")
	b, _ := os.ReadFile(canary)
	assert.Equal(t, "untouched", string(b))

	for _, bad := range []string{"/etc/passwd", "../x", "/workspace/../etc", ".runtimectl/history.jsonl", "/tmp/x"} {
		assert.ErrorIs(t, c.CopyFrom(ctx, s.Name(), bad, dst), session.ErrInvalid, bad)
		assert.ErrorIs(t, c.CopyTo(ctx, s.Name(), canary, bad), session.ErrInvalid, bad)
	}
	// A host symlink leaving the source is refused on the way in.
	src := filepath.Join(parent, "src")
	require.NoError(t, os.Mkdir(src, 0o755))
	require.NoError(t, os.Symlink(canary, filepath.Join(src, "out")))
	assert.Error(t, c.CopyTo(ctx, s.Name(), src, "src"))
}

// Chained links that each look local (u -> ../../.. three folders down, x -> u/../../..)
// resolve to the host's / together: cp out refuses them, and nothing that arrives leads out of
// the destination. A file name with a backslash is copied like any other.
func TestCopyOutRefusesChainedLinksAndKeepsBackslashNames(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	ctx := testenv.Ctx(t, 2*time.Minute)
	r := run(t, s, `import os
os.makedirs("tree/d1/d2/d3", exist_ok=True)
os.symlink("../../..", "tree/d1/d2/d3/u")
os.symlink("u/../../..", "tree/d1/d2/d3/x")
os.makedirs("names", exist_ok=True)
open("names/a\\b.txt", "w").write("back")`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	dst := t.TempDir()
	err := c.CopyFrom(ctx, s.Name(), "tree", dst)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "outside")
	require.NoError(t, filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink == 0 {
			return err
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(dst, real)
		require.NoError(t, err)
		assert.True(t, rel == "." || filepath.IsLocal(rel), "%s leads to %s, outside the destination", p, real)
		return nil
	}))

	out := t.TempDir()
	require.NoError(t, c.CopyFrom(ctx, s.Name(), "names", filepath.Join(out, "names")))
	b, err := os.ReadFile(filepath.Join(out, "names", `a\b.txt`))
	require.NoError(t, err)
	assert.Equal(t, "back", string(b))
}

func TestFigureIsSavedListedAndCopiedOut(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	r := run(t, s, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3]); plt.title('t'); plt.show()")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.Len(t, r.Outputs, 1)
	assert.Equal(t, "image/png", r.Outputs[0].Mime)
	assert.True(t, strings.HasPrefix(r.Outputs[0].Path, "/workspace/outputs/"), r.Outputs[0].Path)
	out := t.TempDir()
	require.NoError(t, c.CopyFrom(testenv.Ctx(t, time.Minute), s.Name(), r.Outputs[0].Path, filepath.Join(out, "fig.png")))
	b, err := os.ReadFile(filepath.Join(out, "fig.png"))
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG", string(b[:4]))
	assert.Equal(t, b, r.Outputs[0].Data, "the result carries the figure too")
	r = run(t, s, "import pandas as pd\npd.DataFrame({'a': [1]})")
	require.Len(t, r.Outputs, 1, "a DataFrame result adds its HTML")
	assert.Equal(t, "text/html", r.Outputs[0].Mime)
	assert.Contains(t, string(r.Outputs[0].Data), "<table")
	h := historyOf(t, c, s.Name())
	for _, e := range h {
		for _, o := range e.Outputs {
			assert.Empty(t, o.Data, "the history keeps the path, not the data")
		}
	}
	assert.Contains(t, *r.Result, "a")
}

func TestVarsAndContext(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	r := run(t, s, `import numpy as np, pandas as pd
df = pd.DataFrame({"a": range(10), "b": range(10)})
arr = np.zeros((3, 4))
d = {"k": 1, "j": 2}
def f(x): return x
open("big.bin", "wb").write(b"0" * 100000)`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	run(t, s, "1/0")
	vars, err := s.Vars(testenv.Ctx(t, time.Minute))
	require.NoError(t, err)
	byName := map[string]string{}
	for _, v := range vars.Vars {
		byName[v.Name] = v.Type + " " + v.Shape
		assert.NotEmpty(t, v.Preview, v.Name)
	}
	assert.Equal(t, "DataFrame (10, 2)", byName["df"])
	assert.Equal(t, "ndarray (3, 4)", byName["arr"])
	assert.Contains(t, byName["d"], "dict")
	assert.Contains(t, byName["f"], "function")
	assert.Contains(t, vars.Modules, "np")

	sum, err := c.Context(testenv.Ctx(t, time.Minute), s.Name(), session.ContextOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(2), sum.Executions)
	text := sum.Text(0)
	for _, want := range []string{"python", "ZeroDivisionError", "df: DataFrame", "big.bin"} {
		assert.Contains(t, text, want)
	}
	for _, max := range []int{100, 300, 1000} {
		assert.LessOrEqual(t, len([]rune(sum.Text(max))), max)
	}
}

func TestRemoveExportKeepsExactlyTheMatchingFiles(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	r := run(t, s, `import os
os.makedirs("sub", exist_ok=True)
for n in ["final_a.csv", "sub/final_b.csv", "tmp.csv", "report.pdf", "notes.txt"]:
    open(n, "w").write(n)`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)

	// A failing export removes nothing.
	blocker := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o644))
	_, err := c.RemoveExport(testenv.Ctx(t, time.Minute), s.Name(), true, session.ExportOptions{Dir: blocker, Keep: []string{"*"}})
	require.Error(t, err)
	r = run(t, s, "1")
	assert.Equal(t, "ok", string(r.Status), "the session is still there")

	dir := filepath.Join(t.TempDir(), "final")
	n, err := c.RemoveExport(testenv.Ctx(t, time.Minute), s.Name(), true, session.ExportOptions{Dir: dir, Keep: []string{"final_*.csv", "report.pdf"}, History: true})
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	var got []string
	require.NoError(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			got = append(got, rel)
		}
		return err
	}))
	assert.ElementsMatch(t, []string{"final_a.csv", "sub/final_b.csv", "report.pdf", "history.json", "history.ipynb"}, got)
	list, err := c.List(testenv.Ctx(t, time.Minute))
	require.NoError(t, err)
	for _, in := range list {
		assert.NotEqual(t, s.Name(), in.Name, "the session is removed")
	}
}

func TestForkThenDiverge(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	run(t, s, "x = 1\nopen('shared.txt', 'w').write('from src')")
	snap, err := s.Snapshot(testenv.Ctx(t, time.Minute))
	require.NoError(t, err)
	run(t, s, "x = 2")

	name := testenv.Name(t) + "-fork"
	t.Cleanup(func() { _ = c.Remove(testenv.Ctx(t, time.Minute), name, true) })
	f, err := c.Fork(testenv.Ctx(t, 3*time.Minute), s.Name(), name, snap.ID)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	r := run(t, f, "x")
	assert.Equal(t, "1", *r.Result, "the fork starts from the chosen snapshot")
	r = run(t, f, "x = 100\nopen('shared.txt').read()")
	assert.Equal(t, "'from src'", *r.Result, "the workspace was copied")
	run(t, f, "open('shared.txt', 'w').write('from fork')")
	r = run(t, s, "(x, open('shared.txt').read())")
	assert.Equal(t, "(2, 'from src')", *r.Result, "the source is untouched")
	r = run(t, f, "x")
	assert.Equal(t, "100", *r.Result)

	execs, _, err := c.History(testenv.Ctx(t, time.Minute), name)
	require.NoError(t, err)
	require.NotEmpty(t, execs)
	assert.Contains(t, execs[0].Code, "forked from session "+s.Name())
}

// A sparse file in the session (10 GiB that take no room) is not written out in full: cp out
// refuses it past the size budget, before writing, and leaves nothing; a smaller sparse file
// arrives as a hole; rm --export past its budget removes nothing.
func TestCopyOutOfSparseFilesKeepsTheHostWhole(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	ctx := testenv.Ctx(t, 3*time.Minute)
	r := run(t, s, `import os
os.makedirs("sparse", exist_ok=True)
with open("sparse/huge.bin", "wb") as f:
    f.truncate(10 << 30)
with open("small.bin", "wb") as f:
    f.truncate(64 << 20)
    f.write(b"head")`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)

	dst := t.TempDir()
	err := c.CopyFrom(ctx, s.Name(), "sparse", dst)
	require.ErrorIs(t, err, session.ErrInvalid)
	assert.Contains(t, err.Error(), "CopyOptions.MaxSize")
	assert.Contains(t, advice.CLI(err), "--max-size")
	entries, _ := os.ReadDir(dst)
	assert.Empty(t, entries, "nothing half-copied is left")

	require.NoError(t, c.CopyFrom(ctx, s.Name(), "small.bin", filepath.Join(dst, "small.bin")))
	st, err := os.Stat(filepath.Join(dst, "small.bin"))
	require.NoError(t, err)
	assert.Equal(t, int64(64<<20), st.Size())
	assert.Less(t, st.Sys().(*syscall.Stat_t).Blocks*512, int64(1<<20), "the hole stays a hole")

	exp := t.TempDir()
	_, err = c.RemoveExport(ctx, s.Name(), true, session.ExportOptions{Dir: exp, Keep: []string{"*.bin"}, MaxSize: 1 << 20})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nothing was removed")
	r = run(t, s, "1 + 1")
	assert.Equal(t, "2", *r.Result, "the session is still there")
}

// A tree deeper than the engine's archive can carry (a path of about 6,000 characters, below
// which docker cp leaves files out without a word) fails cp, rm --export and fork instead of
// arriving short: rm --export removes nothing. With SkipDeep, cp copies the rest and names
// the folder.
func TestDeepTreesAreNotCopiedShort(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	ctx := testenv.Ctx(t, 3*time.Minute)
	r := run(t, s, `import os
os.makedirs("tree", exist_ok=True)
os.chdir("tree")
for i in range(300):
    os.mkdir("d" * 20); os.chdir("d" * 20)
open("deep.txt", "w").write("deep")
os.chdir("/workspace")
open("tree/top.txt", "w").write("top")`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)

	dst := t.TempDir()
	err := c.CopyFrom(ctx, name, "tree", dst)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "CopyOptions.SkipDeep")
	assert.Contains(t, advice.CLI(err), "--skip-unreadable")
	entries, _ := os.ReadDir(dst)
	assert.Empty(t, entries, "nothing half-copied")

	var skipped []string
	require.NoError(t, c.CopyFromWith(ctx, name, "tree", dst, session.CopyOptions{SkipDeep: true, OnSkipped: func(d string) { skipped = append(skipped, d) }}))
	assert.NotEmpty(t, skipped)
	assert.FileExists(t, filepath.Join(dst, "tree", "top.txt"))

	_, err = c.Fork(ctx, name, name+"-f", "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "deep")
	_, err = docker.From(c).Containers().Inspect(ctx, name+"-f")
	assert.Error(t, err, "the failed fork left no container")

	_, err = c.RemoveExport(ctx, name, true, session.ExportOptions{Dir: t.TempDir(), Keep: []string{"*.txt"}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nothing was removed")
	r = run(t, s, "1 + 1")
	assert.Equal(t, "2", *r.Result, "the session is still there")
}

// Hard-linked files in the workspace (conda, cp -l and DVC make them): the archive carries
// one of the names as a file and the other as a link to it. rm --export keeps both when both
// are kept, and never exports a kept name short: when its data is under a name no --keep
// matches, it refuses and removes nothing.
func TestRemoveExportKeepsHardLinkedFiles(t *testing.T) {
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 2*time.Minute)
	mk := func() *session.Session {
		s := testenv.Start(t, c, session.Spec{})
		r := run(t, s, "import os\nopen('raw.csv', 'w').write('a,b\\n1,2\\n')\nos.link('raw.csv', 'final_x.csv')")
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		return s
	}
	s := mk()
	dir := t.TempDir()
	_, err := c.RemoveExport(ctx, s.Name(), true, session.ExportOptions{Dir: dir, Keep: []string{"*.csv"}})
	require.NoError(t, err)
	for _, f := range []string{"raw.csv", "final_x.csv"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		require.NoError(t, err, f)
		assert.Equal(t, "a,b\n1,2\n", string(b))
	}

	s = mk()
	dir = t.TempDir()
	_, err = c.RemoveExport(ctx, s.Name(), true, session.ExportOptions{Dir: dir, Keep: []string{"final_*"}})
	if err != nil {
		assert.Contains(t, err.Error(), "nothing was removed")
		r := run(t, s, "1 + 1")
		assert.Equal(t, "2", *r.Result, "the session is still there")
	} else {
		b, err := os.ReadFile(filepath.Join(dir, "final_x.csv"))
		require.NoError(t, err, "exported, whole")
		assert.Equal(t, "a,b\n1,2\n", string(b))
	}
}
