package agent

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/runtimectl/runtimectl/contract"
)

// The disk cap holds against what outlives an execution. The watchdog (du.go) measures the
// workspace's bytes and entries (files, folders, links: inodes are not free, and 200,000 empty
// files take no blocks); past either cap it asks the run loop to stop every process of the
// session user (diskStop): a background writer started by one execution (setsid, nohup,
// start_new_session) is killed with the interpreter, which comes back from its latest
// snapshot, and a running execution ends as crashed with the reason. Executions stay refused
// until the workspace is under both caps again (diskRefusal), as before. Near the cap the
// watchdog measures every diskNearEvery instead of diskEvery, so what passes the cap is bounded
// by what the code can write in about a second (and the walk's own length).

const diskNearEvery = time.Second

// entryLimit is the workspace's cap on entries (contract.EntryLimit).
func (c Config) entryLimit() int64 { return contract.EntryLimit(c.DiskLimit) }

// diskState is what the watchdog last found, shared with the run loop and connections.
type diskState struct {
	entries atomic.Int64 // the workspace's entries as last measured
	state   atomic.Int64 // the state volume's bytes as last measured (-1: not yet)
	// stop is the reason the session user's processes are to be stopped, set by the watchdog
	// when the workspace passes a cap, taken by the run loop.
	stop atomic.Pointer[string]
	// over is whether the last measurement was past a cap; stopBytes and stopEntries what the
	// workspace held when the last stop was asked: past the cap, a stop is asked on the
	// crossing and again whenever the workspace grew since (something still writes).
	over        atomic.Bool
	stopBytes   atomic.Int64
	stopEntries atomic.Int64
}

// Growth past the cap, since the last stop, that asks for another.
const (
	diskGrowBytes   = 1 << 20
	diskGrowEntries = 256
)

// diskNear reports whether the workspace is within a quarter of a cap: measured more often.
func (a *Agent) diskNear() bool {
	used, limit := a.diskUsed.Load(), a.cfg.DiskLimit
	if limit <= 0 {
		return false
	}
	return used > limit/4*3 || a.disk.entries.Load() > a.cfg.entryLimit()/4*3
}

// diskOverWhy says how the workspace is past a cap, or "".
func (a *Agent) diskOverWhy() string {
	used, limit := a.diskUsed.Load(), a.cfg.DiskLimit
	if limit <= 0 {
		return ""
	}
	if used > limit {
		return fmt.Sprintf("the workspace takes %s, past the session's disk cap of %s", humanBytes(used), humanBytes(limit))
	}
	if n, max := a.disk.entries.Load(), a.cfg.entryLimit(); n > max {
		return fmt.Sprintf("the workspace holds %d files, folders and links, past the session's cap of %d entries (one per %d bytes of its disk cap of %s)", n, max, contract.EntriesPerCapByte, humanBytes(limit))
	}
	return ""
}

// checkDiskCap runs after each measurement: on the crossing of a cap, it asks the run loop to
// stop the session user's processes.
func (a *Agent) checkDiskCap() {
	why := a.diskOverWhy()
	if why == "" {
		a.disk.over.Store(false)
		a.disk.stop.Store(nil)
		return
	}
	used, n := a.diskUsed.Load(), a.disk.entries.Load()
	if a.disk.over.Swap(true) && used <= a.disk.stopBytes.Load()+diskGrowBytes && n <= a.disk.stopEntries.Load()+diskGrowEntries {
		return // asked already, and nothing grew since
	}
	a.disk.stopBytes.Store(used)
	a.disk.stopEntries.Store(n)
	msg := why + ": every process of the session user was killed (what outlived an execution too) and the interpreter restarted; executions are refused until it is under the cap (free space with an execution that ignores the cap)"
	a.disk.stop.Store(&msg)
}

// takeDiskStop returns the reason to stop the session user's processes, once, or "".
func (a *Agent) takeDiskStop() string {
	if p := a.disk.stop.Swap(nil); p != nil {
		return *p
	}
	return ""
}
