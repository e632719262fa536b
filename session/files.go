package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/internal/tarsafe"
)

// Workspace is the session's working directory, its volume's mount point.
const Workspace = contract.Workspace

// SessionUID and SessionGID own the files of the session's user.
const (
	SessionUID = 1000
	SessionGID = 1000
)

// ResolvePath turns a session-side path (relative to /workspace, or absolute inside it) into
// an absolute one, refusing anything outside the workspace (the runtime's state is outside it)
// or in the folder where sessions made before the state volume kept it.
func ResolvePath(p string) (string, error) {
	if p == "" {
		p = "."
	}
	abs := p
	if !path.IsAbs(p) {
		abs = path.Join(Workspace, p)
	}
	abs = path.Clean(abs)
	if abs != Workspace && !strings.HasPrefix(abs, Workspace+"/") {
		return "", fmt.Errorf("%w path %q: session paths are under %s (give a relative path or one inside it)", ErrInvalid, p, Workspace)
	}
	if legacy := contract.LegacyStateDir; abs == legacy || strings.HasPrefix(abs, legacy+"/") {
		return "", advice.Errorf("%w path %q: %s is where earlier versions kept the runtime's own state; %s", ErrInvalid, p, legacy, advice.Words{Lib: "read it with Session.History and Session.Snapshots", CLI: "use `runtimectl session history` and `snapshots`"})
	}
	return abs, nil
}

// CopyTo copies the host file or folder src into the session as dst (docker cp semantics:
// into dst when it is an existing folder, else as dst). The files belong to the session's
// user. Links that leave src are refused.
func (c *Client) CopyTo(ctx context.Context, name, src, dst string) error {
	if _, err := c.ensureContainer(ctx, name); err != nil {
		return err
	}
	abs, err := ResolvePath(dst)
	if err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("%w source %s: %v", ErrInvalid, src, err)
	}
	info, err := c.ctr.Stat(ctx, name, abs)
	if err != nil {
		return err
	}
	target := abs
	if info.Exists && info.IsDir {
		target = path.Join(abs, filepath.Base(filepath.Clean(src)))
	} else if strings.HasSuffix(dst, "/") && !st.IsDir() {
		return fmt.Errorf("%w destination %s: no such folder in the session", ErrInvalid, dst)
	}
	rel := strings.TrimPrefix(target, Workspace+"/")
	if target == Workspace {
		return fmt.Errorf("%w destination %s: name a path under it", ErrInvalid, dst)
	}
	if err := c.fitsDisk(ctx, name, src); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarsafe.Write(pw, src, rel, SessionUID, SessionGID)) }()
	err = c.ctr.CopyTo(ctx, name, Workspace, pr)
	pr.CloseWithError(err)
	return err
}

// CopyOptions tune a copy out of a session.
type CopyOptions struct {
	// MaxSize bounds the total size of the files written to the host (0: 4 GiB, a negative
	// value: no bound); a copy past it fails before writing the file that passes it and leaves
	// nothing behind.
	MaxSize int64
	// SkipDeep copies what the engine's archive gives of a tree with folders too deep for it
	// (see tarsafe.ArchivePathLimit), passing each such folder to OnSkipped; without it such a
	// copy fails and leaves nothing behind.
	SkipDeep  bool
	OnSkipped func(dir string)
}

// CopyFrom copies the session's file or folder src to the host as dst (docker cp semantics:
// into dst when it is an existing folder, else as dst). Every entry is checked: nothing is
// written outside dst; runs of zeros are written as holes; the default size budget applies
// (see CopyFromWith).
func (c *Client) CopyFrom(ctx context.Context, name, src, dst string) error {
	return c.CopyFromWith(ctx, name, src, dst, CopyOptions{})
}

// CopyFromWith is CopyFrom with options.
func (c *Client) CopyFromWith(ctx context.Context, name, src, dst string, o CopyOptions) error {
	if _, err := c.ensureContainer(ctx, name); err != nil {
		return err
	}
	abs, err := c.ResolveRead(ctx, name, src)
	if err != nil {
		return err
	}
	info, err := c.ctr.Stat(ctx, name, abs)
	if err != nil {
		return err
	}
	if !info.Exists {
		return fmt.Errorf("%w source %s: no such file or folder in session %s", ErrInvalid, src, name)
	}
	dir, rename := dst, ""
	if st, err := os.Stat(dst); err == nil && st.IsDir() {
		// Into the existing folder, under the source's own name.
	} else if err == nil {
		if info.IsDir {
			return fmt.Errorf("%w destination %s: a file, cannot hold folder %s", ErrInvalid, dst, src)
		}
		dir, rename = filepath.Dir(dst), filepath.Base(dst)
	} else if errors.Is(err, os.ErrNotExist) {
		dir, rename = filepath.Dir(filepath.Clean(dst)), filepath.Base(filepath.Clean(dst))
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return fmt.Errorf("%w destination %s: its folder %s does not exist", ErrInvalid, dst, dir)
		}
	} else {
		return err
	}
	rc, err := c.ctr.CopyFrom(ctx, name, abs)
	if err != nil {
		return err
	}
	defer rc.Close()
	owner := SessionUID
	if !c.archiveKeepsOwners(ctx) {
		owner = 0 // Podman's archive gives every entry to the caller (see SessionOwns)
	}
	_, err = tarsafe.ExtractWith(rc, dir, tarsafe.Options{Rename: rename, MaxBytes: o.MaxSize, Base: path.Dir(abs), SkipDeep: o.SkipDeep, OnDeep: o.OnSkipped, Owner: owner})
	if errors.Is(err, tarsafe.ErrTooLarge) {
		return fmt.Errorf("%w copy of %s: %w", ErrInvalid, src, err)
	}
	return err
}

// WriteFile writes what r holds to the file path of the session (relative to /workspace, or
// absolute inside it), replacing one that is there; it belongs to the session's user. r is
// read to its end first (through a file on the host), so a reader that fails leaves the
// session's file as it was.
func (c *Client) WriteFile(ctx context.Context, name, path string, r io.Reader) error {
	if _, err := ResolvePath(path); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "runtimectl-write-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, filepath.Base(path))
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write %s in session %q: read the content: %w", path, name, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return c.CopyTo(ctx, name, tmp, path)
}

// ReadFile writes the content of the session's file path to w and returns its size; the
// default size budget of CopyFrom applies. A folder is refused: copy it with CopyFrom.
func (c *Client) ReadFile(ctx context.Context, name, path string, w io.Writer) (int64, error) {
	dir, err := os.MkdirTemp("", "runtimectl-read-*")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "file")
	if err := c.CopyFrom(ctx, name, path, tmp); err != nil {
		return 0, err
	}
	st, err := os.Lstat(tmp)
	if err != nil {
		return 0, err
	}
	if !st.Mode().IsRegular() {
		return 0, advice.Errorf("%w path %q: not a regular file (a folder or a link); copy it with %s", ErrInvalid, path, advice.Words{Lib: "CopyFrom", CLI: "`runtimectl session cp`"})
	}
	f, err := os.Open(tmp)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return io.Copy(w, f)
}

// WriteFile writes r's content to the file path of the session (see Client.WriteFile).
func (s *Session) WriteFile(ctx context.Context, path string, r io.Reader) error {
	return s.c.WriteFile(ctx, s.name, path, r)
}

// ReadFile writes the content of the session's file path to w (see Client.ReadFile).
func (s *Session) ReadFile(ctx context.Context, path string, w io.Writer) (int64, error) {
	return s.c.ReadFile(ctx, s.name, path, w)
}

// diskRoom is what session name's workspace may still take: its disk cap's bytes and entries,
// less what the agent last measured when the session runs (the caps whole when it does not).
func (c *Client) diskRoom(ctx context.Context, name string) (bytes, entries, capBytes int64, err error) {
	st, err := c.RecordedSettings(ctx, name)
	if err != nil {
		return 0, 0, 0, err
	}
	capBytes = st.Disk
	if capBytes <= 0 {
		capBytes = contract.DefaultDisk
	}
	bytes, entries = capBytes, contract.EntryLimit(capBytes)
	if ci, err := c.ctr.Inspect(ctx, name); err == nil && ci.Running {
		s := &Session{c: c, name: name}
		if err := s.connect(ctx); err == nil {
			if status, err := s.Status(ctx); err == nil && status.DiskUsed >= 0 {
				bytes -= status.DiskUsed
				entries -= status.DiskEntries
			}
			s.Close()
		}
	}
	return bytes, entries, capBytes, nil
}

// fitsDisk refuses a copy of the host's src into session name whose apparent size (what the
// copy writes: the engine's archive sends a sparse file's holes as zeros) or number of entries
// would pass what the workspace's disk cap leaves, before anything is copied.
func (c *Client) fitsDisk(ctx context.Context, name, src string) error {
	var size, n int64
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		n++
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			size += info.Size()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w source %s: %v", ErrInvalid, src, err)
	}
	room, entries, capBytes, err := c.diskRoom(ctx, name)
	if err != nil {
		return err
	}
	return overDisk(name, size, n, room, entries, capBytes)
}

// overDisk is the refusal of a copy of size bytes and n entries into a workspace with room
// bytes and entries left of its cap, or nil.
func overDisk(name string, size, n, room, entries, capBytes int64) error {
	if size > room {
		return advice.Errorf("%w: the copy holds %s (sparse files count at their full size: that is what the copy writes), more than the %s left of session %s's disk cap of %s; free space in the session or %s", ErrInvalid, humanSize(size), humanSize(max(room, 0)), name, humanSize(capBytes), advice.Words{Lib: "start it with a larger Spec.Disk", CLI: "start it with a larger --disk"})
	}
	if n > entries {
		return advice.Errorf("%w: the copy holds %d files, folders and links, more than the %d left of session %s's cap on entries (one per %d bytes of its disk cap of %s); copy fewer, or %s", ErrInvalid, n, max(entries, 0), name, contract.EntriesPerCapByte, humanSize(capBytes), advice.Words{Lib: "start it with a larger Spec.Disk", CLI: "start it with a larger --disk"})
	}
	return nil
}
