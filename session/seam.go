package session

import (
	"context"
	"io"
	"time"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/volumes"
)

// The backend seam. Everything session asks of an engine goes through these two interfaces:
// Runtimes for a session's runtime (a container on Docker, a pod on Kubernetes) and Storage for
// its volumes (a named volume pair on Docker, two PersistentVolumeClaims on Kubernetes). The
// Docker engine implements them with the containers and volumes packages directly; the kube
// package implements them over client-go (kube.Backend.Session). Nothing else in session knows
// which engine it talks to; where the engines differ (Kubernetes deletes the pod on stop, so a
// start makes it again from the volumes' settings) the common path already covers both.
//
// The types are the containers and volumes packages' own: a backend other than Docker fills
// what it has (Info.StateMounted is true for a runtime that mounts the state's storage) and
// returns errors that errors.Is finds as containers.ErrNotFound, volumes.ErrNotFound,
// containers.ErrUnreachable and volumes.ErrInUse.

// Runtimes drives sessions' runtimes.
type Runtimes interface {
	// Create makes the runtime from spec; CreateIfAbsent also says whether this call made it,
	// and returns containers.ErrBeingCreated while another is making it.
	Create(ctx context.Context, spec containers.Spec) (containers.Info, error)
	CreateIfAbsent(ctx context.Context, spec containers.Spec) (containers.Info, bool, error)
	Start(ctx context.Context, session string) error
	Stop(ctx context.Context, session string, timeout time.Duration) error
	Remove(ctx context.Context, session string, force bool) error
	Inspect(ctx context.Context, session string) (containers.Info, error)
	List(ctx context.Context) ([]containers.Info, error)
	// Dial opens a private duplex stream to the session's agent (`runtime-agent connect`).
	Dial(ctx context.Context, session string) (io.ReadWriteCloser, error)
	CopyTo(ctx context.Context, session, dir string, content io.Reader) error
	CopyFrom(ctx context.Context, session, path string) (io.ReadCloser, error)
	Stat(ctx context.Context, session, path string) (containers.PathInfo, error)
	// Host names the engine as it is reached; Engine asks it for its version.
	Host() string
	Engine(ctx context.Context) (containers.Engine, error)
	// EnsureNetwork makes the network a --network setting needs (nothing where the engine
	// isolates sessions otherwise).
	EnsureNetwork(ctx context.Context, setting string) error
	// Measure sizes volumes the engine cannot (see containers.Manager.Measure).
	Measure(ctx context.Context, image string, vols []string) ([]int64, error)
	// Logs returns the agent's own log (never the code's output), at most max bytes of it.
	Logs(ctx context.Context, session string, max int64) ([]byte, error)
	// Stats samples the runtime's use of CPU, memory and processes.
	Stats(ctx context.Context, session string) (containers.Stats, error)
	// CreateStarts reports whether a runtime runs as soon as it is made (Kubernetes' pods),
	// where files can only be copied into a running one: fork then starts the new runtime,
	// fills it, and makes it again so that its agent reads what was copied.
	CreateStarts() bool
	// StopRemoves reports whether stopping a session removes its runtime (Kubernetes deletes
	// the pod, keeping the claims): a session with volumes and no runtime is then stopped, not
	// "removed".
	StopRemoves() bool
}

// Storage manages sessions' volumes, with the session's settings on them.
type Storage interface {
	Create(ctx context.Context, session, lang, settings string, opts ...volumes.CreateOption) (volumes.Volume, error)
	// EnsureState makes the session's state volume when it is missing (a session made before
	// it had one) and says whether it did.
	EnsureState(ctx context.Context, session string) (bool, error)
	Inspect(ctx context.Context, session string) (volumes.Volume, error)
	// Remove removes a volume by name (Volume.Name), its state volume with it.
	Remove(ctx context.Context, name string) error
	RemoveSession(ctx context.Context, session string) error
	RemoveState(ctx context.Context, session string) error
	List(ctx context.Context, withSize bool) ([]volumes.Volume, error)
}

// Pools is what warm pools need of an engine beyond Runtimes and Storage: a place for the
// pools' settings, and the move that makes a claimed member the session of another name. An
// engine without it (Backend.Pools nil) has no pools.
type Pools interface {
	// SavePool records a pool's settings (JSON) under its name, replacing what was there.
	SavePool(ctx context.Context, name, config string) error
	// LoadPools returns every recorded pool's settings (JSON).
	LoadPools(ctx context.Context) ([]string, error)
	// DeletePool removes a pool's record; a missing one is removed already.
	DeletePool(ctx context.Context, name string) error
	// Adopt makes the runtime and volumes of pool member the session name's, with settings
	// (JSON, the session's): from then on every Runtimes and Storage call finds them by name.
	// Docker renames the container and binds new volumes to the member's; Kubernetes, which
	// renames nothing, relabels the pod and the claims.
	Adopt(ctx context.Context, member, name, settings string) error
}

// Backend is an engine for NewWithBackend: its runtimes and storage, its warm pools (nil where
// it has none), its name (docker, kubernetes) and what closes its connections.
type Backend struct {
	Name     string
	Runtimes Runtimes
	Storage  Storage
	Pools    Pools
	// Egress runs the egress proxies of sessions with allowed hosts (nil: the engine has none).
	Egress Egress
	Closer io.Closer
}

var (
	_ Runtimes = (*containers.Manager)(nil)
	_ Storage  = (*volumes.Manager)(nil)
)
