package agent

import (
	"bufio"
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// An idle session's memory is what its container's cgroup is charged, and the agent's share of
// it was mostly its own binary: the pages of runtime-agent that starting, restoring and the
// first executions read in stay in the page cache, charged to the session, long after the code
// they hold last ran (on fuse-overlayfs every container has its own copy of them). Once the
// session has been quiet for a while, the agent gives back the heap it no longer uses and asks
// the kernel to reclaim its binary's pages (MADV_PAGEOUT): an idle agent runs a few loops, which
// fault back the few pages they need. Nothing about the fork-bomb guarantee changes: the threads
// kept in reserve stay, and a page fault needs no new thread or process.

// shedAfter is how long the session stays quiet (no execution began or ended) before the agent
// sheds; shedPoll how often it looks.
const (
	shedAfter = 5 * time.Second
	shedPoll  = 2 * time.Second
)

const madvPageout = 21 // MADV_PAGEOUT (linux 5.4)

// ShedWhenIdle sheds memory each time the session has been quiet for shedAfter after some
// activity (and once after the start), until ctx ends.
func (a *Agent) ShedWhenIdle(ctx context.Context) {
	t := time.NewTicker(shedPoll)
	defer t.Stop()
	var last, shed string
	quietSince := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st := a.Status()
		key := st.LastExec + "|" + strconv.FormatInt(st.NextSeq, 10) + "|" + strconv.FormatInt(st.Running, 10)
		if key != last {
			last, quietSince = key, time.Now()
			continue
		}
		if st.Running == 0 && st.Queued == 0 && key != shed && time.Since(quietSince) >= shedAfter {
			shed = key
			ShedMemory()
		}
	}
}

// ShedMemory returns the Go heap's free pages to the system and pages out this executable's
// file mappings.
func ShedMemory() {
	debug.FreeOSMemory()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || fields[5] != exe {
			continue
		}
		lo, hi, ok := strings.Cut(fields[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			continue
		}
		_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), madvPageout)
	}
}
