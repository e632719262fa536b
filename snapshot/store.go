package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Directory and file names inside the state directory.
const (
	manifestDir = "snapshots"
	dataDir     = "snapdata"
	manifestExt = ".json"
	dataExt     = ".snap"
	tempPrefix  = ".tmp-"
)

// DefaultKeep is how many snapshots a store keeps when OpenStore is given
// keep <= 0.
const DefaultKeep = 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Option configures a [Store].
type Option func(*options)

type options struct {
	logger   *slog.Logger
	maxBytes int64
}

// WithMaxBytes bounds the bytes of the snapshots a store keeps (0: no bound): Commit prunes
// the oldest past it too, never the one just committed, so one snapshot larger than the bound
// is kept alone.
func WithMaxBytes(n int64) Option {
	return func(o *options) { o.maxBytes = n }
}

// WithLogger sets where the store reports what it cleans up and prunes, and
// failures that do not fail the call (default: discarded).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

// Store is the snapshots of one session: manifests in dir/snapshots, data
// in dir/snapdata. Its methods may be called from several goroutines; only
// one Store may be open on a directory at a time (OpenStore removes files
// that it takes for the leftovers of a crash).
type Store struct {
	manifests string
	data      string
	keep      int
	maxBytes  int64
	log       *slog.Logger
}

// OpenStore opens the store in the state directory dir, creating
// dir/snapshots and dir/snapdata (mode 0700) when missing. keep is how many
// snapshots Commit leaves after pruning; keep <= 0 means [DefaultKeep].
//
// It removes what an interrupted Commit can leave behind: temporary files,
// and data files that have no manifest (a crash between the data rename and
// the manifest write), which are not snapshots.
func OpenStore(dir string, keep int, opts ...Option) (*Store, error) {
	o := options{logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	if keep <= 0 {
		keep = DefaultKeep
	}
	s := &Store{
		manifests: filepath.Join(dir, manifestDir),
		data:      filepath.Join(dir, dataDir),
		keep:      keep,
		maxBytes:  o.maxBytes,
		log:       o.logger,
	}
	for _, d := range []string{s.manifests, s.data} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("open snapshot store: %w", err)
		}
		if err := CheckPrivateDir(d); err != nil {
			return nil, fmt.Errorf("open snapshot store: %w", err)
		}
	}
	s.clean()
	return s, nil
}

// clean removes temporary files and orphan data files. Failures are logged:
// leftovers take space but do no harm.
func (s *Store) clean() {
	remove := func(path, why string) {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("snapshot store: cannot remove leftover file", "path", path, "err", err)
			return
		}
		s.log.Info("snapshot store: removed leftover file", "path", path, "why", why)
	}
	if entries, err := os.ReadDir(s.manifests); err == nil {
		for _, e := range entries {
			if e.Type().IsRegular() && strings.HasPrefix(e.Name(), tempPrefix) {
				remove(filepath.Join(s.manifests, e.Name()), "temporary manifest of an interrupted commit")
			}
		}
	}
	entries, err := os.ReadDir(s.data)
	if err != nil {
		s.log.Warn("snapshot store: cannot read data directory", "err", err)
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		if strings.HasPrefix(name, tempPrefix) {
			remove(filepath.Join(s.data, name), "temporary data of an interrupted snapshot")
			continue
		}
		id, ok := strings.CutSuffix(name, dataExt)
		if !ok || !ValidID(id) {
			continue // not ours: leave it
		}
		if _, err := os.Lstat(s.manifestPath(id)); errors.Is(err, fs.ErrNotExist) {
			remove(filepath.Join(s.data, name), "data without a manifest (interrupted commit)")
		}
	}
}

func (s *Store) manifestPath(id string) string { return filepath.Join(s.manifests, id+manifestExt) }
func (s *Store) dataPath(id string) string     { return filepath.Join(s.data, id+dataExt) }

// Writer receives the data of one snapshot into a temporary file. Call
// Commit to make it a snapshot, or Abort; Abort after Commit does nothing,
// so `defer w.Abort()` is safe.
type Writer struct {
	s    *Store
	id   string
	f    *os.File // nil once committed or aborted
	crc  hash.Hash32
	size int64
}

// Create starts a snapshot with the given id (see [NewID]). The id must be
// valid and not used by an existing snapshot.
func (s *Store) Create(id string) (*Writer, error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("create snapshot %q: invalid id", id)
	}
	if _, err := os.Lstat(s.manifestPath(id)); err == nil {
		return nil, fmt.Errorf("create snapshot %q: %w", id, fs.ErrExist)
	}
	f, err := os.CreateTemp(s.data, tempPrefix+id+"-*")
	if err != nil {
		return nil, fmt.Errorf("create snapshot %q: %w", id, err)
	}
	return &Writer{s: s, id: id, f: f, crc: crc32.New(castagnoli)}, nil
}

// ID is the id of the snapshot being written.
func (w *Writer) ID() string { return w.id }

// Write appends p to the snapshot's data, counting its size and checksum.
func (w *Writer) Write(p []byte) (int, error) {
	if w.f == nil {
		return 0, fmt.Errorf("write snapshot %q: %w", w.id, os.ErrClosed)
	}
	n, err := w.f.Write(p)
	w.crc.Write(p[:n])
	w.size += int64(n)
	if err != nil {
		return n, fmt.Errorf("write snapshot %q: %w", w.id, err)
	}
	return n, nil
}

// Commit makes the data written so far a snapshot described by m, and
// returns the manifest as stored. It fills in Schema, ID, SizeBytes,
// Checksum (CRC-32C) and Created (now, UTC) when they are zero; when m gives
// them, they must match. The data is fsynced and renamed to <id>.snap, the
// data directory fsynced, then the manifest written to a temporary file,
// fsynced, renamed to <id>.json, and the manifest directory fsynced: a crash
// at any point leaves no manifest for data that is not complete.
//
// Then it prunes the store to the newest keep snapshots (by Seq, then
// Created), removing each manifest before its data; a failure to prune is
// logged, not returned. On error the snapshot is abandoned.
func (w *Writer) Commit(m Manifest) (Manifest, error) {
	if w.f == nil {
		return Manifest{}, fmt.Errorf("commit snapshot %q: %w", w.id, os.ErrClosed)
	}
	fail := func(err error) (Manifest, error) {
		_ = w.Abort()
		return Manifest{}, fmt.Errorf("commit snapshot %q: %w", w.id, err)
	}
	sum := fmt.Sprintf("crc32c:%08x", w.crc.Sum32())
	switch {
	case m.ID == "":
		m.ID = w.id
	case m.ID != w.id:
		return fail(fmt.Errorf("manifest names id %q", m.ID))
	}
	if m.Schema == 0 {
		m.Schema = Schema
	}
	switch {
	case m.SizeBytes == 0:
		m.SizeBytes = w.size
	case m.SizeBytes != w.size:
		return fail(fmt.Errorf("manifest says %d bytes, %d were written", m.SizeBytes, w.size))
	}
	switch {
	case m.Checksum == "":
		m.Checksum = sum
	case m.Checksum != sum:
		return fail(fmt.Errorf("manifest says checksum %s, the data has %s", m.Checksum, sum))
	}
	if m.Created.IsZero() {
		m.Created = time.Now().UTC()
	}
	m.normalize()
	if err := m.check(); err != nil {
		return fail(fmt.Errorf("invalid manifest: %w", err))
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fail(err)
	}
	b = append(b, '\n')

	if err := w.f.Sync(); err != nil {
		return fail(err)
	}
	tmp := w.f.Name()
	err = w.f.Close()
	w.f = nil
	if err != nil {
		_ = os.Remove(tmp)
		return Manifest{}, fmt.Errorf("commit snapshot %q: %w", w.id, err)
	}
	data := w.s.dataPath(w.id)
	if err := os.Rename(tmp, data); err != nil {
		_ = os.Remove(tmp)
		return Manifest{}, fmt.Errorf("commit snapshot %q: %w", w.id, err)
	}
	if err := syncDir(w.s.data); err != nil {
		_ = os.Remove(data)
		return Manifest{}, fmt.Errorf("commit snapshot %q: %w", w.id, err)
	}
	if err := writeFileAtomic(w.s.manifests, w.id+manifestExt, b); err != nil {
		_ = os.Remove(data)
		return Manifest{}, fmt.Errorf("commit snapshot %q: %w", w.id, err)
	}
	w.s.prune(w.id)
	return m, nil
}

// Abort abandons the snapshot and removes its temporary file. After Commit
// it does nothing.
func (w *Writer) Abort() error {
	if w.f == nil {
		return nil
	}
	name := w.f.Name()
	cerr := w.f.Close()
	w.f = nil
	if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("abort snapshot %q: %w", w.id, err)
	}
	if cerr != nil && !errors.Is(cerr, os.ErrClosed) {
		return fmt.Errorf("abort snapshot %q: %w", w.id, cerr)
	}
	return nil
}

// writeFileAtomic writes dir/name through a temporary file in dir: write,
// fsync, rename, fsync dir.
func writeFileAtomic(dir, name string, b []byte) error {
	f, err := os.CreateTemp(dir, tempPrefix+name+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// prune removes the oldest snapshots beyond keep, never the one just
// committed. Manifest first: a crash in between leaves an orphan data file,
// which OpenStore removes, never a manifest without its data.
func (s *Store) prune(justCommitted string) {
	ms, _ := s.List()
	var old []Manifest
	if len(ms) > s.keep {
		old, ms = ms[:len(ms)-s.keep], ms[len(ms)-s.keep:]
	}
	if s.maxBytes > 0 {
		// Newest first, the ones that fit in the bound (the one just committed always does).
		var total int64
		for i := len(ms) - 1; i >= 0; i-- {
			total += ms[i].SizeBytes
			if total > s.maxBytes && ms[i].ID != justCommitted {
				old = append(old, ms[:i+1]...)
				break
			}
		}
	}
	if len(old) == 0 {
		return
	}
	for _, m := range old {
		if m.ID == justCommitted {
			continue
		}
		if err := os.Remove(s.manifestPath(m.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("snapshot store: prune", "id", m.ID, "err", err)
			continue
		}
		if err := os.Remove(s.dataPath(m.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("snapshot store: prune", "id", m.ID, "err", err)
		}
		s.log.Debug("snapshot store: pruned", "id", m.ID, "seq", m.Seq)
	}
	if err := syncDir(s.manifests); err != nil {
		s.log.Warn("snapshot store: prune", "err", err)
	}
}

// Problem is a snapshot that could not be used, and why. It is an error, so
// that List can return it; errors.As finds the id.
type Problem struct {
	ID  string // the snapshot's id (from the file name for unreadable manifests)
	Err error  // what is wrong; wraps ErrCorrupt for a bad manifest or data
}

// Error says which snapshot and what is wrong with it.
func (p Problem) Error() string { return fmt.Sprintf("snapshot %s: %v", p.ID, p.Err) }

// Unwrap returns Err.
func (p Problem) Unwrap() error { return p.Err }

// List returns the snapshots' manifests, oldest first (by Seq, then
// Created). A manifest that cannot be read is reported as a [Problem] among
// the errors, not fatal; the errors also hold a failure to read the
// directory.
func (s *Store) List() ([]Manifest, []error) {
	ms, bad, err := s.list()
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, p := range bad {
		errs = append(errs, p)
	}
	return ms, errs
}

func (s *Store) list() ([]Manifest, []Problem, error) {
	entries, err := os.ReadDir(s.manifests)
	if err != nil {
		return nil, nil, fmt.Errorf("list snapshots: %w", err)
	}
	ms := make([]Manifest, 0, len(entries))
	var bad []Problem
	for _, e := range entries {
		name := e.Name()
		id, ok := strings.CutSuffix(name, manifestExt)
		if !ok || strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		m, err := s.readManifest(id)
		if errors.Is(err, ErrNotFound) {
			continue // removed since ReadDir
		}
		if err != nil {
			bad = append(bad, Problem{ID: id, Err: err})
			continue
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, compareManifests)
	return ms, bad, nil
}

// readManifest reads and checks snapshots/<id>.json.
func (s *Store) readManifest(id string) (Manifest, error) {
	if !ValidID(id) {
		return Manifest{}, fmt.Errorf("invalid id %q in the file name: %w", id, ErrCorrupt)
	}
	b, err := readFileMax(s.manifestPath(id), maxManifestBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, ErrNotFound
	}
	if err != nil {
		return Manifest{}, err
	}
	m, err := ParseManifest(b)
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if m.ID != id {
		return Manifest{}, fmt.Errorf("%w: manifest %s%s names id %q", ErrCorrupt, id, manifestExt, m.ID)
	}
	return m, nil
}

func readFileMax(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: manifest is larger than %d bytes", ErrCorrupt, max)
	}
	return b, nil
}

// Open returns the data of snapshot id, seeked to its start, with its
// manifest, after reading it whole to check its size and checksum. Errors
// wrap [ErrNotFound] (no such snapshot, or an invalid id) or [ErrCorrupt]
// (a manifest that does not parse, data missing, of the wrong size or
// checksum). The caller closes the file.
func (s *Store) Open(id string) (*os.File, Manifest, error) {
	if !ValidID(id) {
		return nil, Manifest{}, fmt.Errorf("open snapshot %q: invalid id: %w", id, ErrNotFound)
	}
	m, err := s.readManifest(id)
	if err != nil {
		return nil, Manifest{}, fmt.Errorf("open snapshot %q: %w", id, err)
	}
	f, err := os.OpenFile(s.dataPath(id), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Manifest{}, fmt.Errorf("open snapshot %q: data file is missing: %w", id, ErrCorrupt)
	}
	if err != nil {
		return nil, Manifest{}, fmt.Errorf("open snapshot %q: %w", id, err)
	}
	if err := verify(f, m); err != nil {
		f.Close()
		return nil, Manifest{}, fmt.Errorf("open snapshot %q: %w", id, err)
	}
	return f, m, nil
}

// verify reads f whole and compares its size and checksum with m's, then
// seeks back to the start.
func verify(f *os.File, m Manifest) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != m.SizeBytes {
		return fmt.Errorf("%w: data is %d bytes, the manifest says %d", ErrCorrupt, fi.Size(), m.SizeBytes)
	}
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("read data: %w", err)
	}
	if n != m.SizeBytes {
		return fmt.Errorf("%w: read %d bytes of data, the manifest says %d", ErrCorrupt, n, m.SizeBytes)
	}
	if sum := fmt.Sprintf("crc32c:%08x", h.Sum32()); sum != m.Checksum {
		return fmt.Errorf("%w: data checksum is %s, the manifest says %s", ErrCorrupt, sum, m.Checksum)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return nil
}

// OpenLatestGood opens the newest snapshot whose data verifies (see
// [Store.Open]). Problems lists each newer snapshot that failed, newest
// first, after every manifest that cannot be read at all (its place in the
// order is unknown). The error wraps [ErrNone] when the store is empty, and
// [ErrCorrupt] when there are snapshots but none is good; problems are
// returned in that case too.
func (s *Store) OpenLatestGood() (*os.File, Manifest, []Problem, error) {
	ms, problems, err := s.list()
	if err != nil {
		return nil, Manifest{}, nil, fmt.Errorf("open latest snapshot: %w", err)
	}
	for i := len(ms) - 1; i >= 0; i-- {
		f, m, err := s.Open(ms[i].ID)
		if err == nil {
			return f, m, problems, nil
		}
		problems = append(problems, Problem{ID: ms[i].ID, Err: err})
	}
	if len(problems) == 0 {
		return nil, Manifest{}, nil, fmt.Errorf("open latest snapshot: %w", ErrNone)
	}
	return nil, Manifest{}, problems, fmt.Errorf("open latest snapshot: none of %d is usable: %w", len(problems), ErrCorrupt)
}

// Remove deletes snapshot id, manifest first. The error wraps [ErrNotFound]
// when there is nothing to delete.
func (s *Store) Remove(id string) error {
	if !ValidID(id) {
		return fmt.Errorf("remove snapshot %q: invalid id: %w", id, ErrNotFound)
	}
	merr := os.Remove(s.manifestPath(id))
	if merr != nil && !errors.Is(merr, fs.ErrNotExist) {
		return fmt.Errorf("remove snapshot %q: %w", id, merr)
	}
	derr := os.Remove(s.dataPath(id))
	if derr != nil && !errors.Is(derr, fs.ErrNotExist) {
		return fmt.Errorf("remove snapshot %q: %w", id, derr)
	}
	if merr != nil && derr != nil {
		return fmt.Errorf("remove snapshot %q: %w", id, ErrNotFound)
	}
	if err := syncDir(s.manifests); err != nil {
		return fmt.Errorf("remove snapshot %q: %w", id, err)
	}
	return nil
}

// syncDir fsyncs a directory so that renames and removals in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// CheckPrivateDir makes sure dir is a folder of this process's user, not a link, with mode
// 0700 (set when it has another): the runtime's state lives only in such folders. Anything
// else is an error naming the path, never a write elsewhere.
func CheckPrivateDir(dir string) error {
	st, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a folder (%s); the runtime's state must be a folder of its own", dir, st.Mode().Type())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d, not to the agent (uid %d); the runtime's state must be its own", dir, sys.Uid, os.Geteuid())
	}
	if st.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("%s: make it private (0700): %w", dir, err)
		}
	}
	return nil
}
