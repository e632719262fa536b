package server

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/runtimectl/runtimectl/session"
)

// An export (DELETE ?keep=... or ?keep_history=true) is never lost: the session is removed
// only once the whole tar has been written to the client. A client that reads slowly and is
// cut off by the write timeout, or that leaves, or a server that stops or is killed in the
// middle, leaves the session as it was: ask again. The reply has a Content-Length and the
// tar's SHA-256 (X-Runtimectl-Export-Sha256), so a client can tell a whole tar from a cut
// one; with remove=false the session is kept whatever happens, and a plain DELETE removes it
// once the client has checked what it received: that second request is the acknowledgement.

// ExportDigestHeader carries the SHA-256 of an export's tar, in hex.
const ExportDigestHeader = "X-Runtimectl-Export-Sha256"

// ExportRemovedHeader says whether the session is removed once the tar is written: "true",
// or "false" with remove=false.
const ExportRemovedHeader = "X-Runtimectl-Export-Removes"

func (s *Server) removeExport(w http.ResponseWriter, r *http.Request, tok Token, name string, force bool, o session.ExportOptions) {
	ctx := r.Context()
	remove := true
	if v := r.URL.Query().Get("remove"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid", fmt.Sprintf("remove=%q: give true (the default: remove once the tar is written) or false (export only)", v))
			return
		}
		remove = b
	}
	if !s.acquireTransfer(w, tok) {
		return
	}
	defer s.releaseTransfer(tok)
	dir, err := os.MkdirTemp("", "runtimectl-export-")
	if err != nil {
		fail(w, err)
		return
	}
	defer os.RemoveAll(dir)
	o.Dir, o.MaxSize = dir, s.cfg.MaxDownload
	if _, err := s.cfg.Client.Export(ctx, name, force, o); err != nil {
		fail(w, err)
		return
	}
	// A first pass gives the tar's length and digest before the first byte is sent.
	h := sha256.New()
	size, err := writeTar(h, dir)
	if err != nil {
		fail(w, fmt.Errorf("export of session %s: %w; nothing was removed", name, err))
		return
	}
	w.Header().Set("Content-Type", TarType)
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.Header().Set(ExportDigestHeader, hex.EncodeToString(h.Sum(nil)))
	w.Header().Set(ExportRemovedHeader, strconv.FormatBool(remove))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	dw := deadlineWriter{w, func() { _ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)) }}
	n, err := writeTar(dw, dir)
	if err == nil {
		err = rc.Flush()
	}
	if err != nil || n != size {
		s.log.Warn("export not delivered whole: the session is kept", "session", name, "sent", n, "of", size, "err", err)
		return
	}
	if !remove {
		return
	}
	s.forget(name)
	// The client has the whole tar: the removal goes on even if it leaves now.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if err := s.cfg.Client.Remove(rctx, name, true); err != nil {
		s.log.Warn("export delivered, removal failed: the session is kept", "session", name, "err", err)
	}
}

// writeTar writes the folder dir as a tar to w and returns the bytes written; the same
// folder gives the same bytes.
func writeTar(w io.Writer, dir string) (int64, error) {
	cw := &countWriter{w: w}
	tw := tar.NewWriter(cw)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		return cw.n, err
	}
	err := tw.Close()
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
