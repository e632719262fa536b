package snapshot

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const goodManifest = `{
  "schema": 1,
  "id": "7-3f2a9c",
  "seq": 7,
  "created": "2026-03-01T10:00:00Z",
  "lang": "python",
  "format": "python-pickle5",
  "size_bytes": 1234,
  "checksum": "crc32c:0a1b2c3d",
  "kept": ["a", "df"],
  "skipped": [{"name": "fh", "type": "_io.TextIOWrapper", "reason": "cannot pickle"}],
  "info": {"interpreter": "Python 3.11.2"},
  "note": "manual"
}`

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^7-[0-9a-f]{6}$`)
	seen := map[string]bool{}
	for range 50 {
		id := NewID(7)
		assert.Regexp(t, re, id)
		assert.True(t, ValidID(id))
		seen[id] = true
	}
	assert.Greater(t, len(seen), 45, "ids are random")
	assert.True(t, ValidID(NewID(0)))
	assert.True(t, ValidID(NewID(9223372036854775807)))
}

func TestValidID(t *testing.T) {
	for _, id := range []string{"7-3f2a9c", "0-000000", "a", "manual_1", strings.Repeat("a", 64)} {
		assert.True(t, ValidID(id), id)
	}
	for _, id := range []string{"", ".", "..", "../x", "a/b", "-x", "_x", ".tmp-1", "a.b", "a b", "ä", strings.Repeat("a", 65), "a\x00"} {
		assert.False(t, ValidID(id), "%q", id)
	}
}

func TestParseManifest(t *testing.T) {
	m, err := ParseManifest([]byte(goodManifest))
	require.NoError(t, err)
	assert.Equal(t, Manifest{
		Schema: 1, ID: "7-3f2a9c", Seq: 7, Created: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC),
		Lang: "python", Format: "python-pickle5", SizeBytes: 1234, Checksum: "crc32c:0a1b2c3d",
		Kept:    []string{"a", "df"},
		Skipped: []Skipped{{Name: "fh", Type: "_io.TextIOWrapper", Reason: "cannot pickle"}},
		Info:    map[string]string{"interpreter": "Python 3.11.2"}, Note: "manual",
	}, m)

	edit := func(old, new string) string {
		require.Contains(t, goodManifest, old)
		return strings.Replace(goodManifest, old, new, 1)
	}
	t.Run("null lists become empty", func(t *testing.T) {
		s := edit(`"kept": ["a", "df"]`, `"kept": null`)
		s = strings.Replace(s, `"skipped": [{"name": "fh", "type": "_io.TextIOWrapper", "reason": "cannot pickle"}]`, `"skipped": null`, 1)
		m, err := ParseManifest([]byte(s))
		require.NoError(t, err)
		assert.Equal(t, []string{}, m.Kept)
		assert.Equal(t, []Skipped{}, m.Skipped)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		assert.Contains(t, string(b), `"kept":[],"skipped":[]`)
	})

	bad := []struct {
		name, in, msg string
	}{
		{"empty", "", "EOF"},
		{"not an object", `[]`, "cannot unmarshal"},
		{"null", `null`, "schema 0"},
		{"newer schema", edit(`"schema": 1`, `"schema": 2`), "schema 2"},
		{"no schema", edit(`"schema": 1,`, ``), "schema 0"},
		{"path in id", edit(`"7-3f2a9c"`, `"../../etc/passwd"`), "invalid id"},
		{"dot id", edit(`"7-3f2a9c"`, `".."`), "invalid id"},
		{"empty id", edit(`"7-3f2a9c"`, `""`), "invalid id"},
		{"negative seq", edit(`"seq": 7`, `"seq": -1`), "seq -1"},
		{"negative size", edit(`"size_bytes": 1234`, `"size_bytes": -5`), "size -5"},
		{"no created", edit(`"created": "2026-03-01T10:00:00Z",`, ``), "creation time"},
		{"bad created", edit(`"2026-03-01T10:00:00Z"`, `"yesterday"`), "parsing time"},
		{"no lang", edit(`"lang": "python",`, ``), "no language"},
		{"no format", edit(`"format": "python-pickle5",`, ``), "no format"},
		{"sha256 checksum", edit(`"crc32c:0a1b2c3d"`, `"sha256:0a1b2c3d"`), "checksum"},
		{"short checksum", edit(`"crc32c:0a1b2c3d"`, `"crc32c:0a1b2c3"`), "checksum"},
		{"upper-case checksum", edit(`"crc32c:0a1b2c3d"`, `"crc32c:0A1B2C3D"`), "checksum"},
		{"unknown field", edit(`"note": "manual"`, `"note": "manual", "extra": 1`), "unknown field"},
		{"trailing data", goodManifest + ` {}`, "data after"},
		{"truncated", goodManifest[:len(goodManifest)/2], "unexpected EOF"},
		{"wrong type", edit(`"seq": 7`, `"seq": "7"`), "cannot unmarshal"},
		{"seq overflow", edit(`"seq": 7`, `"seq": 99999999999999999999`), "cannot unmarshal"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseManifest([]byte(tt.in))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.msg)
			assert.True(t, strings.HasPrefix(err.Error(), "parse manifest: "), err.Error())
		})
	}
}
