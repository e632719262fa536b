package session

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/runtimectl/runtimectl/engine"
)

// TestRunID names this process as the maker of test sessions (Spec.TestRun): host, pid and the
// process's start time (so that a reused pid is not taken for it).
func TestRunID() string { return TestRunIDOf(os.Getpid()) }

// TestRunIDOf is TestRunID of another process of this host.
func TestRunIDOf(pid int) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/%s", host, pid, processStart(pid))
}

// processStart returns the start time of process pid (field 22 of /proc/PID/stat, in clock
// ticks since boot), "" when there is no such process.
func processStart(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // fields after the command: state is 3, starttime is 22
}

// testRunGone reports whether the test process that id names has ended. A process of another
// host cannot be seen, so it is never taken for gone.
func testRunGone(id string) bool {
	parts := strings.Split(id, "/")
	if len(parts) != 3 {
		return false
	}
	host, _ := os.Hostname()
	if parts[0] != host {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return false
	}
	return processStart(pid) != parts[2]
}

// gcRemovals removes sessions past their TTL (o.TTL, else each session's own --ttl) and
// sessions whose test process is gone, exporting each first into o.Export/NAME when set (a
// session whose export fails is not removed).
func (c *Client) gcRemovals(ctx context.Context, o GCOptions, ctrs []engine.Info, vols []engine.Volume, do func(GCAction, func() error)) {
	byName := map[string]engine.Info{}
	for _, ci := range ctrs {
		byName[ci.Session] = ci
	}
	remove := func(name string) func() error {
		return func() error {
			if o.Export == "" {
				return c.Remove(ctx, name, true)
			}
			_, err := c.RemoveExport(ctx, name, true, ExportOptions{Dir: filepath.Join(o.Export, name), Keep: []string{"*"}, History: true})
			return err
		}
	}
	for _, v := range vols {
		st, err := decodeSettings(v.Settings)
		if err != nil {
			continue
		}
		if incomplete, gone := c.forkIncomplete(ctx, v.Session, st); incomplete && gone {
			do(GCAction{Session: v.Session, Action: "remove", Reason: fmt.Sprintf("a fork of %s that never ended (its maker, process %s, is gone)", st.ForkOf, st.ForkedBy)}, func() error { return c.Remove(ctx, v.Session, true) })
			continue
		}
		if st.TestRun != "" && testRunGone(st.TestRun) {
			do(GCAction{Session: v.Session, Action: "remove", Reason: fmt.Sprintf("made by test process %s, which has ended", st.TestRun)}, remove(v.Session))
			continue
		}
		limit := o.TTL
		if limit <= 0 && st.TTL != "" {
			limit, _ = time.ParseDuration(st.TTL)
		}
		if limit <= 0 {
			continue
		}
		idle, err := c.sessionIdle(ctx, byName[v.Session], st)
		if err != nil || idle < limit {
			continue
		}
		do(GCAction{Session: v.Session, Action: "remove", Reason: fmt.Sprintf("no execution for %s (ttl %s)", idle.Round(time.Second), limit)}, remove(v.Session))
	}
}

// sessionIdle returns how long a session has had no execution: a running one asks its agent;
// a stopped one reads its history (its last execution's end; its creation time when it ran
// nothing). A session whose history cannot be read is not taken for idle: a guess from its
// creation time could remove one that was in use. Where stopping removes the runtime
// (Kubernetes), reading the history would start it, so such a stopped session is left alone.
func (c *Client) sessionIdle(ctx context.Context, ci engine.Info, st Settings) (time.Duration, error) {
	if ci.Running {
		return c.idleFor(ctx, ci)
	}
	if ci.ID == "" && c.ctr.StopRemoves() {
		return 0, fmt.Errorf("session %q: stopped without a runtime; its history is not read (that would start it)", st.Session)
	}
	h, _, err := c.History(ctx, st.Session)
	if err != nil {
		return 0, err
	}
	since := st.Created
	if len(h) > 0 {
		last := h[len(h)-1]
		if end := last.Started.Add(time.Duration(last.DurationMs * float64(time.Millisecond))); end.After(since) {
			since = end
		}
	}
	if since.IsZero() {
		return 0, nil
	}
	return time.Since(since), nil
}
