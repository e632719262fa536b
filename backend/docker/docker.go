// Package docker is the Docker implementation of the backend seam: thin adapters over the
// containers and volumes packages (today's code), converting their types to backend's and
// marking their errors with backend's (errors.Is matches both). session is not wired to it yet.
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/runtimectl/runtimectl/backend"
	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/volumes"
)

// Backend is one Docker engine.
type Backend struct {
	cli io.Closer
	ctr *containers.Manager
	vol *volumes.Manager
}

// New dials the engine at host ("" for DOCKER_HOST or the local socket), lazily.
func New(host string) (*Backend, error) {
	cli, err := containers.Dial(host)
	if err != nil {
		return nil, err
	}
	return &Backend{cli: cli, ctr: containers.New(cli), vol: volumes.New(cli)}, nil
}

// Name is backend.Docker.
func (b *Backend) Name() string { return backend.Docker }

// Runtime returns the containers' side.
func (b *Backend) Runtime() backend.Runtime { return (*Runtime)(b) }

// Volumes returns the volumes' side.
func (b *Backend) Volumes() backend.Volumes { return (*Volumes)(b) }

// Close closes the Docker client.
func (b *Backend) Close() error { return b.cli.Close() }

// mark adds backend's error classes to the containers and volumes packages' errors.
func mark(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, containers.ErrNotFound), errors.Is(err, volumes.ErrNotFound):
		return fmt.Errorf("%w: %w", backend.ErrNotFound, err)
	case errors.Is(err, containers.ErrUnreachable):
		return fmt.Errorf("%w: %w", backend.ErrUnreachable, err)
	case errors.Is(err, volumes.ErrInUse):
		return fmt.Errorf("%w: %w", backend.ErrInUse, err)
	}
	return err
}

// Runtime is a Backend seen as the keeper of session containers.
type Runtime Backend

func info(i containers.Info) backend.Info {
	return backend.Info{ID: i.ID, Name: i.Name, Session: i.Session, Lang: i.Lang, Image: i.Image, State: i.State,
		Running: i.Running, OOMKilled: i.OOMKilled, ExitCode: i.ExitCode, Created: i.Created, StartedAt: i.StartedAt, Labels: i.Labels}
}

// Create creates the container (stopped), or returns the existing one.
func (r *Runtime) Create(ctx context.Context, s backend.Spec) (backend.Info, error) {
	i, err := r.ctr.Create(ctx, containers.Spec{Session: s.Session, Lang: s.Lang, Image: s.Image, Volume: volumes.Name(s.Session),
		Memory: s.Memory, CPUs: s.CPUs, Pids: s.Pids, Network: s.Network, Env: s.Env, Settings: s.Settings, Runtime: s.Runtime, TmpSize: s.TmpSize})
	return info(i), mark(err)
}

// Start starts the container.
func (r *Runtime) Start(ctx context.Context, session string) error {
	return mark(r.ctr.Start(ctx, session))
}

// Stop stops the container.
func (r *Runtime) Stop(ctx context.Context, session string, timeout time.Duration) error {
	return mark(r.ctr.Stop(ctx, session, timeout))
}

// Remove removes the container.
func (r *Runtime) Remove(ctx context.Context, session string, force bool) error {
	return mark(r.ctr.Remove(ctx, session, force))
}

// Inspect returns the session's container.
func (r *Runtime) Inspect(ctx context.Context, session string) (backend.Info, error) {
	i, err := r.ctr.Inspect(ctx, session)
	return info(i), mark(err)
}

// List returns every session container.
func (r *Runtime) List(ctx context.Context) ([]backend.Info, error) {
	l, err := r.ctr.List(ctx)
	if err != nil {
		return nil, mark(err)
	}
	out := make([]backend.Info, 0, len(l))
	for _, i := range l {
		out = append(out, info(i))
	}
	return out, nil
}

// Dial opens the exec relay.
func (r *Runtime) Dial(ctx context.Context, session string) (io.ReadWriteCloser, error) {
	rwc, err := r.ctr.Dial(ctx, session)
	return rwc, mark(err)
}

// CopyTo extracts a tar stream into dir.
func (r *Runtime) CopyTo(ctx context.Context, session, dir string, content io.Reader) error {
	return mark(r.ctr.CopyTo(ctx, session, dir, content))
}

// CopyFrom returns a tar stream of path.
func (r *Runtime) CopyFrom(ctx context.Context, session, path string) (io.ReadCloser, error) {
	rc, err := r.ctr.CopyFrom(ctx, session, path)
	return rc, mark(err)
}

// Stat describes path.
func (r *Runtime) Stat(ctx context.Context, session, path string) (backend.PathInfo, error) {
	p, err := r.ctr.Stat(ctx, session, path)
	return backend.PathInfo{Exists: p.Exists, IsDir: p.IsDir, Size: p.Size}, mark(err)
}

// Host names the engine.
func (r *Runtime) Host() string { return r.ctr.Host() }

// Volumes is a Backend seen as the keeper of session volumes.
type Volumes Backend

func volume(v volumes.Volume) backend.Volume {
	return backend.Volume{Name: v.Name, Session: v.Session, Lang: v.Lang, Settings: v.Settings, Created: v.Created, Size: v.Size}
}

// Create creates the session's volume.
func (v *Volumes) Create(ctx context.Context, session, lang, settings string) (backend.Volume, error) {
	vol, err := v.vol.Create(ctx, session, lang, settings)
	return volume(vol), mark(err)
}

// Inspect returns the session's volume.
func (v *Volumes) Inspect(ctx context.Context, session string) (backend.Volume, error) {
	vol, err := v.vol.Inspect(ctx, session)
	return volume(vol), mark(err)
}

// Remove removes a volume by name.
func (v *Volumes) Remove(ctx context.Context, name string) error {
	return mark(v.vol.Remove(ctx, name))
}

// List returns the session volumes.
func (v *Volumes) List(ctx context.Context, withSize bool) ([]backend.Volume, error) {
	l, err := v.vol.List(ctx, withSize)
	if err != nil {
		return nil, mark(err)
	}
	out := make([]backend.Volume, 0, len(l))
	for _, x := range l {
		out = append(out, volume(x))
	}
	return out, nil
}

var (
	_ backend.Backend = (*Backend)(nil)
	_ backend.Runtime = (*Runtime)(nil)
	_ backend.Volumes = (*Volumes)(nil)
)
