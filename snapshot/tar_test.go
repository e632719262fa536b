package snapshot

import (
	"archive/tar"
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type tarEntry struct {
	name string
	typ  byte
	body string
}

func buildTar(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Mode: 0o600, Size: int64(len(e.body)), ModTime: t0, Uid: 0, Gid: 0}
		switch e.typ {
		case tar.TypeDir:
			hdr.Mode, hdr.Size = 0o700, 0
		case tar.TypeSymlink:
			hdr.Linkname, hdr.Size = e.body, 0
		}
		require.NoError(t, tw.WriteHeader(hdr))
		if hdr.Size > 0 {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return b.Bytes()
}

// manifestJSON writes a real manifest through a store and returns its file.
func manifestJSON(t *testing.T, seq int64, created time.Time) (Manifest, string) {
	t.Helper()
	s := openStore(t, t.TempDir(), 5)
	w, err := s.Create(NewID(seq))
	require.NoError(t, err)
	_, err = w.Write([]byte("data"))
	require.NoError(t, err)
	m, err := w.Commit(Manifest{Seq: seq, Created: created, Lang: "python", Format: "python-pickle5", Kept: []string{"a"}})
	require.NoError(t, err)
	b, err := readFileMax(s.manifestPath(m.ID), maxManifestBytes)
	require.NoError(t, err)
	return m, string(b)
}

func TestManifestsFromTar(t *testing.T) {
	m1, j1 := manifestJSON(t, 1, t0)
	m2, j2 := manifestJSON(t, 2, t0.Add(time.Minute))
	_, j3 := manifestJSON(t, 3, t0.Add(2*time.Minute))

	archive := buildTar(t,
		tarEntry{"snapshots/", tar.TypeDir, ""},
		tarEntry{"snapshots/" + m2.ID + ".json", tar.TypeReg, j2}, // out of order
		tarEntry{"snapshots/" + m1.ID + ".json", tar.TypeReg, j1},
		tarEntry{"snapshots/.tmp-9-999999.json-1", tar.TypeReg, "{"},    // temporary: skipped
		tarEntry{"snapshots/notes.txt", tar.TypeReg, "hello"},           // not a manifest: skipped
		tarEntry{"snapshots/link.json", tar.TypeSymlink, "../x.json"},   // not a regular file: skipped
		tarEntry{"snapshots/4-444444.json", tar.TypeReg, `{"schema":1`}, // corrupt
		tarEntry{"snapshots/5-555555.json", tar.TypeReg, j3},            // id does not match its name
	)
	ms, errs := ManifestsFromTar(bytes.NewReader(archive))
	require.Len(t, ms, 2)
	assert.Equal(t, m1.ID, ms[0].ID, "oldest first")
	assert.Equal(t, m2.ID, ms[1].ID)
	assert.True(t, m1.Created.Equal(ms[0].Created))
	assert.Equal(t, []string{"a"}, ms[0].Kept)
	assert.Equal(t, []Skipped{}, ms[0].Skipped)

	require.Len(t, errs, 2)
	var got []string
	for _, err := range errs {
		var p Problem
		require.True(t, errors.As(err, &p), "%v", err)
		require.ErrorIs(t, err, ErrCorrupt)
		got = append(got, p.ID)
	}
	assert.Equal(t, []string{"4-444444", "5-555555"}, got)
}

func TestManifestsFromTarEmptyAndBroken(t *testing.T) {
	ms, errs := ManifestsFromTar(bytes.NewReader(buildTar(t, tarEntry{"snapshots/", tar.TypeDir, ""})))
	assert.Empty(t, ms)
	assert.Empty(t, errs)

	ms, errs = ManifestsFromTar(bytes.NewReader(nil))
	assert.Empty(t, ms)
	assert.Empty(t, errs, "an empty stream is an empty tar")

	m1, j1 := manifestJSON(t, 1, t0)
	archive := buildTar(t,
		tarEntry{"snapshots/" + m1.ID + ".json", tar.TypeReg, j1},
		tarEntry{"snapshots/2-222222.json", tar.TypeReg, j1},
	)
	cut := archive[:len(archive)-1024-300] // inside the second entry's body
	ms, errs = ManifestsFromTar(bytes.NewReader(cut))
	assert.Equal(t, []string{m1.ID}, ids(ms), "what was read before the break is kept")
	require.NotEmpty(t, errs)

	ms, errs = ManifestsFromTar(bytes.NewReader([]byte("this is not a tar archive at all, just some text that is long enough to fill a header block or so")))
	assert.Empty(t, ms)
	require.Len(t, errs, 1)
}

func TestManifestsFromTarTooLarge(t *testing.T) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: "snapshots/1-111111.json", Typeflag: tar.TypeReg, Mode: 0o600, Size: maxManifestBytes + 1}))
	_, err := tw.Write(make([]byte, maxManifestBytes+1))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	ms, errs := ManifestsFromTar(&b)
	assert.Empty(t, ms)
	require.Len(t, errs, 1)
	assert.ErrorIs(t, errs[0], ErrCorrupt)
}
