// Package volumes manages the session volumes: one named volume per session, mounted at
// /workspace, carrying the session's settings in a label so that a session whose container
// was removed can be created again exactly as it was. Its state directory (history,
// snapshots) is written by the agent inside the container.
//
// It is one of the three packages that import the Docker SDK; its exported types are the
// project's own.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"

	"github.com/runtimectl/runtimectl/containers"
)

// API is the subset of the Docker client that this package uses.
type API interface {
	VolumeCreate(ctx context.Context, options volume.CreateOptions) (volume.Volume, error)
	VolumeInspect(ctx context.Context, volumeID string) (volume.Volume, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	DiskUsage(ctx context.Context, options types.DiskUsageOptions) (types.DiskUsage, error)
}

// ErrNotFound is returned for a volume that does not exist.
var ErrNotFound = errors.New("no such volume")

// ErrInUse is returned when removing a volume that a container uses.
var ErrInUse = errors.New("volume is in use")

// Volume is a session volume.
type Volume struct {
	Name     string    `json:"name"`
	Session  string    `json:"session"`
	Lang     string    `json:"lang"`
	Settings string    `json:"-"`
	Created  time.Time `json:"created"`
	Size     int64     `json:"size_bytes"` // -1 when unknown
}

// Manager manages session volumes.
type Manager struct{ api API }

// New returns a Manager.
func New(api API) *Manager { return &Manager{api: api} }

// Name returns the volume name of a session.
func Name(session string) string { return containers.Prefix + session }

// CreateOption adds to the creation of a volume.
type CreateOption func(*volume.CreateOptions)

// WithDriverOpts passes options to the volume driver ("local" by default), for example
// {"type": "tmpfs", "device": "tmpfs", "o": "size=64m"} for a size-capped volume in memory (its
// content does not outlive the container's stop), or an NFS or block-device mount. They only
// apply when the volume is created.
func WithDriverOpts(opts map[string]string) CreateOption {
	return func(o *volume.CreateOptions) {
		if len(opts) > 0 {
			o.DriverOpts = opts
		}
	}
}

// WithLabels adds labels to the volume, beside runtimectl's own (which they cannot replace):
// testcontainers-go's, for instance, so that its reaper removes the volume with the container.
func WithLabels(labels map[string]string) CreateOption {
	return func(o *volume.CreateOptions) {
		for k, v := range labels {
			if _, ours := o.Labels[k]; !ours {
				o.Labels[k] = v
			}
		}
	}
}

// Create creates the session's volume with its settings, or returns the existing one.
func (m *Manager) Create(ctx context.Context, session, lang, settings string, opts ...CreateOption) (Volume, error) {
	co := volume.CreateOptions{
		Name: Name(session),
		Labels: map[string]string{
			containers.LabelSession: session, containers.LabelLang: lang,
			containers.LabelSchema: containers.Schema, containers.LabelSettings: settings,
		},
	}
	for _, o := range opts {
		o(&co)
	}
	v, err := m.api.VolumeCreate(ctx, co)
	if err != nil {
		return Volume{}, fmt.Errorf("create volume for session %q: %w", session, err)
	}
	return from(v), nil
}

// Inspect returns the session's volume; ErrNotFound when there is none.
func (m *Manager) Inspect(ctx context.Context, session string) (Volume, error) {
	v, err := m.api.VolumeInspect(ctx, Name(session))
	if err != nil {
		if errdefs.IsNotFound(err) {
			return Volume{}, fmt.Errorf("%w: %s", ErrNotFound, Name(session))
		}
		return Volume{}, fmt.Errorf("inspect volume of session %q: %w", session, err)
	}
	return from(v), nil
}

func from(v volume.Volume) Volume {
	out := Volume{Name: v.Name, Session: v.Labels[containers.LabelSession], Lang: v.Labels[containers.LabelLang],
		Settings: v.Labels[containers.LabelSettings], Size: -1}
	out.Created, _ = time.Parse(time.RFC3339, v.CreatedAt)
	if v.UsageData != nil && v.UsageData.Size >= 0 {
		out.Size = v.UsageData.Size
	}
	return out
}

// Remove removes a volume by its name. A missing volume is removed already.
func (m *Manager) Remove(ctx context.Context, name string) error {
	err := m.api.VolumeRemove(ctx, name, false)
	switch {
	case err == nil, errdefs.IsNotFound(err):
		return nil
	case errdefs.IsConflict(err):
		return fmt.Errorf("remove volume %s: %w (stop and remove its session first)", name, ErrInUse)
	}
	return fmt.Errorf("remove volume %s: %w", name, err)
}

// List returns the session volumes, with sizes when withSize (which asks the engine to
// measure them, slower).
func (m *Manager) List(ctx context.Context, withSize bool) ([]Volume, error) {
	var vols []*volume.Volume
	if withSize {
		du, err := m.api.DiskUsage(ctx, types.DiskUsageOptions{Types: []types.DiskUsageObject{types.VolumeObject}})
		if err != nil {
			return nil, fmt.Errorf("measure volumes: %w", err)
		}
		for _, v := range du.Volumes {
			if _, ok := v.Labels[containers.LabelSession]; ok {
				vols = append(vols, v)
			}
		}
	} else {
		r, err := m.api.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", containers.LabelSession))})
		if err != nil {
			return nil, fmt.Errorf("list volumes: %w", err)
		}
		vols = r.Volumes
	}
	out := make([]Volume, 0, len(vols))
	for _, v := range vols {
		out = append(out, from(*v))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
