package session

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
)

// GCOptions say what `session gc` collects.
type GCOptions struct {
	// Idle stops running sessions with no execution for this long (after a snapshot); their
	// next exec starts them again. 0 applies each session's own --idle-stop, if any.
	Idle time.Duration
	// Orphans removes containers whose volume (state) is gone and containers that are dead,
	// and reports volumes that cannot be started.
	Orphans bool
	// TTL removes sessions (running or not) with no execution for this long; 0 applies each
	// session's own --ttl, if any. Sessions made by a test process that has ended are removed
	// too (Spec.TestRun).
	TTL time.Duration
	// Export, when set, copies each session that TTL removes into Export/NAME first (its
	// workspace and history); one whose export fails is not removed.
	Export string
	DryRun bool
	// Only, when set, limits gc to these sessions: nothing is done to another (a test's gc
	// leaves the sessions of the tests running beside it alone).
	Only []string
}

// GCAction is one thing gc did (or, with DryRun, would do).
type GCAction struct {
	Session string `json:"session"`
	Action  string `json:"action"` // "stop", "remove container", "report"
	Reason  string `json:"reason"`
	// Fix, on a report, is the runtimectl command that does what the reason asks.
	Fix  string `json:"fix,omitempty"`
	Done bool   `json:"done"`
}

// GC stops idle sessions and cleans up orphans.
func (c *Client) GC(ctx context.Context, o GCOptions) ([]GCAction, error) {
	ctrs, err := c.ctr.List(ctx)
	if err != nil {
		return nil, err
	}
	vols, err := c.vol.List(ctx, false)
	if err != nil {
		return nil, err
	}
	var acts []GCAction
	only := map[string]bool{}
	for _, n := range o.Only {
		only[n] = true
	}
	do := func(a GCAction, f func() error) {
		if len(only) > 0 && !only[a.Session] {
			return
		}
		if !o.DryRun && f != nil {
			if err := f(); err != nil {
				a.Reason += " (failed: " + err.Error() + ")"
			} else {
				a.Done = true
			}
		}
		acts = append(acts, a)
	}
	ctrs, vols = c.gcPools(ctx, o, ctrs, vols, do)
	c.gcHelpers(ctx, do)
	volBySession := map[string]engine.Volume{}
	for _, v := range vols {
		volBySession[v.Session] = v
	}
	removed := map[string]bool{}
	c.gcRemovals(ctx, o, ctrs, vols, func(a GCAction, f func() error) {
		removed[a.Session] = true
		do(a, f)
	})
	hasCtr := map[string]bool{}
	for _, ci := range ctrs {
		if removed[ci.Session] {
			continue
		}
		hasCtr[ci.Session] = true
		v, hasVol := volBySession[ci.Session]
		if o.Orphans && !hasVol {
			// Never a running session, nor one whose volume exists under its name without
			// runtimectl's labels (the engine makes such a volume when one is removed under a
			// container that is being created): those are reported for a person to decide.
			if _, err := c.vol.Inspect(ctx, ci.Session); err == nil || !errors.Is(err, engine.ErrNotFound) {
				do(GCAction{Session: ci.Session, Action: "report", Reason: fmt.Sprintf("its volume %s is not labelled as runtimectl's (or could not be read: %v); its data may be there: look at it before removing anything", contract.VolumeName(ci.Session), err),
					Fix: "docker volume inspect " + contract.VolumeName(ci.Session)}, nil)
				continue
			}
			if ci.Running {
				do(GCAction{Session: ci.Session, Action: "report", Reason: "its volume (history and snapshots) is gone but it is running, with its state in memory; remove it when it is no longer needed",
					Fix: "runtimectl session rm --force " + ci.Session}, nil)
				continue
			}
			do(GCAction{Session: ci.Session, Action: "remove container", Reason: "its volume (history and snapshots) is gone"},
				func() error { return c.ctr.Remove(ctx, ci.Session, true) })
			continue
		}
		if o.Orphans && ci.State == engine.StateDead {
			do(GCAction{Session: ci.Session, Action: "remove container", Reason: "the container is dead; its state stays on the volume and the next start makes a new one"},
				func() error { return c.ctr.Remove(ctx, ci.Session, true) })
			continue
		}
		if !ci.Running {
			continue
		}
		limit := o.Idle
		if limit <= 0 {
			if st, err := decodeSettings(v.Settings); err == nil && st.IdleStop != "" {
				limit, _ = time.ParseDuration(st.IdleStop)
			}
		}
		if limit <= 0 {
			continue
		}
		idle, err := c.idleFor(ctx, ci)
		if err != nil || idle < limit {
			continue
		}
		do(GCAction{Session: ci.Session, Action: "stop", Reason: fmt.Sprintf("no execution for %s (limit %s)", idle.Round(time.Second), limit)},
			func() error { return c.Stop(ctx, ci.Session) })
	}
	if o.Orphans {
		for _, v := range vols {
			if hasCtr[v.Session] || removed[v.Session] {
				continue
			}
			st, err := decodeSettings(v.Settings)
			if err != nil {
				do(GCAction{Session: v.Session, Action: "report", Reason: fmt.Sprintf("volume %s has no container and unreadable settings (%v); remove that volume", v.Name, err),
					Fix: "runtimectl volume rm " + v.Name}, nil)
				continue
			}
			ic, ok := c.eng.(engine.ImageChecker)
			if !ok {
				continue
			}
			if err := ic.CheckImage(ctx, st.Image); err != nil && (errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrNoAgent)) {
				do(GCAction{Session: v.Session, Action: "report", Reason: fmt.Sprintf("volume %s has no container and its image %s is unusable (%v); build the image or remove the volume", v.Name, st.Image, err)}, nil)
			}
		}
	}
	return acts, nil
}

// idleFor returns how long a running session has had no execution (or, with none yet, how
// long it has been up). A session running code is not idle.
func (c *Client) idleFor(ctx context.Context, ci engine.Info) (time.Duration, error) {
	s := &Session{c: c, name: ci.Session}
	if err := s.connect(ctx); err != nil {
		return 0, err
	}
	defer s.Close()
	st, err := s.Status(ctx)
	if err != nil {
		return 0, err
	}
	if st.Running != 0 || st.Queued > 0 {
		return 0, nil
	}
	since := ci.StartedAt
	if t, err := time.Parse(time.RFC3339Nano, st.LastExec); err == nil && t.After(since) {
		since = t
	}
	if since.IsZero() {
		return 0, nil
	}
	return time.Since(since), nil
}

// Upgrade moves a session to the current image of its reference: it snapshots and stops the
// session, removes its container, and creates and starts a new one from the same settings,
// which restores the state there. Restored() on the result says what did not survive.
func (c *Client) Upgrade(ctx context.Context, name string) (*Session, error) {
	if err := c.Stop(ctx, name); err != nil {
		return nil, err
	}
	if err := c.ctr.Remove(ctx, name, true); err != nil {
		return nil, err
	}
	s, _, err := c.Start(ctx, Spec{Name: name})
	return s, err
}

// gcHelpers removes helper runtimes (installers, measures) that are leftovers, where the
// engine runs them (engine.Helpers): past their deadline (an installer kills itself by then;
// one whose engine could not remove it), or ended more than a minute ago. A helper removes itself when it ends, so these are what a
// crash of the engine or of a caller left.
func (c *Client) gcHelpers(ctx context.Context, do func(GCAction, func() error)) {
	hk, ok := c.eng.(engine.Helpers)
	if !ok {
		return
	}
	hs, err := hk.Helpers(ctx, "")
	if err != nil {
		return
	}
	now := time.Now()
	for _, h := range hs {
		reason := ""
		if d, err := strconv.ParseInt(h.Labels[contract.LabelDeadline], 10, 64); err == nil && now.After(time.Unix(d, 0).Add(time.Minute)) {
			reason = fmt.Sprintf("a %s helper past its deadline (%s)", h.Labels[contract.LabelHelper], time.Unix(d, 0).UTC().Format(time.RFC3339))
		} else if !h.Running && now.Sub(h.Created) > time.Minute {
			reason = fmt.Sprintf("a %s helper that has ended", h.Labels[contract.LabelHelper])
		}
		if reason == "" {
			continue
		}
		id := h.ID
		do(GCAction{Session: h.Labels[contract.LabelHelperFor], Action: "remove helper", Reason: reason},
			func() error { return hk.RemoveHelper(ctx, id) })
	}
}

// removeHelpers removes the helper containers that work for session name (an install that is
// running): they hold its workspace volume.
func (c *Client) removeHelpers(ctx context.Context, name string) error {
	hk, ok := c.eng.(engine.Helpers)
	if !ok {
		return nil
	}
	hs, err := hk.Helpers(ctx, name)
	if err != nil {
		return err
	}
	for _, h := range hs {
		if err := hk.RemoveHelper(ctx, h.ID); err != nil {
			return err
		}
	}
	return nil
}
