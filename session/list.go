package session

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/snapshot"
)

// StateDir is the runtime's own directory: the session's state volume.
const StateDir = contract.StateDir

// State is a session's state as List and Info say it: its runtime's (engine.State: running,
// exited, created, ... on Docker; pending, running, exited, terminating, evicted on
// Kubernetes), or for a session with volumes and no runtime StateRemoved (Docker) or
// StateStopped (where a stop removes the runtime). A runtime whose volume is gone has
// OrphanSuffix after its state.
type State = engine.State

// The states of a session without a runtime, and the mark of one without volumes.
const (
	StateRemoved State = "removed" // its container was removed; its volumes (and state) remain
	StateStopped State = "stopped" // stopped where that removes the runtime (Kubernetes deletes the pod)
	// StateIncompleteFork is a fork whose maker was killed before it was whole (refused at
	// start; gc removes it once its maker is gone).
	StateIncompleteFork State = "incomplete fork"
	OrphanSuffix              = " (orphan: no volume)"
)

// Info is one line of `runtimectl session ls`.
type Info struct {
	Name       string    `json:"name"`
	Lang       string    `json:"lang"`
	State      State     `json:"state"`
	Image      string    `json:"image"`
	Created    time.Time `json:"created"`
	Executions int64     `json:"executions"` // the latest execution's seq (see executions); -1 when unknown
	LastExec   string    `json:"last_exec,omitempty"`
	Owner      string    `json:"owner,omitempty"` // who made it through `runtimectl serve`
}

// List returns every session: those with a container, and those whose container was removed
// but whose volume (and state) remains.
func (c *Client) List(ctx context.Context) ([]Info, error) {
	return c.ListWith(ctx, ListOptions{})
}

// ListOptions narrow a List.
type ListOptions struct {
	// Keep, when set, says which sessions to list; it sees each session's name, language,
	// state, image and owner, before anything is read of its history, so the sessions it
	// drops cost nothing more (runtimectl serve lists a token's own sessions).
	Keep func(Info) bool
	// NoExecutions leaves Executions at -1 and LastExec empty: nothing is asked of agents
	// or read of histories.
	NoExecutions bool
}

// ListWith is List with options.
func (c *Client) ListWith(ctx context.Context, o ListOptions) ([]Info, error) {
	cs, err := c.ctr.List(ctx)
	if err != nil {
		return nil, err
	}
	vols, err := c.vol.List(ctx, false)
	if err != nil {
		return nil, err
	}
	byName := map[string]*Info{}
	var out []*Info
	for _, ci := range cs {
		if ci.Session == "" || isPoolMember(ci.Session) {
			continue
		}
		in := &Info{Name: ci.Session, Lang: ci.Lang, State: ci.State, Image: ci.Image, Created: ci.Created, Executions: -1}
		byName[ci.Session] = in
		out = append(out, in)
	}
	noRuntime := c.noRuntime()
	for _, v := range vols {
		if isPoolMember(v.Session) {
			continue // a warm pool's, or the data of a session claimed from one
		}
		if in := byName[v.Session]; in != nil {
			if st, err := decodeSettings(v.Settings); err == nil {
				// The reference the session was made with; Docker shows an image ID once the
				// tag has moved to a newer build.
				in.Created, in.Image, in.Owner = st.Created, st.Image, st.Owner
				if incomplete, gone := c.forkIncomplete(ctx, v.Session, st); incomplete {
					in.State = "forking"
					if gone {
						in.State = StateIncompleteFork
					}
				}
			}
			continue
		}
		in := &Info{Name: v.Session, Lang: v.Lang, State: noRuntime, Created: v.Created, Executions: -1}
		if st, err := decodeSettings(v.Settings); err == nil {
			in.Image, in.Created, in.Owner = st.Image, st.Created, st.Owner
		}
		out = append(out, in)
	}
	// A container whose volume is gone has lost its history and snapshots: mark it rather than
	// hide it (`session gc --orphans` removes it).
	hasVol := map[string]bool{}
	for _, v := range vols {
		hasVol[v.Session] = true
	}
	for _, in := range out {
		if in.State != noRuntime && !hasVol[in.Name] {
			in.State += OrphanSuffix
		}
	}
	if o.Keep != nil {
		kept := out[:0]
		for _, in := range out {
			if o.Keep(*in) {
				kept = append(kept, in)
			}
		}
		out = kept
	}
	// Executions: ask running agents, read the history of stopped ones (streamed, keeping only
	// its latest execution); in parallel.
	var wg sync.WaitGroup
	for _, in := range out {
		if in.State == noRuntime || o.NoExecutions {
			continue
		}
		wg.Add(1)
		go func(in *Info) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if in.State == engine.StateRunning {
				s := &Session{c: c, name: in.Name}
				if err := s.connect(cctx); err == nil {
					if st, err := s.Status(cctx); err == nil {
						in.Executions = executions(st.NextSeq)
						in.LastExec = st.LastExec
					}
					s.Close()
				}
				return
			}
			var sum history.Summary
			err := c.readFile(cctx, in.Name, contract.StatePath(contract.HistoryFile), func(r io.Reader) error {
				var err error
				sum, err = history.Summarize(r)
				return err
			})
			if errors.Is(err, engine.ErrNotFound) {
				err = nil // no execution yet
			}
			if err == nil {
				in.Executions = executions(sum.LastSeq + 1)
				if !sum.LastEnd.IsZero() {
					in.LastExec = sum.LastEnd.Format(time.RFC3339)
				}
			}
		}(in)
	}
	wg.Wait()
	res := make([]Info, 0, len(out))
	for _, in := range out {
		res = append(res, *in)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].Name < res[j].Name })
	return res, nil
}

// executions is what `session ls` counts, the same way for running and stopped sessions: the
// seq of the latest execution (seqs number a session's executions from 1, never repeat, and
// go on across restarts; a fork's history starts at the seq of the snapshot it came from).
func executions(nextSeq int64) int64 { return nextSeq - 1 }

// nextSeq is the seq the agent would give the next execution of a history, as the history's
// Log does when it opens the file.
func nextSeq(execs []history.Execution) int64 {
	var last int64
	for _, e := range execs {
		last = max(last, e.Seq)
	}
	return last + 1
}

// History returns the session's executions, oldest first, read from its volume (the session
// need not be running), and problems found in the file.
func (c *Client) History(ctx context.Context, name string) ([]history.Execution, []string, error) {
	if _, err := c.ensureContainer(ctx, name); err != nil {
		return nil, nil, err
	}
	return c.readHistory(ctx, name)
}

func (c *Client) readHistory(ctx context.Context, name string) ([]history.Execution, []string, error) {
	var execs []history.Execution
	var problems []string
	err := c.readFile(ctx, name, contract.StatePath(contract.HistoryFile), func(r io.Reader) error {
		var err error
		execs, problems, err = history.Parse(r)
		return err
	})
	if errors.Is(err, engine.ErrNotFound) {
		return []history.Execution{}, nil, nil // no execution yet
	}
	return execs, problems, err
}

// copyState returns a tar stream of path in the session's state (contract.StateDir/...), read
// through its container; a container made before sessions had a state volume, still running,
// has it in contract.LegacyStateDir until it is next started.
func (c *Client) copyState(ctx context.Context, name, path string) (io.ReadCloser, error) {
	rc, err := c.ctr.CopyFrom(ctx, name, path)
	if errors.Is(err, engine.ErrNotFound) {
		if ci, ierr := c.ctr.Inspect(ctx, name); ierr == nil && !ci.StateMounted {
			return c.ctr.CopyFrom(ctx, name, contract.LegacyStateDir+strings.TrimPrefix(path, contract.StateDir))
		}
	}
	return rc, err
}

// readFile reads one file of the session's state through the container (running or not).
func (c *Client) readFile(ctx context.Context, name, path string, read func(io.Reader) error) error {
	rc, err := c.copyState(ctx, name, path)
	if err != nil {
		return err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			if err == io.EOF {
				return fmt.Errorf("%s: %w", path, engine.ErrNotFound)
			}
			return err
		}
		if h.Typeflag == tar.TypeReg {
			return read(tr)
		}
	}
}

// Snapshots lists the session's snapshots, oldest first, from its state volume; one whose
// manifest cannot be read is listed with only its ID and Broken saying why.
func (c *Client) Snapshots(ctx context.Context, name string) ([]snapshot.Manifest, error) {
	if _, err := c.ensureContainer(ctx, name); err != nil {
		return nil, err
	}
	rc, err := c.copyState(ctx, name, contract.StatePath(contract.SnapshotsDir))
	if err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return []snapshot.Manifest{}, nil
		}
		return nil, err
	}
	defer rc.Close()
	ms, problems := snapshot.ManifestsFromTar(rc)
	for _, err := range problems {
		// A manifest that cannot be read is listed as broken, not hidden.
		var p snapshot.Problem
		if errors.As(err, &p) {
			ms = append(ms, snapshot.Manifest{ID: p.ID, Broken: p.Err.Error(), Kept: []string{}, Skipped: []snapshot.Skipped{}})
		}
	}
	sort.Slice(ms, func(i, j int) bool {
		if ms[i].Seq != ms[j].Seq {
			return ms[i].Seq < ms[j].Seq
		}
		return ms[i].Created.Before(ms[j].Created)
	})
	if ms == nil {
		ms = []snapshot.Manifest{}
	}
	return ms, nil
}
