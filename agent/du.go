package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/runtimectl/runtimectl/execproto"

	"golang.org/x/sys/unix"
)

// TreeUsage is what a folder tree takes on disk.
type TreeUsage struct {
	Bytes   int64 `json:"bytes"`   // allocated blocks (st_blocks × 512), each inode once: holes take nothing
	Entries int64 `json:"entries"` // files, folders and links counted
	Skipped int64 `json:"skipped"` // entries that could not be read (counted as nothing)
	Depth   int   `json:"depth"`   // the deepest level reached
}

// maxWalkDepth bounds how deep MeasureTree goes (the names still to visit are kept per level).
const maxWalkDepth = 1_000_000

// MeasureTree measures the tree under dir. It walks with folder descriptors (openat, fstatat
// relative to the folder, openat ".." to come back up), never with paths, and holds one open
// folder at a time, so neither the path length nor the open-files limit bounds it: a folder
// thousands of levels deep is measured like any other, where a path walk (and Docker's volume
// sizes) stops at PATH_MAX. Links are not followed and other mounts are not entered. Code that
// moves folders during the walk can make the figure wrong, never make it read anything but
// metadata.
func MeasureTree(dir string) (TreeUsage, error) {
	var u TreeUsage
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(dir, flags, 0)
	if err != nil {
		return u, fmt.Errorf("measure %s: %w", dir, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return u, fmt.Errorf("measure %s: %w", dir, err)
	}
	dev := st.Dev
	u.Bytes = st.Blocks * 512
	seen := map[[2]uint64]bool{}
	names, err := readNames(fd)
	if err != nil {
		unix.Close(fd)
		return u, fmt.Errorf("measure %s: %w", dir, err)
	}
	stack := [][]string{names} // per level, the names still to visit
	defer func() { unix.Close(fd) }()
	for len(stack) > 0 {
		top := len(stack) - 1
		if len(stack[top]) == 0 {
			stack = stack[:top]
			if len(stack) == 0 {
				break
			}
			up, err := unix.Openat(fd, "..", flags, 0)
			if err != nil {
				return u, fmt.Errorf("measure %s: back up from level %d: %w", dir, top, err)
			}
			unix.Close(fd)
			fd = up
			continue
		}
		name := stack[top][0]
		stack[top] = stack[top][1:]
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			u.Skipped++
			continue
		}
		u.Entries++
		if st.Dev != dev {
			continue // another mount
		}
		isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
		if st.Nlink > 1 && !isDir {
			key := [2]uint64{st.Dev, st.Ino}
			if seen[key] {
				continue
			}
			seen[key] = true
		}
		u.Bytes += st.Blocks * 512
		if !isDir {
			continue
		}
		if len(stack) >= maxWalkDepth {
			u.Skipped++
			continue
		}
		sub, err := unix.Openat(fd, name, flags, 0)
		if err != nil {
			u.Skipped++
			continue
		}
		subNames, err := readNames(sub)
		if err != nil {
			unix.Close(sub)
			u.Skipped++
			continue
		}
		unix.Close(fd)
		fd = sub
		stack = append(stack, subNames)
		if len(stack)-1 > u.Depth {
			u.Depth = len(stack) - 1
		}
	}
	return u, nil
}

// readNames returns the names in the folder fd (without "." and ".."), leaving fd open.
func readNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 32<<10)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// The disk watchdog. Docker's local volumes have no size limit, so the agent measures the
// workspace (MeasureTree) and refuses executions while it is past the session's cap
// (Config.DiskLimit), unless a request asks to ignore it (to run the code that frees space).
// It measures at start, soon after each execution (kicked by it), and every diskEvery; each
// walk waits at least diskCost times its own length after the previous, so that a workspace of
// millions of files costs the session a few percent of a CPU at most.
const (
	diskEvery = 10 * time.Second
	diskCost  = 20
)

// diskWatch measures the workspace until ctx ends.
func (a *Agent) diskWatch(ctx context.Context) {
	if a.cfg.DiskLimit <= 0 {
		return
	}
	for {
		t := time.Now()
		u, err := MeasureTree(a.cfg.Workdir)
		if err != nil {
			a.cfg.Logger.Warn("measure the workspace", "err", err)
		} else {
			a.diskUsed.Store(u.Bytes)
			a.disk.entries.Store(u.Entries)
			a.checkDiskCap()
		}
		if su, err := MeasureTree(a.cfg.StateDir); err == nil {
			a.disk.state.Store(su.Bytes)
		}
		next := t.Add(diskCost * time.Since(t))
		every := diskEvery
		if a.diskNear() {
			every = diskNearEvery
		}
		select {
		case <-ctx.Done():
			return
		case <-a.diskKick:
		case <-time.After(every):
		}
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(d):
			}
		}
	}
}

// kickDisk asks the watchdog for a measurement soon (after an execution, which may have
// written).
func (a *Agent) kickDisk() {
	select {
	case a.diskKick <- struct{}{}:
	default:
	}
}

// diskRefusal returns why an execution is refused for the disk cap, or "".
func (a *Agent) diskRefusal(req execproto.Request) string {
	why := a.diskOverWhy()
	if why == "" || req.IgnoreDiskCap {
		return ""
	}
	return why + ": executions are refused until it is under it; free space with code that deletes files, run past the cap, or copy out what you need and remove the session"
}
