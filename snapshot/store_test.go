package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func openStore(t *testing.T, dir string, keep int) *Store {
	t.Helper()
	s, err := OpenStore(dir, keep)
	require.NoError(t, err)
	return s
}

// commit writes one snapshot for seq with the given data.
func commit(t *testing.T, s *Store, seq int64, data string) Manifest {
	t.Helper()
	w, err := s.Create(NewID(seq))
	require.NoError(t, err)
	defer w.Abort()
	_, err = io.WriteString(w, data)
	require.NoError(t, err)
	m, err := w.Commit(Manifest{Seq: seq, Lang: "python", Format: "python-pickle5",
		Created: t0.Add(time.Duration(seq) * time.Second), Kept: []string{"x"}})
	require.NoError(t, err)
	return m
}

func readAll(t *testing.T, f *os.File) string {
	t.Helper()
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	return string(b)
}

func ids(ms []Manifest) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func TestOpenStoreCreatesDirs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := openStore(t, dir, 0)
	assert.Equal(t, DefaultKeep, s.keep)
	for _, d := range []string{"snapshots", "snapdata"} {
		fi, err := os.Stat(filepath.Join(dir, d))
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	}
	ms, errs := s.List()
	assert.Empty(t, ms)
	assert.Empty(t, errs)
}

func TestOpenStoreFails(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err := OpenStore(file, 1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "open snapshot store")
}

func TestCommitAndOpen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 3)
	w, err := s.Create("7-abcdef")
	require.NoError(t, err)
	assert.Equal(t, "7-abcdef", w.ID())
	for _, part := range []string{"hello ", "snapshot ", "world"} {
		_, err := w.Write([]byte(part))
		require.NoError(t, err)
	}
	before := time.Now().UTC()
	m, err := w.Commit(Manifest{Seq: 7, Lang: "python", Format: "python-pickle5",
		Skipped: []Skipped{{Name: "fh", Type: "file", Reason: "open file"}}, Info: map[string]string{"k": "v"}})
	require.NoError(t, err)
	require.NoError(t, w.Abort(), "Abort after Commit is a no-op")

	data := "hello snapshot world"
	assert.Equal(t, Schema, m.Schema)
	assert.Equal(t, "7-abcdef", m.ID)
	assert.Equal(t, int64(len(data)), m.SizeBytes)
	assert.Equal(t, fmt.Sprintf("crc32c:%08x", crc32.Checksum([]byte(data), crc32.MakeTable(crc32.Castagnoli))), m.Checksum)
	assert.False(t, m.Created.Before(before.Add(-time.Second)))
	assert.Equal(t, []string{}, m.Kept)

	// Files on disk: data as written, manifest that parses to the same.
	b, err := os.ReadFile(filepath.Join(dir, "snapdata", "7-abcdef.snap"))
	require.NoError(t, err)
	assert.Equal(t, data, string(b))
	raw, err := os.ReadFile(filepath.Join(dir, "snapshots", "7-abcdef.json"))
	require.NoError(t, err)
	for _, p := range []string{"snapdata/7-abcdef.snap", "snapshots/7-abcdef.json"} {
		fi, err := os.Stat(filepath.Join(dir, p))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), p)
	}
	assert.Contains(t, string(raw), `"kept": []`)
	onDisk, err := ParseManifest(raw)
	require.NoError(t, err)
	assert.True(t, m.Created.Equal(onDisk.Created))
	onDisk.Created = m.Created
	assert.Equal(t, m, onDisk)

	f, got, err := s.Open("7-abcdef")
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, data, readAll(t, f), "the file is seeked back to the start")
	assert.Equal(t, m.ID, got.ID)

	ms, errs := s.List()
	assert.Empty(t, errs)
	assert.Equal(t, []string{"7-abcdef"}, ids(ms))
}

func TestCommitEmptySnapshot(t *testing.T) {
	s := openStore(t, t.TempDir(), 3)
	w, err := s.Create("1-000000")
	require.NoError(t, err)
	m, err := w.Commit(Manifest{Seq: 1, Lang: "bash", Format: "bash-script"})
	require.NoError(t, err)
	assert.Equal(t, int64(0), m.SizeBytes)
	f, _, err := s.Open(m.ID)
	require.NoError(t, err)
	f.Close()
}

func TestCommitChecksGivenFields(t *testing.T) {
	s := openStore(t, t.TempDir(), 3)
	tests := []struct {
		name string
		m    Manifest
		msg  string
	}{
		{"other id", Manifest{ID: "9-ffffff"}, "names id"},
		{"wrong size", Manifest{SizeBytes: 99}, "99 bytes"},
		{"wrong checksum", Manifest{Checksum: "crc32c:00000000"}, "checksum"},
		{"bad schema", Manifest{Schema: 3}, "schema 3"},
		{"no language", Manifest{Format: "-"}, "no language"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := s.Create("1-aaaaaa")
			require.NoError(t, err)
			_, err = w.Write([]byte("abc"))
			require.NoError(t, err)
			if tt.m.Lang == "" && tt.m.Format == "" {
				tt.m.Lang, tt.m.Format = "python", "p"
			}
			_, err = w.Commit(tt.m)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.msg)
			_, err = w.Write([]byte("x"))
			require.ErrorIs(t, err, os.ErrClosed, "a failed commit abandons the snapshot")
			assertNoFiles(t, s, "1-aaaaaa")
		})
	}
}

// assertNoFiles checks that nothing of snapshot id, temporary files
// included, is left in the store.
func assertNoFiles(t *testing.T, s *Store, id string) {
	t.Helper()
	for _, d := range []string{s.manifests, s.data} {
		entries, err := os.ReadDir(d)
		require.NoError(t, err)
		for _, e := range entries {
			assert.NotContains(t, e.Name(), id, "left in %s", d)
		}
	}
}

func TestWriterAbort(t *testing.T) {
	s := openStore(t, t.TempDir(), 3)
	w, err := s.Create("2-bbbbbb")
	require.NoError(t, err)
	_, err = w.Write([]byte("partial"))
	require.NoError(t, err)
	require.NoError(t, w.Abort())
	require.NoError(t, w.Abort(), "twice is fine")
	assertNoFiles(t, s, "2-bbbbbb")
	_, err = w.Commit(Manifest{Lang: "python", Format: "p"})
	require.ErrorIs(t, err, os.ErrClosed)
	_, err = w.Write([]byte("more"))
	require.ErrorIs(t, err, os.ErrClosed)
}

func TestCreateRefuses(t *testing.T) {
	s := openStore(t, t.TempDir(), 3)
	for _, id := range []string{"", "../x", ".tmp-1", "a/b"} {
		_, err := s.Create(id)
		require.Error(t, err, "%q", id)
		assert.Contains(t, err.Error(), "invalid id")
	}
	m := commit(t, s, 1, "one")
	_, err := s.Create(m.ID)
	require.ErrorIs(t, err, fs.ErrExist)
}

func TestCrashBetweenDataAndManifest(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 3)
	good := commit(t, s, 1, "good")

	// What a crash at each step of Commit leaves: a temporary data file
	// (before the data rename), a data file without a manifest (after it),
	// a temporary manifest (before the manifest rename).
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snapdata", ".tmp-2-aaaaaa-123"), []byte("partial"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snapdata", "3-bbbbbb.snap"), []byte("orphan"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snapdata", "4-cccccc.snap"), []byte("orphan"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snapshots", ".tmp-4-cccccc.json-9"), []byte(`{"schema":1`), 0o600))
	// Files that are not the store's are left alone.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snapdata", "README"), []byte("x"), 0o600))

	ms, errs := s.List()
	assert.Empty(t, errs, "leftovers are not manifests")
	assert.Equal(t, []string{good.ID}, ids(ms))

	var logged bytes.Buffer
	s, err := OpenStore(dir, 3, WithLogger(slog.New(slog.NewTextHandler(&logged, nil)))) // the agent comes back
	require.NoError(t, err)
	assert.Equal(t, 4, strings.Count(logged.String(), "removed leftover file"), logged.String())
	names := func(d string) []string {
		entries, err := os.ReadDir(filepath.Join(dir, d))
		require.NoError(t, err)
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	assert.ElementsMatch(t, []string{good.ID + ".snap", "README"}, names("snapdata"))
	assert.ElementsMatch(t, []string{good.ID + ".json"}, names("snapshots"))

	f, m, problems, err := s.OpenLatestGood()
	require.NoError(t, err)
	defer f.Close()
	assert.Empty(t, problems)
	assert.Equal(t, good.ID, m.ID)
}

func TestPruneKeepsExactlyKeep(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 3)
	var all []Manifest
	for seq := int64(1); seq <= 6; seq++ {
		all = append(all, commit(t, s, seq, fmt.Sprintf("state %d", seq)))
		ms, errs := s.List()
		require.Empty(t, errs)
		assert.Len(t, ms, min(int(seq), 3))
	}
	ms, _ := s.List()
	assert.Equal(t, ids(all[3:]), ids(ms), "the newest three, oldest first")
	for _, d := range []string{"snapshots", "snapdata"} {
		entries, err := os.ReadDir(filepath.Join(dir, d))
		require.NoError(t, err)
		assert.Len(t, entries, 3, d)
	}
}

func TestPruneDefaultKeep(t *testing.T) {
	s := openStore(t, t.TempDir(), -1)
	for seq := int64(1); seq <= DefaultKeep+2; seq++ {
		commit(t, s, seq, "x")
	}
	ms, _ := s.List()
	require.Len(t, ms, DefaultKeep)
	assert.Equal(t, int64(3), ms[0].Seq)
}

func TestListOrder(t *testing.T) {
	s := openStore(t, t.TempDir(), 10)
	mk := func(id string, seq int64, created time.Time) {
		w, err := s.Create(id)
		require.NoError(t, err)
		_, err = w.Commit(Manifest{Seq: seq, Created: created, Lang: "bash", Format: "bash-script"})
		require.NoError(t, err)
	}
	mk("5-aaaaaa", 5, t0)
	mk("3-bbbbbb", 3, t0.Add(time.Hour))   // older seq, later time: seq wins
	mk("5-cccccc", 5, t0.Add(time.Minute)) // same seq: later created is newer
	mk("5-000000", 5, t0.Add(time.Minute)) // same seq and time: by id
	ms, errs := s.List()
	require.Empty(t, errs)
	assert.Equal(t, []string{"3-bbbbbb", "5-aaaaaa", "5-000000", "5-cccccc"}, ids(ms))
}

func corruptions() map[string]func(t *testing.T, path string) {
	return map[string]func(t *testing.T, path string){
		"truncated": func(t *testing.T, path string) {
			require.NoError(t, os.Truncate(path, 3))
		},
		"one byte flipped": func(t *testing.T, path string) {
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			b[len(b)/2] ^= 0x01
			require.NoError(t, os.WriteFile(path, b, 0o600))
		},
		"missing": func(t *testing.T, path string) {
			require.NoError(t, os.Remove(path))
		},
		"grown": func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString("more")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		},
	}
}

func TestCorruptDataFallsBack(t *testing.T) {
	for name, corrupt := range corruptions() {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, 5)
			older := commit(t, s, 1, "the older state")
			good := commit(t, s, 2, "the good state")
			bad := commit(t, s, 3, "the newest state, about to break")
			corrupt(t, filepath.Join(dir, "snapdata", bad.ID+".snap"))

			_, _, err := s.Open(bad.ID)
			require.ErrorIs(t, err, ErrCorrupt)
			assert.Contains(t, err.Error(), bad.ID)

			f, m, problems, err := s.OpenLatestGood()
			require.NoError(t, err)
			defer f.Close()
			assert.Equal(t, good.ID, m.ID)
			assert.Equal(t, "the good state", readAll(t, f))
			require.Len(t, problems, 1)
			assert.Equal(t, bad.ID, problems[0].ID)
			require.ErrorIs(t, problems[0].Err, ErrCorrupt)
			assert.NotEqual(t, older.ID, m.ID)
		})
	}
}

func TestAllCorrupt(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 5)
	a := commit(t, s, 1, "aaaa")
	b := commit(t, s, 2, "bbbb")
	require.NoError(t, os.Truncate(filepath.Join(dir, "snapdata", a.ID+".snap"), 1))
	require.NoError(t, os.Truncate(filepath.Join(dir, "snapdata", b.ID+".snap"), 1))
	f, _, problems, err := s.OpenLatestGood()
	assert.Nil(t, f)
	require.ErrorIs(t, err, ErrCorrupt)
	assert.NotErrorIs(t, err, ErrNone)
	require.Len(t, problems, 2)
	assert.Equal(t, b.ID, problems[0].ID, "newest first")
	assert.Equal(t, a.ID, problems[1].ID)
}

func TestOpenLatestGoodEmpty(t *testing.T) {
	s := openStore(t, t.TempDir(), 5)
	f, _, problems, err := s.OpenLatestGood()
	assert.Nil(t, f)
	assert.Empty(t, problems)
	require.ErrorIs(t, err, ErrNone)
}

func TestUnreadableManifest(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 5)
	good := commit(t, s, 1, "good")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snapshots", "9-999999.json"), []byte("{not json"), 0o600))
	// A manifest copied under another name.
	raw, err := os.ReadFile(filepath.Join(dir, "snapshots", good.ID+".json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snapshots", "8-888888.json"), raw, 0o600))

	ms, errs := s.List()
	assert.Equal(t, []string{good.ID}, ids(ms))
	require.Len(t, errs, 2)
	var got []string
	for _, err := range errs {
		var p Problem
		require.True(t, errors.As(err, &p))
		require.ErrorIs(t, err, ErrCorrupt)
		got = append(got, p.ID)
	}
	assert.ElementsMatch(t, []string{"8-888888", "9-999999"}, got)

	_, _, err = s.Open("9-999999")
	require.ErrorIs(t, err, ErrCorrupt)

	f, m, problems, err := s.OpenLatestGood()
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, good.ID, m.ID)
	assert.Len(t, problems, 2, "unreadable manifests are reported")
}

func TestOpenNotFound(t *testing.T) {
	s := openStore(t, t.TempDir(), 5)
	for _, id := range []string{"1-abcdef", "../../etc/passwd", ""} {
		_, _, err := s.Open(id)
		require.ErrorIs(t, err, ErrNotFound, "%q", id)
		assert.NotErrorIs(t, err, ErrCorrupt)
	}
}

func TestRemove(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, 5)
	a := commit(t, s, 1, "a")
	b := commit(t, s, 2, "b")
	require.NoError(t, s.Remove(b.ID))
	ms, _ := s.List()
	assert.Equal(t, []string{a.ID}, ids(ms))
	assertNoFiles(t, s, b.ID)
	require.ErrorIs(t, s.Remove(b.ID), ErrNotFound)
	require.ErrorIs(t, s.Remove("../x"), ErrNotFound)

	// An orphan data file alone is removed too.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "snapdata", "5-555555.snap"), nil, 0o600))
	require.NoError(t, s.Remove("5-555555"))
}

func TestManifestJSONShape(t *testing.T) {
	s := openStore(t, t.TempDir(), 5)
	m := commit(t, s, 4, "data")
	var obj map[string]any
	b, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &obj))
	for _, k := range []string{"id", "seq", "created", "size_bytes", "kept", "skipped"} {
		assert.Contains(t, obj, k)
	}
	assert.Equal(t, []any{}, obj["skipped"])
	assert.True(t, bytes.Contains(b, []byte(`"checksum":"crc32c:`)))
}
