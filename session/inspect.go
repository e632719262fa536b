package session

import (
	"context"
	"errors"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// Inspection is everything runtimectl knows of a session, as `session inspect` prints it.
type Inspection struct {
	Name     string   `json:"name"`
	Backend  string   `json:"backend"` // docker or kubernetes
	Settings Settings `json:"settings"`
	// Limits are the settings' limits with the defaults filled in.
	Limits struct {
		Memory int64   `json:"memory"`
		CPUs   float64 `json:"cpus"`
		Pids   int64   `json:"pids"`
		Disk   int64   `json:"disk"`
	} `json:"limits"`
	// Runtime is the session's container (or pod); nil when it has none (removed, or stopped on
	// Kubernetes).
	Runtime *RuntimeInfo `json:"runtime"`
	Volumes struct {
		Workspace string `json:"workspace"`
		State     string `json:"state"`
	} `json:"volumes"`
	// Status is the agent's, when the session runs.
	Status *execproto.Status `json:"status"`
}

// RuntimeInfo is a session's container or pod.
type RuntimeInfo struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	State     string    `json:"state"`
	Running   bool      `json:"running"`
	Image     string    `json:"image"`
	Created   time.Time `json:"created"`
	StartedAt time.Time `json:"started_at"`
	ExitCode  int       `json:"exit_code"`
	OOMKilled bool      `json:"oom_killed"`
}

// Inspect returns what runtimectl knows of the session without starting it.
func (c *Client) Inspect(ctx context.Context, name string) (*Inspection, error) {
	if err := c.exists(ctx, name); err != nil {
		return nil, err
	}
	in := &Inspection{Name: name, Backend: c.backend}
	vol, err := c.vol.Inspect(ctx, name)
	if err == nil {
		in.Volumes.Workspace, in.Volumes.State = vol.Name, vol.State
		if st, err := decodeSettings(vol.Settings); err == nil {
			in.Settings = st
		}
	}
	st := in.Settings
	in.Limits.Memory, in.Limits.CPUs, in.Limits.Pids, in.Limits.Disk = st.Memory, st.CPUs, st.Pids, st.Disk
	if in.Limits.Memory == 0 {
		in.Limits.Memory = engine.DefaultMemory
	}
	if in.Limits.CPUs == 0 {
		in.Limits.CPUs = engine.DefaultCPUs
	}
	if in.Limits.Pids == 0 {
		in.Limits.Pids = engine.DefaultPids
	}
	if in.Limits.Disk == 0 {
		in.Limits.Disk = contract.DefaultDisk
	}
	ci, err := c.ctr.Inspect(ctx, name)
	switch {
	case err == nil:
		in.Runtime = &RuntimeInfo{ID: ci.ID, Name: ci.Name, State: string(ci.State), Running: ci.Running, Image: ci.Image,
			Created: ci.Created, StartedAt: ci.StartedAt, ExitCode: ci.ExitCode, OOMKilled: ci.OOMKilled}
	case !errors.Is(err, engine.ErrNotFound):
		return nil, err
	}
	if in.Runtime != nil && in.Runtime.Running {
		s := &Session{c: c, name: name}
		if err := s.connect(ctx); err == nil {
			if status, err := s.Status(ctx); err == nil {
				in.Status = &status
			}
			s.Close()
		}
	}
	return in, nil
}

// Stats is a running session's use of the host.
type Stats struct {
	engine.Stats
	// DiskUsed is the workspace's size as the agent last measured it (-1: not yet), and
	// DiskLimit its cap.
	DiskUsed  int64 `json:"disk_used"`
	DiskLimit int64 `json:"disk_limit"`
	// DiskEntries counts the workspace's files, folders and links, EntryLimit caps them;
	// StateUsed is the state volume's size (history and snapshots; -1: not measured).
	DiskEntries int64 `json:"disk_entries"`
	EntryLimit  int64 `json:"entry_limit"`
	StateUsed   int64 `json:"state_used"`
}

// Stats samples a running session: CPU, memory and processes from the engine, the
// workspace's size from its agent.
func (c *Client) Stats(ctx context.Context, name string) (Stats, error) {
	if err := c.exists(ctx, name); err != nil {
		return Stats{}, err
	}
	ci, err := c.ctr.Inspect(ctx, name)
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return Stats{}, err
	}
	if err != nil || !ci.Running {
		return Stats{}, advice.Errorf("%w: session %q is not running: nothing to measure; %s", ErrNotFound, name, adviseStart(name))
	}
	sr, ok := c.eng.(engine.StatsReader)
	if !ok {
		return Stats{}, c.unsupported("stats of session " + name)
	}
	cs, err := sr.Stats(ctx, name)
	if err != nil {
		return Stats{}, err
	}
	out := Stats{Stats: cs, DiskUsed: -1, StateUsed: -1}
	s := &Session{c: c, name: name}
	if err := s.connect(ctx); err == nil {
		if st, err := s.Status(ctx); err == nil {
			out.DiskUsed, out.DiskLimit = st.DiskUsed, st.DiskLimit
			out.DiskEntries, out.EntryLimit = st.DiskEntries, st.EntryLimit
			if st.StateUsed != 0 {
				out.StateUsed = st.StateUsed
			}
		}
		s.Close()
	}
	return out, nil
}

// Logs returns the agent's own log of the session (its restarts, recoveries, refusals; never
// the code's output), at most max bytes.
func (c *Client) Logs(ctx context.Context, name string, max int64) ([]byte, error) {
	if err := c.exists(ctx, name); err != nil {
		return nil, err
	}
	lr, ok := c.eng.(engine.LogReader)
	if !ok {
		return nil, c.unsupported("logs of session " + name)
	}
	b, err := lr.Logs(ctx, name, max)
	if err != nil {
		return b, err
	}
	return c.withEgressLogs(ctx, name, b, max)
}
