package server

import (
	"errors"
	"fmt"
	"io"
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
	if !s.acquireTransfer(w, tok) {
		return
	}
	defer s.releaseTransfer(tok)
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
