package server

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/runtimectl/runtimectl/internal/tarsafe"
	"github.com/runtimectl/runtimectl/session"
)

// TarType is the media type of a folder, both ways.
const TarType = "application/x-tar"

// readFiles is `session cp NAME:PATH ...`: a file comes back as its bytes
// (application/octet-stream), a folder as a tar of it (application/x-tar, entries under the
// folder's own name).
func (s *Server) readFiles(w http.ResponseWriter, r *http.Request, tok Token) {
	name, p := r.PathValue("name"), r.PathValue("path")
	ctx := r.Context()
	if err := s.checkOwner(ctx, name, tok, false); err != nil {
		fail(w, err)
		return
	}
	if _, err := session.ResolvePath(p); err != nil {
		fail(w, err)
		return
	}
	dir, err := os.MkdirTemp("", "runtimectl-files-")
	if err != nil {
		fail(w, err)
		return
	}
	defer os.RemoveAll(dir)
	if err := s.cfg.Client.CopyFrom(ctx, name, p, dir); err != nil {
		fail(w, err)
		return
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		fail(w, fmt.Errorf("%w path %q: nothing to send", session.ErrInvalid, p))
		return
	}
	top := filepath.Join(dir, entries[0].Name())
	var total int64
	_ = filepath.WalkDir(top, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	if total > s.cfg.MaxDownload {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("%s holds %d bytes, over the server's cap of %d (serve --max-download); fetch a smaller part", p, total, s.cfg.MaxDownload))
		return
	}
	if !entries[0].IsDir() {
		f, err := os.Open(top)
		if err != nil {
			fail(w, err)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", fmt.Sprint(total))
		w.WriteHeader(http.StatusOK)
		_, _ = io.Copy(w, f)
		return
	}
	w.Header().Set("Content-Type", TarType)
	w.WriteHeader(http.StatusOK)
	tw := tar.NewWriter(w)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		s.log.Warn("send tar", "session", name, "path", p, "err", err)
	}
	_ = tw.Close()
}

// writeFiles puts a file (any body) at PATH, or, with Content-Type application/x-tar, the
// tar's entries under the folder PATH. Files belong to the session's user; entries that would
// leave the folder are refused.
func (s *Server) writeFiles(w http.ResponseWriter, r *http.Request, tok Token) {
	name, p := r.PathValue("name"), r.PathValue("path")
	ctx := r.Context()
	if err := s.checkOwner(ctx, name, tok, false); err != nil {
		fail(w, err)
		return
	}
	abs, err := session.ResolvePath(p)
	if err != nil {
		fail(w, err)
		return
	}
	if abs == session.Workspace && !isTar(r) {
		fail(w, fmt.Errorf("%w path %q: name a file under /workspace", session.ErrInvalid, p))
		return
	}
	dir, err := os.MkdirTemp("", "runtimectl-files-")
	if err != nil {
		fail(w, err)
		return
	}
	defer os.RemoveAll(dir)
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxUpload)
	tooLarge := func(err error) bool {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("upload over %d bytes (serve --max-upload); send less", s.cfg.MaxUpload))
			return true
		}
		return false
	}
	if !isTar(r) {
		// The temporary file carries the destination's name, so that a destination that is a
		// folder receives it under that name.
		src := filepath.Join(dir, path.Base(abs))
		f, err := os.Create(src)
		if err != nil {
			fail(w, err)
			return
		}
		_, err = io.Copy(f, body)
		f.Close()
		if err != nil {
			if !tooLarge(err) {
				writeError(w, http.StatusBadRequest, "invalid", "read the upload: "+err.Error())
			}
			return
		}
		if err := s.cfg.Client.CopyTo(ctx, name, src, p); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	// A tar: extract it safely here, then copy the folder in under PATH.
	root := filepath.Join(dir, path.Base(abs))
	if abs == session.Workspace {
		root = filepath.Join(dir, "workspace")
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		fail(w, err)
		return
	}
	if _, err := tarsafe.Extract(body, root, "", nil); err != nil {
		if !tooLarge(err) {
			writeError(w, http.StatusBadRequest, "invalid", "the tar: "+err.Error())
		}
		return
	}
	info, err := s.cfg.Client.Runtimes().Stat(ctx, name, abs)
	if err != nil {
		fail(w, err)
		return
	}
	if !info.Exists {
		// A new folder: it is the tar's root.
		if err := s.cfg.Client.CopyTo(ctx, name, root, p); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !info.IsDir {
		fail(w, fmt.Errorf("%w path %q: a file; a tar goes into a folder", session.ErrInvalid, p))
		return
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		fail(w, err)
		return
	}
	for _, e := range entries {
		if err := s.cfg.Client.CopyTo(ctx, name, filepath.Join(root, e.Name()), strings.TrimSuffix(p, "/")+"/"); err != nil {
			fail(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func isTar(r *http.Request) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt == TarType
}
