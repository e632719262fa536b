// Package backend names an engine's parts in engine-neutral types, with the standard library
// only: a session's runtime (create, start, stop, remove, inspect and list it; a private duplex
// stream to the agent's `runtime-agent connect`; copying files in and out as tar streams), its
// volumes, and the errors every engine returns. The kube package implements it over client-go
// (a Pod plus PersistentVolumeClaims, the stream through pods/exec), and adapts it to the
// session library's own seam, session.Runtimes and session.Storage, which Docker's containers
// and volumes managers implement directly (kube.Backend.Session).
package backend

import (
	"context"
	"errors"
	"io"
	"time"
)

// Backends by name, as --backend and RUNTIMECTL_BACKEND name them.
const (
	Docker     = "docker"
	Kubernetes = "kubernetes"
)

// Errors that every backend returns (wrapped, with details) so that session can act on them
// without knowing the engine.
var (
	// ErrNotFound: the session's runtime (container, pod) or volume does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnreachable: the engine (Docker daemon, Kubernetes API server) cannot be reached; the
	// message names where it was looked for.
	ErrUnreachable = errors.New("the engine cannot be reached")
	// ErrImage: the session's image cannot be used (it cannot be pulled, it does not exist).
	ErrImage = errors.New("the session's image cannot be used")
	// ErrInUse: a volume cannot be removed while a runtime uses it.
	ErrInUse = errors.New("volume is in use")
)

// Spec is what a session's runtime is made from. Zero values take the backend's defaults.
type Spec struct {
	Session  string
	Lang     string
	Image    string
	Memory   int64   // bytes; the hard limit (no swap)
	CPUs     float64 // 0: no limit
	Pids     int64   // Docker: the container's pids limit; Kubernetes: the node's podPidsLimit applies
	Network  string  // "none" (default) or "bridge"
	Env      []string
	Settings string // JSON, passed to the agent as RUNTIMECTL_SETTINGS
	// Runtime is an OCI runtime on Docker (runsc), a RuntimeClass on Kubernetes; "" is the default.
	Runtime string
	TmpSize int64 // bytes of /tmp, in memory and counted in the memory limit
	// Labels are added to the runtime's own (a warm pool member's pool and settings hash).
	Labels map[string]string
}

// Info is what a backend knows of a session's runtime.
type Info struct {
	ID        string
	Name      string // runtimectl-NAME on both backends
	Session   string
	Lang      string
	Image     string
	State     string // created, running, exited, ... (Kubernetes: pending, running, exited, terminating)
	Running   bool   // the agent's process runs: a stream can be opened
	OOMKilled bool
	ExitCode  int
	Created   time.Time
	StartedAt time.Time
	Labels    map[string]string
	Node      string // Kubernetes: the node the pod runs on; Docker: ""
}

// Volume is a session's storage: its workspace and its state, one unit for every verb.
type Volume struct {
	Name     string    `json:"name"` // runtimectl-NAME
	Session  string    `json:"session"`
	Lang     string    `json:"lang"`
	Settings string    `json:"-"`
	Created  time.Time `json:"created"`
	Size     int64     `json:"size_bytes"` // -1 when unknown
}

// PathInfo describes a path in a session's runtime.
type PathInfo struct {
	Exists bool
	IsDir  bool
	Size   int64
}

// Runtime drives sessions' runtimes: a container on Docker, a pod on Kubernetes. Every method
// is idempotent where the word allows: create of an existing runtime returns it, stop and
// remove of a missing one succeed.
type Runtime interface {
	// Create makes the session's runtime from spec, or returns the existing one. On Docker the
	// container is created stopped; on Kubernetes the pod is created and starts at once.
	Create(ctx context.Context, spec Spec) (Info, error)
	// Start starts the runtime and returns when its agent's process runs (Kubernetes: the pod's
	// container is running). An image that cannot be pulled is ErrImage, not a hang.
	Start(ctx context.Context, session string) error
	// Stop ends the runtime, giving the agent timeout to finish; the volumes stay. On
	// Kubernetes the pod is deleted (its claims stay), so the next start creates it again.
	Stop(ctx context.Context, session string, timeout time.Duration) error
	// Remove removes the runtime (force: even a running one); the volumes stay.
	Remove(ctx context.Context, session string, force bool) error
	// Inspect returns the session's runtime; ErrNotFound when there is none.
	Inspect(ctx context.Context, session string) (Info, error)
	// List returns every runtime labelled as a runtimectl session.
	List(ctx context.Context) ([]Info, error)
	// Dial opens a private duplex stream to the session's agent (`runtime-agent connect`).
	// Closing it ends the relay; the agent goes on.
	Dial(ctx context.Context, session string) (io.ReadWriteCloser, error)
	// CopyTo extracts the tar stream content into dir in the session's runtime; entries keep
	// the owners of their headers.
	CopyTo(ctx context.Context, session, dir string, content io.Reader) error
	// CopyFrom returns a tar stream of path in the session's runtime; ErrNotFound for a path
	// that does not exist.
	CopyFrom(ctx context.Context, session, path string) (io.ReadCloser, error)
	// Stat describes path in the session's runtime (Exists false when there is none).
	Stat(ctx context.Context, session, path string) (PathInfo, error)
	// Host names the engine as the backend reaches it (a Docker host, a Kubernetes server URL
	// and namespace).
	Host() string
}

// Volumes manages sessions' storage: one named volume per session on Docker (a pair once the
// state has its own), two PersistentVolumeClaims on Kubernetes. The settings document travels
// with it, so that a session whose runtime is gone can be made again exactly as it was.
type Volumes interface {
	// Create creates the session's volumes with its settings, or returns the existing ones.
	Create(ctx context.Context, session, lang, settings string) (Volume, error)
	// Inspect returns the session's volumes; ErrNotFound when there are none.
	Inspect(ctx context.Context, session string) (Volume, error)
	// Remove removes the volumes of that name (Volume.Name); missing ones are removed already;
	// ErrInUse while a runtime uses them.
	Remove(ctx context.Context, name string) error
	// List returns every session's volumes, with sizes when withSize and the engine can say.
	List(ctx context.Context, withSize bool) ([]Volume, error)
}

// Backend is one engine: its runtimes and its volumes.
type Backend interface {
	// Name is Docker or Kubernetes.
	Name() string
	Runtime() Runtime
	Volumes() Volumes
	// Close releases the backend's connections.
	Close() error
}
