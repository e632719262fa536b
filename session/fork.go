package session

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/internal/advice"
	"github.com/runtimectl/runtimectl/internal/tarsafe"
	"github.com/runtimectl/runtimectl/snapshot"
)

// rewriteTar copies the tar stream r to w, passing each entry's header to edit: it returns the
// header to write (possibly renamed) or nil to drop the entry.
func rewriteTar(w io.Writer, r io.Reader, edit func(h *tar.Header) *tar.Header, extra func(tw *tar.Writer) error) error {
	return rewriteTarOr(w, r, func(h *tar.Header) (*tar.Header, error) { return edit(h), nil }, extra)
}

// rewriteTarOr is rewriteTar whose edit may end the stream with an error.
func rewriteTarOr(w io.Writer, r io.Reader, edit func(h *tar.Header) (*tar.Header, error), extra func(tw *tar.Writer) error) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		nh, err := edit(h)
		if err != nil {
			return err
		}
		if nh == nil {
			continue
		}
		if err := tw.WriteHeader(nh); err != nil {
			return err
		}
		if nh.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, tr); err != nil {
				return err
			}
		}
	}
	if extra != nil {
		if err := extra(tw); err != nil {
			return err
		}
	}
	return tw.Close()
}

// stripWorkspace turns "workspace/x/y" into "x/y"; ok is false for the root entry itself.
func stripWorkspace(name string) (string, bool) {
	name = strings.TrimPrefix(name, "./")
	rest, found := strings.CutPrefix(name, "workspace/")
	if !found || strings.Trim(rest, "/") == "" {
		return "", false
	}
	return rest, true
}

// Fork makes a new session dst from src: a copy of src's workspace and of one snapshot (at, or
// the latest), with its own history that starts with a record of where it came from. Both then
// evolve independently. src is not stopped; its pending snapshot is waited for.
func (c *Client) Fork(ctx context.Context, src, dst, at string) (*Session, error) {
	if err := c.exists(ctx, src); err != nil {
		return nil, err
	}
	if err := ValidateName(dst); err != nil {
		return nil, err
	}
	if err := c.exists(ctx, dst); err == nil {
		return nil, fmt.Errorf("%w: session %q exists already; choose another name or remove it", ErrInvalid, dst)
	}
	if ci, err := c.ctr.Inspect(ctx, src); err == nil && ci.Running {
		s := &Session{c: c, name: src}
		if err := s.connect(ctx); err == nil {
			_ = s.conn.Call(ctx, execproto.Request{Op: execproto.OpDrain}, nil)
			s.Close()
		}
	}
	manifests, err := c.Snapshots(ctx, src)
	if err != nil {
		return nil, err
	}
	var chosen *snapshot.Manifest
	for i := range manifests {
		m := &manifests[i]
		if m.Broken != "" {
			if m.ID == at {
				return nil, advice.Errorf("%w: snapshot %s of session %s is broken (%s); %s", ErrInvalid, at, src, m.Broken, adviseSnapshots(src))
			}
			continue
		}
		if (at == "" && (chosen == nil || m.Seq >= chosen.Seq)) || m.ID == at {
			chosen = m
		}
	}
	if at != "" && chosen == nil {
		return nil, advice.Errorf("%w: session %s has no snapshot %q; %s", ErrInvalid, src, at, adviseSnapshots(src))
	}
	vol, err := c.vol.Inspect(ctx, src)
	if err != nil {
		return nil, err
	}
	st, err := decodeSettings(vol.Settings)
	if err != nil {
		return nil, err
	}
	st.Session, st.Created = dst, time.Now().UTC()
	st.ForkOf, st.ForkedBy = src, TestRunID() // whole once ForkDoneFile is written, last
	if _, err := c.vol.Create(ctx, dst, st.Lang, st.Encode(), engine.VolumeOptions{}); err != nil {
		return nil, err
	}
	cleanup := func() {
		_ = c.ctr.Remove(context.Background(), dst, true)
		_ = c.vol.RemoveSession(context.Background(), dst)
	}
	if _, err := c.ctr.Create(ctx, containerSpec(st)); err != nil {
		cleanup()
		return nil, err
	}
	if c.ctr.CreateStarts() {
		// Files go in through the running runtime; it is made again below, so that its agent
		// reads the state copied in rather than the empty one it started with.
		if err := c.ctr.Start(ctx, dst); err != nil {
			cleanup()
			return nil, err
		}
	}

	note := fmt.Sprintf("forked from session %s with an empty state (it had no snapshot)", src)
	var seq int64
	keep := map[string]bool{}
	if chosen != nil {
		seq = chosen.Seq
		note = fmt.Sprintf("forked from session %s at snapshot %s (after its execution %d)", src, chosen.ID, chosen.Seq)
		manifest, data := contract.SnapshotFiles(chosen.ID)
		keep[manifest], keep[data] = true, true
	}
	// The new history starts with a record of where it came from, numbered as the execution
	// the snapshot follows, so that the fork's own executions continue the numbering.
	var line []byte
	if seq > 0 {
		now := time.Now().UTC()
		for _, r := range []history.Record{
			{Kind: history.KindStart, Seq: seq, Code: "# " + note, Status: history.StatusRunning, Started: now},
			{Kind: history.KindEnd, Seq: seq, Code: "# " + note, Status: history.StatusOK, Started: now, Note: note,
				State: &history.State{Status: history.StateSaved, Snapshot: chosen.ID}},
		} {
			b, err := history.EncodeRecord(r)
			if err != nil {
				cleanup()
				return nil, err
			}
			line = append(line, b...)
		}
	}
	// The workspace, less a legacy state folder (a session made before the state volume),
	// within the fork's disk cap: what the copy writes is the files' apparent size (the
	// engine's archive sends a sparse file's holes as zeros), counted as it goes; past the cap
	// nothing more is copied and the fork is undone.
	var deep []string
	capBytes := st.Disk
	if capBytes <= 0 {
		capBytes = contract.DefaultDisk
	}
	var size, entries int64
	var over error
	if err := c.copyBetween(ctx, src, Workspace, dst, Workspace, func(h *tar.Header) (*tar.Header, error) {
		rel, ok := stripWorkspace(h.Name)
		clean := strings.TrimSuffix(rel, "/")
		if !ok || clean == legacyRel || strings.HasPrefix(clean, legacyRel+"/") {
			return nil, nil
		}
		entries++
		if h.Typeflag == tar.TypeReg {
			size += h.Size
		}
		if over = overDisk(dst, size, entries, capBytes, contract.EntryLimit(capBytes), capBytes); over != nil {
			return nil, over
		}
		if dir := path.Join(Workspace, clean); h.Typeflag == tar.TypeDir && tarsafe.Deep(dir) {
			deep = append(deep, dir)
		}
		h.Name = rel
		return h, nil
	}, nil); err != nil || over != nil {
		cleanup()
		if over != nil { // the engine's error is then the cut stream's
			return nil, fmt.Errorf("fork %s into %s: %w (nothing was made)", src, dst, over)
		}
		return nil, fmt.Errorf("fork %s into %s: %w", src, dst, err)
	}
	if len(deep) > 0 {
		cleanup()
		return nil, fmt.Errorf("fork %s into %s: %w; move them higher up in %s first", src, dst, tarsafe.TooDeep(deep), src)
	}
	// The state: the chosen snapshot and the new history.
	srcState := contract.StateDir
	if ci, err := c.ctr.Inspect(ctx, src); err == nil && !ci.StateMounted {
		srcState = contract.LegacyStateDir
	}
	if chosen != nil {
		base := path.Base(srcState)
		if err := c.copyBetween(ctx, src, srcState, dst, contract.StateDir, func(h *tar.Header) (*tar.Header, error) {
			rel, ok := strings.CutPrefix(strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/"), base+"/")
			if !ok || !(rel == contract.SnapshotsDir || rel == contract.SnapdataDir || keep[rel]) {
				return nil, nil
			}
			h.Name = rel
			return h, nil
		}, func(tw *tar.Writer) error {
			if err := tw.WriteHeader(&tar.Header{Name: contract.HistoryFile, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(line)), ModTime: time.Now()}); err != nil {
				return err
			}
			_, err := tw.Write(line)
			return err
		}); err != nil {
			cleanup()
			return nil, fmt.Errorf("fork %s into %s: %w", src, dst, err)
		}
	}
	// The fork is whole: say so, last (a fork whose maker was killed before this line is an
	// incomplete one: see forkIncomplete).
	done, _ := json.Marshal(map[string]any{"fork_of": src, "at": seq, "done": time.Now().UTC()})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: contract.ForkDoneFile, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(done)), ModTime: time.Now()}); err == nil {
		_, _ = tw.Write(done)
	}
	if err := tw.Close(); err != nil {
		cleanup()
		return nil, err
	}
	if err := c.ctr.CopyTo(ctx, dst, contract.StateDir, &buf); err != nil {
		cleanup()
		return nil, fmt.Errorf("fork %s into %s: %w", src, dst, err)
	}
	if c.ctr.CreateStarts() {
		if err := c.ctr.Stop(ctx, dst, 10*time.Second); err != nil {
			cleanup()
			return nil, err
		}
	}
	s, _, err := c.Start(ctx, Spec{Name: dst})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// copyBetween copies srcPath of session src into dstDir of session dst, through the tar stream
// that edit and extra rewrite (see rewriteTar).
func (c *Client) copyBetween(ctx context.Context, src, srcPath, dst, dstDir string, edit func(h *tar.Header) (*tar.Header, error), extra func(tw *tar.Writer) error) error {
	rc, err := c.ctr.CopyFrom(ctx, src, srcPath)
	if err != nil {
		return err
	}
	defer rc.Close()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(rewriteTarOr(pw, rc, edit, extra)) }()
	if err := c.ctr.CopyTo(ctx, dst, dstDir, pr); err != nil {
		pr.CloseWithError(err)
		return err
	}
	return nil
}

// ExportOptions say what `rm --export` keeps.
type ExportOptions struct {
	Dir     string   // created if missing
	Keep    []string // globs matched against the path under /workspace and against the base name
	History bool     // also history.json and history.ipynb
	MaxSize int64    // the size budget of the kept files, as CopyOptions.MaxSize
	// SkipDeep exports what the engine's archive gives of folders too deep for it (see
	// CopyOptions.SkipDeep), passing each such folder to OnSkipped; without it, such a session
	// is not exported, and not removed.
	SkipDeep  bool
	OnSkipped func(dir string)
}

// RemoveExport copies the workspace files that match o.Keep (and the history) to o.Dir, then
// removes the session. Nothing is removed when the export fails.
func (c *Client) RemoveExport(ctx context.Context, name string, force bool, o ExportOptions) (int, error) {
	n, err := c.Export(ctx, name, force, o)
	if err != nil {
		return n, err
	}
	if err := c.ctr.Remove(ctx, name, true); err != nil && !errors.Is(err, engine.ErrNotFound) {
		return n, err
	}
	if err := c.removeHelpers(ctx, name); err != nil {
		return n, err
	}
	return n, c.vol.RemoveSession(ctx, name)
}

// Export is RemoveExport without the removal: the files are in o.Dir and the session is as it
// was. force allows a running session (as for its removal), whose files may change meanwhile.
// For a caller that removes the session only once the export is safe elsewhere (runtimectl
// serve, after the client took all of it).
func (c *Client) Export(ctx context.Context, name string, force bool, o ExportOptions) (int, error) {
	if err := c.exists(ctx, name); err != nil {
		return 0, err
	}
	for _, g := range o.Keep {
		if _, err := path.Match(g, ""); err != nil {
			return 0, advice.Errorf("%w %s %q: %v", ErrInvalid, flag("keep glob", "--keep"), g, err)
		}
	}
	ci, err := c.ensureContainer(ctx, name)
	if err != nil {
		return 0, err
	}
	if ci.Running && !force {
		return 0, advice.Errorf("%w: %q; %s", ErrRunning, name, adviseStopOrForce(name))
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return 0, fmt.Errorf("export to %s: %w; nothing was removed", o.Dir, err)
	}
	n := 0
	if len(o.Keep) > 0 {
		rc, err := c.ctr.CopyFrom(ctx, name, Workspace)
		if err != nil {
			return 0, fmt.Errorf("export: %w; nothing was removed", err)
		}
		pr, pw := io.Pipe()
		var deep, unkept []string
		kept := map[string]bool{}
		go func() {
			pw.CloseWithError(rewriteTar(pw, rc, func(h *tar.Header) *tar.Header {
				rel, ok := stripWorkspace(h.Name)
				clean := strings.TrimSuffix(rel, "/")
				if dir := path.Join(Workspace, clean); ok && h.Typeflag == tar.TypeDir && tarsafe.Deep(dir) {
					deep = append(deep, dir)
				}
				if !ok || clean == legacyRel || strings.HasPrefix(clean, legacyRel+"/") || (h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeLink) {
					return nil
				}
				if !matchAny(o.Keep, clean) {
					return nil
				}
				if h.Typeflag == tar.TypeLink {
					// A hard link's data is its target's: kept when the target was.
					target, _ := stripWorkspace(h.Linkname)
					if !kept[target] {
						unkept = append(unkept, clean+" (a hard link to "+target+")")
						return nil
					}
					h.Linkname = target
				}
				kept[clean] = true
				h.Name = clean
				return h
			}, nil))
		}()
		n, err = tarsafe.ExtractWith(pr, o.Dir, tarsafe.Options{MaxBytes: o.MaxSize})
		pr.CloseWithError(err)
		rc.Close()
		if err != nil {
			return n, fmt.Errorf("export to %s: %w; nothing was removed", o.Dir, err)
		}
		if len(unkept) > 0 {
			return n, advice.Errorf("export to %s: %s matches a %s but its data is another file's, which none matches; nothing was removed: add a glob for it", o.Dir, unkept[0], flag("Keep glob", "--keep"))
		}
		if len(deep) > 0 && !o.SkipDeep {
			return n, advice.Errorf("export to %s: %w; nothing was removed: move them higher up, or %s to export the rest", o.Dir, tarsafe.TooDeep(deep), advice.Words{Lib: "set ExportOptions.SkipDeep", CLI: "give --skip-unreadable"})
		}
		for _, d := range deep {
			if o.OnSkipped != nil {
				o.OnSkipped(d)
			}
		}
	}
	if o.History {
		execs, _, err := c.readHistory(ctx, name)
		if err != nil {
			return n, fmt.Errorf("export history: %w; nothing was removed", err)
		}
		for _, f := range []struct {
			name  string
			write func(io.Writer) error
		}{
			{"history.json", func(w io.Writer) error { return history.WriteJSON(w, execs) }},
			{"history.ipynb", func(w io.Writer) error { return history.WriteIPYNB(w, ci.Lang, execs) }},
		} {
			var buf bytes.Buffer
			if err := f.write(&buf); err != nil {
				return n, fmt.Errorf("export history: %w; nothing was removed", err)
			}
			if err := os.WriteFile(filepath.Join(o.Dir, f.name), buf.Bytes(), 0o644); err != nil {
				return n, fmt.Errorf("export history: %w; nothing was removed", err)
			}
		}
	}
	return n, nil
}

func matchAny(globs []string, rel string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, rel); ok {
			return true
		}
		if ok, _ := path.Match(g, path.Base(rel)); ok {
			return true
		}
	}
	return false
}

// forkIncomplete says whether session name (settings st) is a fork whose making never ended:
// ForkOf is set and its state lacks ForkDoneFile. A fork that cannot be looked at (a stopped
// Kubernetes session has no pod to ask) is not taken for incomplete. makerGone says whether the
// process that made it has ended (then the fork is a leftover, not one being made).
func (c *Client) forkIncomplete(ctx context.Context, name string, st Settings) (incomplete, makerGone bool) {
	if st.ForkOf == "" {
		return false, false
	}
	info, err := c.ctr.Stat(ctx, name, path.Join(contract.StateDir, contract.ForkDoneFile))
	if err != nil || info.Exists {
		return false, false
	}
	return true, st.ForkedBy == "" || testRunGone(st.ForkedBy)
}

// errIncompleteFork is the refusal to start an incomplete fork.
func errIncompleteFork(name string, st Settings, makerGone bool) error {
	if !makerGone {
		return fmt.Errorf("%w: session %q is being forked from %s (by process %s); wait for the fork to end", ErrInvalid, name, st.ForkOf, st.ForkedBy)
	}
	return advice.Errorf("%w: session %q is a fork of %s that never ended (the process making it, %s, was stopped midway): its files may be partial; %s and fork again", ErrInvalid, name, st.ForkOf, st.ForkedBy,
		advice.Words{Lib: "remove it (Client.Remove with force)", CLI: "remove it (`runtimectl session rm --force " + name + "`)"})
}
