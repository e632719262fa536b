package snapshot

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"time"
)

// Schema is the version of the manifest format that this package writes and
// reads. ParseManifest refuses any other.
const Schema = 1

// Errors that callers test with errors.Is.
var (
	// ErrCorrupt: the snapshot's manifest or data fails its checks.
	ErrCorrupt = errors.New("snapshot is corrupt")
	// ErrNotFound: there is no snapshot with that id.
	ErrNotFound = errors.New("no such snapshot")
	// ErrNone: the store holds no snapshot at all.
	ErrNone = errors.New("no snapshot")
)

// maxManifestBytes bounds a manifest file (a namespace of many thousands of
// names still fits).
const maxManifestBytes = 16 << 20

// Skipped is a variable that the snapshot could not keep, and why.
type Skipped struct {
	Name   string `json:"name"`   // the variable
	Type   string `json:"type"`   // its type ("_io.TextIOWrapper", "generator")
	Reason string `json:"reason"` // why it could not be kept
}

// Manifest describes one snapshot: snapshots/<id>.json.
type Manifest struct {
	Schema int    `json:"schema"` // [Schema]
	ID     string `json:"id"`     // see [NewID] and [ValidID]
	// Seq is the execution that the snapshot follows (0: before any).
	Seq     int64     `json:"seq"`
	Created time.Time `json:"created"` // when it was committed
	// Lang is the session's language ("python", "bash").
	Lang string `json:"lang"`
	// Format is the driver's data format ("python-pickle5", "bash-script").
	Format    string `json:"format"`
	SizeBytes int64  `json:"size_bytes"` // length of the data file
	// Checksum is the CRC-32C (Castagnoli) of the data: "crc32c:%08x".
	Checksum string `json:"checksum"`
	// Kept lists the names saved; never null in JSON.
	Kept []string `json:"kept"`
	// Skipped lists the names left out, with the reason; never null in JSON.
	Skipped []Skipped         `json:"skipped"`
	Info    map[string]string `json:"info,omitempty"` // the driver's info (interpreter, pickler)
	Note    string            `json:"note,omitempty"` // a word from whoever took it ("before restore")
	// Broken says why a manifest could not be read, in a listing (ManifestsFromTar's callers
	// add such entries, with only the ID); the agent never writes it.
	Broken string `json:"broken,omitempty"`
}

var (
	idRE       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
	checksumRE = regexp.MustCompile(`^crc32c:[0-9a-f]{8}$`)
)

// NewID returns a new snapshot id for the execution seq: the seq, a dash and
// six random hex digits ("7-3f2a9c"), short enough to type.
func NewID(seq int64) string {
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return strconv.FormatInt(seq, 10) + "-" + hex.EncodeToString(b[:])
}

// ValidID reports whether id can name a snapshot: 1 to 64 ASCII letters,
// digits, '-' or '_', starting with a letter or digit. Ids become file
// names, so nothing else (no '.', no '/') is accepted.
func ValidID(id string) bool {
	return idRE.MatchString(id)
}

// ParseManifest reads a manifest strictly: one JSON object with no unknown
// field and nothing after it, schema [Schema], a valid id, a checksum of the
// form "crc32c:%08x", a creation time, a language and a format, no negative
// size or seq. Null kept or skipped lists become empty ones. It never
// panics.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("parse manifest: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Manifest{}, errors.New("parse manifest: data after the JSON object")
	}
	if err := m.check(); err != nil {
		return Manifest{}, fmt.Errorf("parse manifest: %w", err)
	}
	m.normalize()
	return m, nil
}

// check is what ParseManifest and Commit require of a manifest.
func (m *Manifest) check() error {
	switch {
	case m.Schema != Schema:
		return fmt.Errorf("schema %d, want %d", m.Schema, Schema)
	case !ValidID(m.ID):
		return fmt.Errorf("invalid id %q", m.ID)
	case m.Seq < 0:
		return fmt.Errorf("seq %d is negative", m.Seq)
	case m.Created.IsZero():
		return errors.New("no creation time")
	case m.Lang == "":
		return errors.New("no language")
	case m.Format == "":
		return errors.New("no format")
	case m.SizeBytes < 0:
		return fmt.Errorf("size %d is negative", m.SizeBytes)
	case !checksumRE.MatchString(m.Checksum):
		return fmt.Errorf("checksum %q is not crc32c:<8 hex digits>", m.Checksum)
	}
	return nil
}

func (m *Manifest) normalize() {
	if m.Kept == nil {
		m.Kept = []string{}
	}
	if m.Skipped == nil {
		m.Skipped = []Skipped{}
	}
}

// compareManifests orders manifests oldest first: by Seq, then Created,
// then ID.
func compareManifests(a, b Manifest) int {
	if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}
