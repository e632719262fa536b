// Package docker is the Docker engine (and Podman's Docker-compatible API) of runtimectl: one
// engine.Engine made of the session containers (package containers), their volumes (volumes),
// the images (images) and Docker's half of warm pools (pools.go), on one client of the Docker
// SDK. It also has the abilities that the library finds by type assertion: it measures
// volumes, reads the agent's log and the container's use of the host, makes the bridge network
// runs installer containers and the egress proxies of sessions with allowed hosts, and it checks a session's image before the start.
//
//	e, err := docker.New("") // DOCKER_HOST, or the default socket; nothing is dialled yet
//	c := session.NewWithEngine(e)
//
// Imports: the Docker SDK, containers, volumes, images, engine, contract, lang; never session.
package docker

import (
	"context"
	"io"
	"time"

	"github.com/docker/docker/client"

	"github.com/runtimectl/runtimectl"
	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/volumes"
)

// Engine is Docker as an engine.Engine.
type Engine struct {
	cli *client.Client
	ctr *containers.Manager
	vol *volumes.Manager
	img *images.Builder
}

// New returns the engine at host (as DOCKER_HOST would name it: unix:///var/run/docker.sock,
// tcp://host:2376; "" for DOCKER_HOST or the local socket), connecting lazily: nothing is asked
// of it until a call needs it.
func New(host string) (*Engine, error) {
	cli, err := containers.Dial(host)
	if err != nil {
		return nil, err
	}
	return &Engine{cli: cli, ctr: containers.New(cli), vol: volumes.New(cli), img: images.New(cli, runtimectl.Assets)}, nil
}

// Name is engine.Docker.
func (e *Engine) Name() string { return engine.Docker }

// Runtimes returns the session containers.
func (e *Engine) Runtimes() engine.Runtimes { return e.ctr }

// Storage returns the session volumes.
func (e *Engine) Storage() engine.Storage { return e.vol }

// Pools keeps warm pools as Docker does (pools.go).
func (e *Engine) Pools() engine.Pools { return pools{ctr: e.ctr, vol: e.vol} }

// Close releases the client's connections.
func (e *Engine) Close() error { return e.cli.Close() }

// Containers returns the container manager, for Docker's own operations (inspect documents,
// kill, rename) and tests; nil on a nil Engine.
func (e *Engine) Containers() *containers.Manager {
	if e == nil {
		return nil
	}
	return e.ctr
}

// Volumes returns the volume manager, for Docker's own operations and tests; nil on a nil
// Engine.
func (e *Engine) Volumes() *volumes.Manager {
	if e == nil {
		return nil
	}
	return e.vol
}

// Images returns the image builder, for `runtimectl image` and tcsession; nil on a nil Engine
// (so that From(c).Images() is nil on another engine).
func (e *Engine) Images() *images.Builder {
	if e == nil {
		return nil
	}
	return e.img
}

// From returns the Docker engine below a session client (anything with the engine it runs
// on), or nil when it runs on another engine.
func From(c interface{ Underlying() engine.Engine }) *Engine {
	if c == nil {
		return nil
	}
	e, _ := c.Underlying().(*Engine)
	return e
}

// EnsureNetwork makes the bridge network that --network bridge needs (engine.Networker).
func (e *Engine) EnsureNetwork(ctx context.Context, setting string) error {
	return e.ctr.EnsureNetwork(ctx, setting)
}

// Measure sizes volumes with a helper container (engine.Measurer).
func (e *Engine) Measure(ctx context.Context, image string, vols []string) ([]int64, error) {
	return e.ctr.Measure(ctx, image, vols)
}

// Logs returns the agent's log (engine.LogReader).
func (e *Engine) Logs(ctx context.Context, session string, max int64) ([]byte, error) {
	return e.ctr.Logs(ctx, session, max)
}

// Stats samples the session's container (engine.StatsReader).
func (e *Engine) Stats(ctx context.Context, session string) (engine.Stats, error) {
	return e.ctr.Stats(ctx, session)
}

// Install runs an installer container with the session's workspace volume (engine.Installer).
func (e *Engine) Install(ctx context.Context, job engine.InstallJob, out io.Writer) (int, error) {
	return e.ctr.RunInstaller(ctx, containers.Installer{
		Image: job.Image, Volume: volumes.Name(job.Session), For: job.Session, Runtime: job.Runtime, Deadline: job.Deadline,
		Argv: job.Argv, Env: job.Env, Egress: job.Egress,
	}, out)
}

// Helpers lists the helper containers (installers, measures) working for session ("" all)
// (engine.Helpers).
func (e *Engine) Helpers(ctx context.Context, session string) ([]engine.Info, error) {
	return e.ctr.Helpers(ctx, session)
}

// RemoveHelper removes a helper container, running or not.
func (e *Engine) RemoveHelper(ctx context.Context, id string) error {
	return e.ctr.RemoveHelper(ctx, id)
}

// CheckImage checks that ref is on the engine and carries the agent (engine.ImageChecker):
// engine.ErrNotFound when it is missing, engine.ErrNoAgent when it is not runtimectl's.
func (e *Engine) CheckImage(ctx context.Context, ref string) error {
	_, err := e.img.Inspect(ctx, ref)
	return err
}

// StartEgress starts the session's egress proxy container (engine.Egress).
func (e *Engine) StartEgress(ctx context.Context, session string, spec func() (engine.EgressSpec, error)) error {
	return e.ctr.StartEgress(ctx, session, spec)
}

// StopEgress stops the session's egress proxy container.
func (e *Engine) StopEgress(ctx context.Context, session string, timeout time.Duration) error {
	return e.ctr.StopEgress(ctx, session, timeout)
}

// RemoveEgress removes the session's egress proxy container and its socket volume.
func (e *Engine) RemoveEgress(ctx context.Context, session string) error {
	return e.ctr.RemoveEgress(ctx, session)
}

// EgressLogs returns the egress proxy's log.
func (e *Engine) EgressLogs(ctx context.Context, session string, max int64) ([]byte, error) {
	return e.ctr.EgressLogs(ctx, session, max)
}

// AdoptEgress hands a claimed pool member's proxy to the session (engine.EgressAdopter).
func (e *Engine) AdoptEgress(ctx context.Context, member, session string) error {
	return e.ctr.AdoptEgress(ctx, member, session)
}

var (
	_ engine.Engine        = (*Engine)(nil)
	_ engine.Egress        = (*Engine)(nil)
	_ engine.EgressAdopter = (*Engine)(nil)
	_ engine.Networker     = (*Engine)(nil)
	_ engine.Measurer      = (*Engine)(nil)
	_ engine.LogReader     = (*Engine)(nil)
	_ engine.StatsReader   = (*Engine)(nil)
	_ engine.Installer     = (*Engine)(nil)
	_ engine.ImageChecker  = (*Engine)(nil)
	_ engine.Pools         = pools{}
)
