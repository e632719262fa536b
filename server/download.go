package server

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/session"
)

// Downloads: the size is known before anything is copied (a file's from the engine's Stat and
// its archive entry's header, a folder's from a first pass over its archive that stops as soon
// as the total passes --max-download); only then is it copied, within that budget, to a file in
// the server's temp folder, read from the engine at its own speed, and sent to the client from
// there. The engine's archive stream is never held open by a slow client: Docker keeps the
// container locked while one is open, which would stall every other call on the session. A
// token runs at most MaxTransfers transfers (downloads, uploads, exports) at once, so a token
// holds at most MaxTransfers x --max-download of the server's disk.

// DefaultMaxTransfers is Config.MaxTransfers' default.
const DefaultMaxTransfers = 4

// acquireTransfer counts a file transfer of tok, or answers 429 past the cap.
func (s *Server) acquireTransfer(w http.ResponseWriter, tok Token) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.transfers[tok.Name] >= s.cfg.MaxTransfers {
		writeError(w, http.StatusTooManyRequests, "busy", fmt.Sprintf("%d file transfers of this token run already (the cap, serve --max-transfers); wait for one to end", s.cfg.MaxTransfers))
		return false
	}
	s.transfers[tok.Name]++
	return true
}

func (s *Server) releaseTransfer(tok Token) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transfers[tok.Name]--
}

// readFiles is `session cp NAME:PATH ...`: a file comes back as its bytes
// (application/octet-stream, with its Content-Length), a folder as a tar of it
// (application/x-tar, entries under the folder's own name; regular files and folders only).
func (s *Server) readFiles(w http.ResponseWriter, r *http.Request, tok Token) {
	name, p := r.PathValue("name"), r.PathValue("path")
	ctx := r.Context()
	if err := s.checkOwner(ctx, name, tok, false); err != nil {
		fail(w, err)
		return
	}
	// Every link on the way is followed inside the workspace only (the engine's copy would
	// follow them as root, into the runtime's state).
	abs, err := s.cfg.Client.ResolveRead(ctx, name, p)
	if err != nil {
		fail(w, err)
		return
	}
	if !s.acquireTransfer(w, tok) {
		return
	}
	defer s.releaseTransfer(tok)
	info, err := s.cfg.Client.Runtimes().Stat(ctx, name, abs)
	if err != nil {
		fail(w, err)
		return
	}
	if !info.Exists {
		fail(w, fmt.Errorf("%w path %q: no such file or folder in session %s", session.ErrInvalid, p, name))
		return
	}
	tooLarge := func(total int64, more bool) {
		over := fmt.Sprintf("%d bytes", total)
		if more {
			over = "more than " + over
		}
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("%s holds %s, over the server's cap of %d (serve --max-download); fetch a smaller part", p, over, s.cfg.MaxDownload))
	}
	if !info.IsDir && info.Size > s.cfg.MaxDownload {
		tooLarge(info.Size, false)
		return
	}
	open := func() (*tar.Reader, io.Closer, error) {
		rc, err := s.cfg.Client.Runtimes().CopyFrom(ctx, name, abs)
		if err != nil {
			return nil, nil, err
		}
		return tar.NewReader(rc), rc, nil
	}
	tr, rc, err := open()
	if err != nil {
		fail(w, err)
		return
	}
	defer func() { rc.Close() }()
	rcw := http.NewResponseController(w)
	deadline := func() { _ = rcw.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)) }
	// The spool is made once the size is known to be within the budget.
	var spool *os.File
	makeSpool := func() bool {
		var err error
		if spool, err = os.CreateTemp("", "runtimectl-download-"); err != nil {
			fail(w, err)
			return false
		}
		return true
	}
	defer func() {
		if spool != nil {
			spool.Close()
			os.Remove(spool.Name())
		}
	}()
	send := func(ctype string) {
		rc.Close() // the engine's stream is done with before the client is served
		size, err := spool.Seek(0, io.SeekCurrent)
		if err == nil {
			_, err = spool.Seek(0, io.SeekStart)
		}
		if err != nil {
			fail(w, err)
			return
		}
		w.Header().Set("Content-Type", ctype)
		w.Header().Set("Content-Length", fmt.Sprint(size))
		w.WriteHeader(http.StatusOK)
		if _, err := io.Copy(deadlineWriter{w, deadline}, spool); err != nil {
			s.log.Warn("send: cut", "session", name, "path", p, "err", err)
		}
	}
	if !info.IsDir {
		hdr, err := tr.Next()
		if err != nil || hdr.Typeflag != tar.TypeReg {
			fail(w, fmt.Errorf("%w path %q: not a regular file (a link?); copy the file it names", session.ErrInvalid, p))
			return
		}
		if !s.cfg.Client.SessionOwns(r.Context(), hdr.Uid) {
			fail(w, notTheUsers(p, hdr))
			return
		}
		if hdr.Size > s.cfg.MaxDownload {
			tooLarge(hdr.Size, false)
			return
		}
		if !makeSpool() {
			return
		}
		if n, err := io.Copy(spool, io.LimitReader(tr, hdr.Size)); err != nil || n != hdr.Size {
			fail(w, fmt.Errorf("read %s from session %s: %d of %d bytes: %v", p, name, n, hdr.Size, err))
			return
		}
		send("application/octet-stream")
		return
	}
	// A folder: count first, stopping past the budget.
	keep := folderFilter(abs)
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fail(w, fmt.Errorf("read %s from session %s: %w", p, name, err))
			return
		}
		if keep(hdr) && !s.cfg.Client.SessionOwns(r.Context(), hdr.Uid) {
			fail(w, notTheUsers(p, hdr))
			return
		}
		if keep(hdr) && hdr.Typeflag == tar.TypeReg {
			if total += hdr.Size; total > s.cfg.MaxDownload {
				tooLarge(s.cfg.MaxDownload, true)
				return
			}
		}
	}
	rc.Close()
	if tr, rc, err = open(); err != nil {
		fail(w, err)
		return
	}
	if !makeSpool() {
		return
	}
	tw := tar.NewWriter(spool)
	left := s.cfg.MaxDownload
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fail(w, fmt.Errorf("read %s from session %s: %w", p, name, err))
			return
		}
		if !keep(hdr) {
			continue
		}
		if !s.cfg.Client.SessionOwns(r.Context(), hdr.Uid) {
			fail(w, notTheUsers(p, hdr)) // it changed between the passes
			return
		}
		if hdr.Typeflag == tar.TypeReg {
			if left -= hdr.Size; left < 0 {
				tooLarge(s.cfg.MaxDownload, true) // it grew between the passes
				return
			}
		}
		out := &tar.Header{Name: hdr.Name, Typeflag: hdr.Typeflag, Mode: hdr.Mode, Size: hdr.Size, ModTime: hdr.ModTime, Format: tar.FormatPAX}
		if hdr.Typeflag == tar.TypeDir {
			out.Size = 0
		}
		if err := tw.WriteHeader(out); err != nil {
			fail(w, err)
			return
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := io.Copy(tw, io.LimitReader(tr, hdr.Size)); err != nil {
				fail(w, fmt.Errorf("read %s from session %s: %w", p, name, err))
				return
			}
		}
	}
	if err := tw.Close(); err != nil {
		fail(w, err)
		return
	}
	send(TarType)
}

// folderFilter keeps the regular files and folders of a folder's archive whose names stay in
// it, and never the state folder earlier versions kept in /workspace.
func folderFilter(abs string) func(*tar.Header) bool {
	parent := path.Dir(abs)
	return func(h *tar.Header) bool {
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir {
			return false
		}
		if !filepath.IsLocal(h.Name) {
			return false
		}
		full := path.Join(parent, path.Clean(h.Name))
		legacy := contract.LegacyStateDir
		return full != legacy && !strings.HasPrefix(full, legacy+"/")
	}
}

// deadlineWriter gives each write to the client its own deadline.
type deadlineWriter struct {
	w        io.Writer
	deadline func()
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	d.deadline()
	return d.w.Write(p)
}

// notTheUsers refuses an entry that the session user does not own: what a read out of a
// session sends is the session's own, never the root-owned state a link swapped in at the
// last moment would lead to.
func notTheUsers(p string, hdr *tar.Header) error {
	return fmt.Errorf("%w path %q: %s belongs to uid %d, not to the session's user: not the session's own (a link out of the workspace?)", session.ErrInvalid, p, hdr.Name, hdr.Uid)
}
