// Package engine is the one seam between the session library and the engines that run
// sessions: the neutral types (Spec, Info, Volume, PathInfo, Stats, About, a typed State), the
// one set of errors every engine returns, and the interfaces an engine implements directly,
// with no translation layer: Runtimes (a session's runtime: a container on Docker, a pod on
// Kubernetes), Storage (its workspace and state volumes) and Pools (warm pools). Abilities that
// not every engine has (measuring volumes, the agent's log, resource use, making networks,
// running installers, checking images) are small interfaces of their own, which the library
// finds by type assertion on the Engine, as io.WriterTo is found on a Writer.
//
// Engines live in their own packages (docker, kube) and import this one; the library (session)
// imports it and no engine SDK.
//
// Imports: the standard library, and egress for the configuration of a session's egress proxy
// (EgressSpec).
package engine

import (
	"context"
	"errors"
	"io"
	"time"
)

// Engines by name, as --backend and RUNTIMECTL_BACKEND name them.
const (
	Docker     = "docker"
	Kubernetes = "kubernetes"
)

// Errors that every engine returns (wrapped, with details) so that the library can act on them
// without knowing the engine. errors.Is finds them.
var (
	// ErrNotFound: the session's runtime (container, pod), volume or path does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnreachable: the engine (Docker daemon, Kubernetes API server) cannot be reached; the
	// message names where it was looked for.
	ErrUnreachable = errors.New("the engine cannot be reached")
	// ErrImage: the session's image cannot be used (it cannot be pulled, it does not exist).
	ErrImage = errors.New("the session's image cannot be used")
	// ErrInUse: a volume cannot be removed while a runtime uses it.
	ErrInUse = errors.New("volume is in use")
	// ErrConflict: a name another runtime has.
	ErrConflict = errors.New("the name is in use")
	// ErrBeingCreated: a runtime whose name another process took at the same moment and that is
	// not there (yet, or any more): the session is that process's to make.
	ErrBeingCreated = errors.New("the runtime is being created by another process")
	// ErrNoAgent: an image that does not carry the runtimectl agent.
	ErrNoAgent = errors.New("image does not carry the runtimectl agent")
	// ErrNetworkGone: the network the session's runtime was made on is gone (removed behind
	// runtimectl's back); the runtime must be made again.
	ErrNetworkGone = errors.New("the session's network is gone")
)

// Described is an error that says what it is in its own words while errors.Is finds one of the
// errors above (the Docker engine says "the Docker engine cannot be reached").
func Described(err error, words string) error { return &described{err: err, words: words} }

type described struct {
	err   error
	words string
}

func (d *described) Error() string        { return d.words }
func (d *described) Is(target error) bool { return target == d.err }

// Also returns err, with its words and its chain, as an error that errors.Is also finds as
// class (a Docker start error that means ErrNetworkGone).
func Also(err, class error) error { return &also{error: err, class: class} }

type also struct {
	error
	class error
}

func (a *also) Unwrap() error        { return a.error }
func (a *also) Is(target error) bool { return target == a.class }

// State is the state of a session's runtime as the engine reports it.
type State string

// The states engines report. Docker's are its containers' (created, running, paused,
// restarting, removing, exited, dead); Kubernetes' pods are pending, running, exited,
// terminating or evicted.
const (
	StateCreated     State = "created"
	StateRunning     State = "running"
	StatePaused      State = "paused"
	StateRestarting  State = "restarting"
	StateRemoving    State = "removing"
	StateExited      State = "exited"
	StateDead        State = "dead"
	StatePending     State = "pending"
	StateTerminating State = "terminating"
	StateEvicted     State = "evicted"
)

// Spec is what a session's runtime is made from. Zero values take the engine's defaults.
type Spec struct {
	Session string
	Lang    string
	Image   string
	// Volume and StateVolume name the workspace volume (mounted at /workspace) and the state
	// volume (mounted at contract.StateDir) where the engine names volumes per runtime
	// (Docker); StateVolume "" mounts none (a session made before it had one, until it is
	// migrated). Kubernetes finds the session's claims by its name.
	Volume      string
	StateVolume string
	Memory      int64   // bytes; the hard limit (no swap)
	CPUs        float64 // 0: the engine's default
	Pids        int64   // Docker: the container's pids limit; Kubernetes: the node's podPidsLimit applies
	Network     string  // "none" (default) or "bridge"
	Env         []string
	Settings    string // JSON, passed to the agent as RUNTIMECTL_SETTINGS
	// Runtime is an OCI runtime on Docker (runsc), a RuntimeClass on Kubernetes; "" is the default.
	Runtime string
	TmpSize int64 // bytes of /tmp, in memory and counted in the memory limit
	// Labels are added to the runtime's own, which they cannot replace (a warm pool member's
	// pool and settings hash).
	Labels map[string]string
	// Egress: the session has allowed hosts; its runtime reaches nothing but its egress proxy
	// (Docker: loopback only, the proxy's socket volume mounted; Kubernetes: a policy open to
	// the proxy's pod only).
	Egress bool
}

// Info is what an engine knows of a session's runtime.
type Info struct {
	ID        string
	Name      string // runtimectl-NAME on both engines
	Session   string
	Lang      string
	Image     string
	State     State
	Running   bool // the agent's process runs: a stream can be opened
	OOMKilled bool
	ExitCode  int
	Created   time.Time
	StartedAt time.Time
	Labels    map[string]string
	// StateMounted is false for a runtime made before sessions had a state volume: its agent
	// keeps the state in contract.LegacyStateDir. Every pod mounts its state claim.
	StateMounted bool
	Node         string // Kubernetes: the node the pod runs on; Docker: ""
}

// Volume is a session's storage: its workspace and its state, one unit for every verb.
type Volume struct {
	Name     string    `json:"name"`                   // runtimectl-NAME
	State    string    `json:"state_volume,omitempty"` // the session's state volume, when it has one
	Session  string    `json:"session"`
	Lang     string    `json:"lang"`
	Settings string    `json:"-"`
	Created  time.Time `json:"created"`
	Size     int64     `json:"size_bytes"` // both volumes of the session; -1 when unknown
	// Mountpoint is where the engine keeps the workspace volume's data (on its host), where it
	// says.
	Mountpoint string `json:"-"`
	// Pool names the warm pool of a pool member's volume; Backing, for a session claimed from
	// a pool, the member's volumes whose data its own bind (Docker).
	Pool    string   `json:"-"`
	Backing []string `json:"-"`
}

// VolumeOptions are what a session's volumes are made with, beyond its name and settings.
// Engines use what applies to them: Kubernetes' claims take their storage class and sizes from
// the engine's own options.
type VolumeOptions struct {
	// Driver and StateDriver are driver options of the workspace and the state volume (Docker's
	// `--opt`): for example {"type": "tmpfs", "device": "tmpfs", "o": "size=64m"}.
	Driver      map[string]string
	StateDriver map[string]string
	// Labels are added to both volumes' own (a warm pool member's).
	Labels map[string]string
}

// PathInfo describes a path in a session's runtime.
type PathInfo struct {
	Exists bool
	IsDir  bool
	Size   int64
	// Link is the target of a path that is a symbolic link (its last element; the engine
	// follows links before it), as the link says it; empty for anything else.
	Link string
}

// Stats is a running runtime's use of the host, as `docker stats` shows it.
type Stats struct {
	CPUPercent  float64 `json:"cpu_percent"` // of one CPU: 100 is one CPU busy
	MemoryBytes int64   `json:"memory_bytes"`
	MemoryLimit int64   `json:"memory_limit"`
	Pids        int64   `json:"pids"`
	PidsLimit   int64   `json:"pids_limit"`
}

// About describes the engine that a client talks to, for `runtimectl version` and `doctor`.
type About struct {
	Name          string `json:"name"`            // "Docker", "Podman", "Kubernetes"
	Host          string `json:"host"`            // as the client dials it: unix:///var/run/docker.sock, tcp://host:2376, a server URL
	Version       string `json:"version"`         // the engine's version, e.g. 28.5.2
	APIVersion    string `json:"api_version"`     // the newest API version the engine speaks
	MinAPIVersion string `json:"min_api_version"` // the oldest
	ClientAPI     string `json:"client_api"`      // the API version this client negotiated
	OS            string `json:"os"`
	Arch          string `json:"arch"`
	Rootless      bool   `json:"rootless"`       // the engine runs as an unprivileged user
	CgroupVersion string `json:"cgroup_version"` // "1" or "2"; "" when the engine did not say
}

// Runtimes drives sessions' runtimes: a container on Docker, a pod on Kubernetes. Every method
// is idempotent where the word allows: create of an existing runtime returns it, stop and
// remove of a missing one succeed.
type Runtimes interface {
	// Create makes the session's runtime from spec, or returns the existing one. On Docker the
	// container is created stopped; on Kubernetes the pod is created and starts at once.
	Create(ctx context.Context, spec Spec) (Info, error)
	// CreateIfAbsent is Create that also says whether this call made the runtime, and returns
	// ErrBeingCreated while another process is making it.
	CreateIfAbsent(ctx context.Context, spec Spec) (Info, bool, error)
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
	// Host names the engine as it is reached (a Docker host, a Kubernetes server URL and
	// namespace); About asks it for its version.
	Host() string
	About(ctx context.Context) (About, error)
	// CreateStarts reports whether a runtime runs as soon as it is made (Kubernetes' pods),
	// where files can only be copied into a running one: fork then starts the new runtime,
	// fills it, and makes it again so that its agent reads what was copied.
	CreateStarts() bool
	// StopRemoves reports whether stopping a session removes its runtime (Kubernetes deletes
	// the pod, keeping the claims): a session with volumes and no runtime is then stopped, not
	// "removed".
	StopRemoves() bool
}

// Storage manages sessions' storage: a pair of named volumes per session on Docker, two
// PersistentVolumeClaims on Kubernetes. The settings document travels with it, so that a
// session whose runtime is gone can be made again exactly as it was.
type Storage interface {
	// Create creates the session's volumes with its settings, or returns the existing ones.
	Create(ctx context.Context, session, lang, settings string, opts VolumeOptions) (Volume, error)
	// EnsureState makes the session's state volume when it is missing (a session made before
	// it had one) and says whether it did.
	EnsureState(ctx context.Context, session string) (bool, error)
	// Inspect returns the session's volumes; ErrNotFound when there are none.
	Inspect(ctx context.Context, session string) (Volume, error)
	// Remove removes the volumes of that name (Volume.Name), the state volume with them;
	// missing ones are removed already; ErrInUse while a runtime uses them.
	Remove(ctx context.Context, name string) error
	// RemoveSession removes the session's volumes, named by the session or, for a session
	// claimed from a warm pool, by the member it was.
	RemoveSession(ctx context.Context, session string) error
	// RemoveState undoes EnsureState: it removes the session's state volume alone.
	RemoveState(ctx context.Context, session string) error
	// List returns every session's volumes, with sizes when withSize and the engine can say.
	List(ctx context.Context, withSize bool) ([]Volume, error)
}

// Pools is what warm pools need of an engine beyond Runtimes and Storage: a place for the
// pools' settings, and the move that makes a claimed member the session of another name. An
// engine without it (Engine.Pools nil) has no pools.
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

// Engine is one engine: its runtimes, its storage and its warm pools.
type Engine interface {
	// Name is Docker or Kubernetes.
	Name() string
	Runtimes() Runtimes
	Storage() Storage
	// Pools is nil where the engine keeps no warm pools.
	Pools() Pools
	// Close releases the engine's connections.
	Close() error
}

// Defaults that a Spec's zero values take on every engine.
const (
	DefaultMemory = 2 << 30
	// DefaultCPUs caps a session at one CPU, so that code spinning in a few sessions cannot
	// starve the others or the host.
	DefaultCPUs    = 1.0
	DefaultPids    = 512
	DefaultNetwork = "none"
	DefaultTmpSize = 512 << 20
	// InstallTimeout is an installer's deadline when the caller sets none.
	InstallTimeout = 15 * time.Minute
)
