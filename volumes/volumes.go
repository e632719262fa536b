// Package volumes manages the session volumes, two per session, made and removed as a pair:
// the workspace volume (Name), mounted at /workspace and owned by the session user, which
// carries the session's settings in a label so that a session whose container was removed can
// be created again exactly as it was; and the state volume (StateName), mounted at
// contract.StateDir, root's alone, where the agent keeps the history and snapshots.
//
// It is part of the Docker engine (package docker, which implements engine.Storage with it);
// with containers and images it is where the Docker SDK is imported, and its exported types
// are engine's (engine.Volume) and errors engine's. Imports: the Docker SDK, engine, contract.
package volumes

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
)

// API is the subset of the Docker client that this package uses.
type API interface {
	VolumeCreate(ctx context.Context, options volume.CreateOptions) (volume.Volume, error)
	VolumeInspect(ctx context.Context, volumeID string) (volume.Volume, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	DiskUsage(ctx context.Context, options types.DiskUsageOptions) (types.DiskUsage, error)
}

// The engine's errors, as this package returns them.
var (
	// ErrNotFound is returned for a volume that does not exist.
	ErrNotFound = engine.Described(engine.ErrNotFound, "no such volume")
	// ErrInUse is returned when removing a volume that a container uses.
	ErrInUse = engine.ErrInUse
)

// Volume is a session volume (engine.Volume).
type Volume = engine.Volume

// Manager manages session volumes.
type Manager struct{ api API }

// New returns a Manager.
func New(api API) *Manager { return &Manager{api: api} }

// API returns the engine's volume API the manager uses, for the session package's own volumes
// (a warm pool's).
func (m *Manager) API() API { return m.api }

// Name returns the name of a session's workspace volume.
func Name(session string) string { return contract.VolumeName(session) }

// StateName returns the name of a session's state volume. No workspace volume can have it:
// theirs all begin with contract.NamePrefix, which ends in '-'.
func StateName(session string) string { return contract.StateVolumeName(session) }

// Create creates the session's two volumes, the workspace one with its settings and o.Driver,
// the state volume with o.StateDriver, both with o.Labels beside runtimectl's own (which they
// cannot replace: testcontainers-go's, for instance, so that its reaper removes the volumes
// with the container), or returns the existing workspace volume. o.StateDriver must not name
// the same storage as o.Driver (the same NFS export, say): the state is out of the session
// user's reach only on storage of its own.
func (m *Manager) Create(ctx context.Context, session, lang, settings string, o engine.VolumeOptions) (Volume, error) {
	co := volume.CreateOptions{
		Name: Name(session),
		Labels: map[string]string{
			contract.LabelSession: session, contract.LabelLang: lang,
			contract.LabelSchema: contract.LabelsSchema, contract.LabelSettings: settings,
		},
	}
	so := stateOptions(session, nil)
	if len(o.Driver) > 0 {
		co.DriverOpts = o.Driver
	}
	if len(o.StateDriver) > 0 {
		so.DriverOpts = o.StateDriver
	}
	for _, opts := range []*volume.CreateOptions{&co, &so} {
		for k, v := range o.Labels {
			if _, ours := opts.Labels[k]; !ours {
				opts.Labels[k] = v
			}
		}
	}
	v, err := m.api.VolumeCreate(ctx, co)
	if err != nil {
		return Volume{}, fmt.Errorf("create volume for session %q: %w", session, err)
	}
	if _, err := m.api.VolumeCreate(ctx, so); err != nil {
		return Volume{}, fmt.Errorf("create state volume for session %q: %w", session, err)
	}
	return from(v), nil
}

// stateOptions are the creation options of the session's state volume: the workspace volume's
// labels (when given) less its settings, and its role.
func stateOptions(session string, workspaceLabels map[string]string) volume.CreateOptions {
	labels := map[string]string{contract.LabelSchema: contract.LabelsSchema}
	for k, v := range workspaceLabels {
		labels[k] = v
	}
	delete(labels, contract.LabelSettings)
	labels[contract.LabelSession], labels[contract.LabelRole] = session, contract.RoleState
	return volume.CreateOptions{Name: StateName(session), Labels: labels}
}

// EnsureState makes sure the session has its state volume, creating it for a session made
// before there was one; created says it was missing.
func (m *Manager) EnsureState(ctx context.Context, session string) (created bool, err error) {
	_, err = m.api.VolumeInspect(ctx, StateName(session))
	switch {
	case err == nil:
		return false, nil
	case !errdefs.IsNotFound(err):
		return false, fmt.Errorf("inspect state volume of session %q: %w", session, err)
	}
	ws, err := m.api.VolumeInspect(ctx, Name(session))
	if err != nil {
		return false, fmt.Errorf("inspect volume of session %q: %w", session, err)
	}
	if _, err := m.api.VolumeCreate(ctx, stateOptions(session, ws.Labels)); err != nil {
		return false, fmt.Errorf("create state volume for session %q: %w", session, err)
	}
	return true, nil
}

// Inspect returns the session's volume, with the name of its state volume; ErrNotFound when
// there is none.
func (m *Manager) Inspect(ctx context.Context, session string) (Volume, error) {
	v, err := m.api.VolumeInspect(ctx, Name(session))
	if err != nil {
		if errdefs.IsNotFound(err) {
			return Volume{}, fmt.Errorf("%w: %s", ErrNotFound, Name(session))
		}
		return Volume{}, fmt.Errorf("inspect volume of session %q: %w", session, err)
	}
	vol := from(v)
	vol.State = StateName(session) // what the session mounts (or will, once EnsureState made it)
	return vol, nil
}

func from(v volume.Volume) Volume {
	out := Volume{Name: v.Name, Session: v.Labels[contract.LabelSession], Lang: v.Labels[contract.LabelLang],
		Settings: v.Labels[contract.LabelSettings], Size: -1, Mountpoint: v.Mountpoint, Pool: v.Labels[contract.LabelPool]}
	if b := v.Labels[contract.LabelBacking]; b != "" {
		out.Backing = strings.Split(b, ",")
	}
	out.Created, _ = time.Parse(time.RFC3339, v.CreatedAt)
	if v.UsageData != nil && v.UsageData.Size >= 0 {
		out.Size = v.UsageData.Size
	}
	return out
}

// Remove removes a volume by its name, and the other volume of its session with it: a
// session's workspace and state volumes go together. A missing volume is removed already.
func (m *Manager) Remove(ctx context.Context, name string) error {
	v, err := m.api.VolumeInspect(ctx, name)
	if err != nil {
		if errdefs.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	session := v.Labels[contract.LabelSession]
	if session == "" || (name != Name(session) && name != StateName(session)) {
		return m.remove(ctx, name)
	}
	return m.RemoveSession(ctx, session)
}

// RemoveSession removes the session's volumes: the workspace volume first (refused while a
// container uses it), then the state volume; for a session claimed from a pool, then the pool
// member's volumes that held their data.
func (m *Manager) RemoveSession(ctx context.Context, session string) error {
	var backing []string
	if v, err := m.api.VolumeInspect(ctx, Name(session)); err == nil {
		backing = from(v).Backing
	}
	if err := m.remove(ctx, Name(session)); err != nil {
		return err
	}
	if err := m.remove(ctx, StateName(session)); err != nil {
		return err
	}
	for _, b := range backing {
		if err := m.remove(ctx, b); err != nil {
			return err
		}
	}
	return nil
}

// CreateBound creates the volumes of session, a claim of pool member's: the same labels as
// Create's, their data the member's volumes' own (a bind of the engine's directories for them,
// which the claimed container mounts already), so that the session is found, listed,
// recreated and removed by its name like any other. The member's volumes go with it
// (RemoveSession).
func (m *Manager) CreateBound(ctx context.Context, session, lang, settings, member string) (Volume, error) {
	bind := func(name string) (map[string]string, error) {
		v, err := m.api.VolumeInspect(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("inspect pool volume %s: %w", name, err)
		}
		if v.Driver != "local" || v.Mountpoint == "" || len(v.Options) > 0 {
			return nil, fmt.Errorf("pool volume %s: driver %s with options %v cannot be bound", name, v.Driver, v.Options)
		}
		return map[string]string{"type": "none", "o": "bind", "device": v.Mountpoint}, nil
	}
	wsOpts, err := bind(Name(member))
	if err != nil {
		return Volume{}, err
	}
	stOpts, err := bind(StateName(member))
	if err != nil {
		return Volume{}, err
	}
	labels := map[string]string{contract.LabelBacking: Name(member) + "," + StateName(member)}
	return m.Create(ctx, session, lang, settings, engine.VolumeOptions{Driver: wsOpts, StateDriver: stOpts, Labels: labels})
}

// RemoveState removes the session's state volume alone (undoing a migration that failed).
func (m *Manager) RemoveState(ctx context.Context, session string) error {
	return m.remove(ctx, StateName(session))
}

func (m *Manager) remove(ctx context.Context, name string) error {
	err := m.api.VolumeRemove(ctx, name, false)
	switch {
	case err == nil, errdefs.IsNotFound(err):
		return nil
	case errdefs.IsConflict(err):
		return fmt.Errorf("remove volume %s: %w (stop and remove its session first)", name, ErrInUse)
	}
	return fmt.Errorf("remove volume %s: %w", name, err)
}

// List returns one entry per session that has volumes: its workspace volume, with its state
// volume's name and both sizes added when withSize (which asks the engine to measure them,
// slower). A state volume whose workspace volume is gone is listed under its own name.
func (m *Manager) List(ctx context.Context, withSize bool) ([]Volume, error) {
	var vols []*volume.Volume
	if withSize {
		du, err := m.diskUsage(ctx)
		if err != nil {
			return nil, fmt.Errorf("measure volumes: %w", err)
		}
		for _, v := range du.Volumes {
			if _, ok := v.Labels[contract.LabelSession]; ok {
				vols = append(vols, v)
			}
		}
	} else {
		r, err := m.api.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", contract.LabelSession))})
		if err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		vols = r.Volumes
	}
	workspaces := map[string]*Volume{}
	var out []*Volume
	var states []Volume
	for _, v := range vols {
		vv := from(*v)
		if v.Labels[contract.LabelRole] == contract.RoleState {
			states = append(states, vv)
			continue
		}
		out = append(out, &vv)
		workspaces[vv.Session] = &vv
	}
	for _, st := range states {
		ws := workspaces[st.Session]
		if ws == nil {
			st.State = st.Name
			out = append(out, &st)
			continue
		}
		ws.State = st.Name
		if ws.Size >= 0 && st.Size >= 0 {
			ws.Size += st.Size
		} else {
			ws.Size = -1
		}
	}
	res := make([]Volume, 0, len(out))
	for _, v := range out {
		res = append(res, *v)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].Name < res[j].Name })
	return res, nil
}

// diskUsage asks the engine to measure the volumes. Docker 20.10 runs one such measurement at a
// time and refuses a second with "a disk usage operation is already running" (two runtimectl
// commands at once, or `docker system df` beside one): wait for the other and ask again, until
// the context ends.
func (m *Manager) diskUsage(ctx context.Context) (types.DiskUsage, error) {
	delay := 50 * time.Millisecond
	for {
		du, err := m.api.DiskUsage(ctx, types.DiskUsageOptions{Types: []types.DiskUsageObject{types.VolumeObject}})
		if err == nil || !diskUsageBusy(err) {
			return du, err
		}
		select {
		case <-ctx.Done():
			return du, fmt.Errorf("%w (the engine was still measuring for another client)", err)
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// diskUsageBusy reports the engine's refusal of a measurement while another runs.
func diskUsageBusy(err error) bool {
	return strings.Contains(err.Error(), "disk usage operation is already running")
}
