package kube

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/runtimectl/runtimectl/engine"
)

// Files go in and out of a pod as tar streams through pods/exec (Kubernetes has no copy API;
// kubectl cp does the same). Under the state folder the commands run as the agent's root
// (which owns it, mode 0700); everywhere else as the session user through setpriv, so a copy
// can neither read nor write more than the session's own code could, and files copied in belong
// to the session user, as the tar headers written by session ask.

// asUser returns cmd as run for a path: as root under StateDir, else as the session user.
func asUser(p string, cmd ...string) []string {
	if p == StateDir || strings.HasPrefix(p, StateDir+"/") {
		return cmd
	}
	uid := strconv.Itoa(SessionUID)
	return append([]string{"setpriv", "--reuid=" + uid, "--regid=" + uid, "--clear-groups", "--"}, cmd...)
}

// exitMissing is the status of the copy scripts for a path that does not exist.
const exitMissing = 3

func checkPath(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return fmt.Errorf("path %q: give an absolute, clean path", p)
	}
	return nil
}

// CopyFrom returns a tar stream of path in the session's pod, its entries named from path's
// base name, as Docker's copy does; engine.ErrNotFound when path does not exist.
func (b *Backend) CopyFrom(ctx context.Context, session, p string) (io.ReadCloser, error) {
	if err := checkPath(p); err != nil {
		return nil, err
	}
	dir, base := path.Dir(p), path.Base(p)
	if p == "/" {
		base = "."
	}
	script := `cd "$1" && { [ -e "$2" ] || [ -L "$2" ] || exit 3; } && exec tar -c -f - -- "$2"`
	cmd := asUser(p, "sh", "-c", script, "sh", dir, base)
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(ctx)
	go func() { pw.CloseWithError(b.run(ctx, session, cmd, nil, pw)) }()
	br := bufio.NewReaderSize(pr, 64<<10)
	if _, err := br.Peek(1); err != nil {
		cancel()
		var ee *ExitError
		if errors.As(err, &ee) && ee.Code == exitMissing {
			return nil, fmt.Errorf("copy %s from session %q: %w: no such file or folder", p, session, engine.ErrNotFound)
		}
		if err == io.EOF {
			err = errors.New("the pod sent nothing")
		}
		return nil, fmt.Errorf("copy %s from session %q: %w", p, session, err)
	}
	return &readCloser{Reader: br, close: func() error { cancel(); return pr.Close() }}, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r *readCloser) Close() error { return r.close() }

// CopyTo extracts the tar stream content into dir in the session's pod. dir must exist.
func (b *Backend) CopyTo(ctx context.Context, session, dir string, content io.Reader) error {
	if err := checkPath(dir); err != nil {
		return err
	}
	// -p keeps the modes of the headers; owners are whoever runs tar (see asUser).
	script := `[ -d "$1" ] || exit 3; exec tar -x -p --no-same-owner -f - -C "$1"`
	err := b.run(ctx, session, asUser(dir, "sh", "-c", script, "sh", dir), content, io.Discard)
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == exitMissing {
		return fmt.Errorf("copy into %s of session %q: %w: no such folder", dir, session, engine.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("copy into %s of session %q: %w", dir, session, err)
	}
	return nil
}

// Stat describes path in the session's pod (Exists false when there is none).
func (b *Backend) Stat(ctx context.Context, session, p string) (engine.PathInfo, error) {
	if err := checkPath(p); err != nil {
		return engine.PathInfo{}, err
	}
	script := `if [ -e "$1" ]; then exec stat -L -c '%F|%s' -- "$1"; else exit 3; fi`
	var out bytes.Buffer
	err := b.run(ctx, session, asUser(p, "sh", "-c", script, "sh", p), nil, &out)
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code == exitMissing {
		return engine.PathInfo{}, nil
	}
	if err != nil {
		return engine.PathInfo{}, fmt.Errorf("stat %s in session %q: %w", p, session, err)
	}
	return parseStat(out.String())
}

// parseStat reads `stat -c '%F|%s'`: "directory|4096", "regular file|12".
func parseStat(s string) (engine.PathInfo, error) {
	kind, size, ok := strings.Cut(strings.TrimSpace(s), "|")
	n, err := strconv.ParseInt(size, 10, 64)
	if !ok || err != nil {
		return engine.PathInfo{}, fmt.Errorf("stat: unexpected output %q", s)
	}
	return engine.PathInfo{Exists: true, IsDir: kind == "directory", Size: n}, nil
}
