package session

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
)

// createContainer creates the session's container from its settings (not starting it), or
// finds the one another process made at the same moment (created says which). A session made
// before sessions had a state volume gets one here, with the state its agent kept in the
// workspace moved in (migrateState) by the process that made the container, whenever its state
// volume holds neither a history nor the mark of an earlier move (so that a move cut short is
// made again); when the move fails, the new container (and a state volume made for it) are
// removed again, so that the next start tries afresh.
func (c *Client) createContainer(ctx context.Context, st Settings) (ci engine.Info, created bool, err error) {
	fresh, err := c.vol.EnsureState(ctx, st.Session)
	if err != nil {
		return engine.Info{}, false, err
	}
	if err := c.startEgress(ctx, st); err != nil { // Kubernetes' pod starts at once: its proxy first
		return engine.Info{}, false, err
	}
	ci, created, err = c.ctr.CreateIfAbsent(ctx, containerSpec(st))
	if err != nil || !created || !c.stateIsEmpty(ctx, st.Session) {
		return ci, created, err
	}
	if err := c.migrateState(ctx, st.Session); err != nil {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.callTimeout)
		defer cancel()
		_ = c.ctr.Remove(cctx, st.Session, true)
		if fresh {
			_ = c.vol.RemoveState(cctx, st.Session)
		}
		return engine.Info{}, false, err
	}
	return ci, true, nil
}

// stateIsEmpty says whether the session's state volume, seen through its container, holds
// neither a history nor the mark of a move (false when it cannot tell).
func (c *Client) stateIsEmpty(ctx context.Context, name string) bool {
	for _, f := range []string{contract.HistoryFile, contract.MigratedFile} {
		if info, err := c.ctr.Stat(ctx, name, contract.StatePath(f)); err != nil || info.Exists {
			return false
		}
	}
	return true
}

// legacyRel is the legacy state folder relative to the workspace, as tar streams of the
// workspace name it.
var legacyRel = strings.TrimPrefix(contract.LegacyStateDir, contract.Workspace+"/")

// migrateState copies the state that the agent of a session made before the state volume kept
// in the workspace (contract.LegacyStateDir) to the state volume, through the session's new
// container, which mounts both and is not running. Only what root wrote there is copied:
// folders and regular files owned by root, inside a folder owned by root. What the session
// user could have planted in its workspace (a replaced folder, links, files of its own) is
// left behind and counted, never taken for the runtime's state. A MigratedFile records the
// move and tells the agent to remove the old folder. A session with no legacy state has nothing
// to copy.
func (c *Client) migrateState(ctx context.Context, name string) error {
	rc, err := c.ctr.CopyFrom(ctx, name, contract.LegacyStateDir)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	// The engine holds the container while an archive of it is read, so the filtered stream
	// goes through a file on the host before it is copied back in.
	tmp, err := os.CreateTemp("", "runtimectl-migrate-*.tar")
	if err != nil {
		rc.Close()
		return fmt.Errorf("move the state of session %q: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	base := path.Base(contract.LegacyStateDir)
	var trusted bool
	var kept, left int
	err = rewriteTar(tmp, rc, func(h *tar.Header) *tar.Header {
		n := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if n == base {
			trusted = h.Typeflag == tar.TypeDir && h.Uid == 0
			return nil
		}
		rel, ok := strings.CutPrefix(n, base+"/")
		if !ok || !trusted || h.Uid != 0 || (h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeReg) {
			left++
			return nil
		}
		kept++
		h.Name = rel
		return h
	}, func(tw *tar.Writer) error {
		note := fmt.Sprintf("state moved from %s to the session's state volume at %s: %d entries, %d left behind\n", contract.LegacyStateDir, time.Now().UTC().Format(time.RFC3339), kept, left)
		if !trusted {
			note = fmt.Sprintf("%s was not root's (the session user may have replaced it): nothing moved from it\n", contract.LegacyStateDir)
		}
		if err := tw.WriteHeader(&tar.Header{Name: contract.MigratedFile, Typeflag: tar.TypeReg, Mode: 0o600, Size: int64(len(note)), ModTime: time.Now()}); err != nil {
			return err
		}
		_, err := io.WriteString(tw, note)
		return err
	})
	rc.Close()
	if err == nil {
		_, err = tmp.Seek(0, io.SeekStart)
	}
	if err != nil {
		return fmt.Errorf("move the state of session %q: read %s: %w", name, contract.LegacyStateDir, err)
	}
	if err := c.ctr.CopyTo(ctx, name, contract.StateDir, tmp); err != nil {
		return fmt.Errorf("move the state of session %q to its state volume: %w", name, err)
	}
	c.logger.Info("session state moved to its state volume", "session", name, "entries", kept, "left_behind", left, "trusted", trusted)
	return nil
}
