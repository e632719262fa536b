package engine

import (
	"context"
	"io"
	"time"

	"github.com/runtimectl/runtimectl/egress"
)

// Abilities that not every engine has. The library finds them by type assertion on the Engine
// (e.(engine.Measurer)) and says, where a verb needs one, that the engine does not offer it.

// Networker makes the network that a --network setting needs. Engines without it isolate
// sessions otherwise (Kubernetes: a NetworkPolicy per session, made with its pod).
type Networker interface {
	EnsureNetwork(ctx context.Context, setting string) error
}

// Measurer sizes volumes that the engine cannot (Docker gives up on a folder thousands of
// levels deep), with a helper runtime of image that mounts them: one size per volume, -1 where
// it could not tell.
type Measurer interface {
	Measure(ctx context.Context, image string, vols []string) ([]int64, error)
}

// LogReader returns the agent's own log (never the code's output), at most max bytes of it.
type LogReader interface {
	Logs(ctx context.Context, session string, max int64) ([]byte, error)
}

// StatsReader samples a running runtime's use of CPU, memory and processes.
type StatsReader interface {
	Stats(ctx context.Context, session string) (Stats, error)
}

// Installer runs a short-lived installer beside a session: the session's image, as the
// session user, with the session's workspace mounted, to its end; its output goes to out and
// its exit code is returned. With job.Egress, the installer reaches nothing but an egress
// proxy of its own made from it (the index's hosts), removed with the installer.
type Installer interface {
	Install(ctx context.Context, job InstallJob, out io.Writer) (int, error)
}

// InstallJob is what an Installer runs.
type InstallJob struct {
	Session string // whose workspace is mounted at /workspace, and whom the installer works for
	Image   string
	Runtime string // the session's runtime (an OCI runtime, a RuntimeClass); "" the default
	Argv    []string
	Env     []string
	// Deadline is when the installer kills itself (zero: InstallTimeout from now).
	Deadline time.Time
	// Egress, when set, is the installer's own egress proxy (its Config.Allow the index's
	// hosts): the installer's only way out. Its Session is the session installed into.
	Egress *EgressSpec
}

// Helpers lists and removes the short-lived helper runtimes (installers, their egress proxies,
// measures, and on Docker a proxy's socket volume that a crash left) that the engine runs beside
// sessions, which carry contract.LabelHelper (and LabelHelperFor, LabelDeadline)
// and never a session's label: gc sweeps the leftovers, and removing a session removes those
// that work for it.
type Helpers interface {
	// Helpers returns the helpers that work for session ("" every one), with their labels.
	Helpers(ctx context.Context, session string) ([]Info, error)
	// RemoveHelper removes a helper by its ID, running or not; a missing one is removed.
	RemoveHelper(ctx context.Context, id string) error
}

// Egress runs the egress proxies of sessions with allowed hosts (issue 26): one proxy per such
// session, started before its runtime and stopped and removed with it. Docker runs a proxy
// container per session; Kubernetes a proxy pod.
type Egress interface {
	// StartEgress starts the session's proxy, making it from spec() when there is none (spec
	// reads the secret values: it is called only then), and returns once it listens.
	StartEgress(ctx context.Context, session string, spec func() (EgressSpec, error)) error
	// StopEgress stops it (a missing one is stopped); RemoveEgress removes it and what only it
	// used (a missing one is removed).
	StopEgress(ctx context.Context, session string, timeout time.Duration) error
	RemoveEgress(ctx context.Context, session string) error
	// EgressLogs returns the proxy's log: its refusals, one egress.LogLine (JSON) each.
	EgressLogs(ctx context.Context, session string, max int64) ([]byte, error)
}

// EgressAdopter is an Egress whose proxies can pass from a warm pool's member to the session
// that claims it (Docker renames the proxy's container).
type EgressAdopter interface {
	AdoptEgress(ctx context.Context, member, session string) error
}

// EgressSpec is what a session's egress proxy is made from.
type EgressSpec struct {
	Session string
	// Image carries contract.EgressBinary: runtimectl's session images do.
	Image string
	// Config is the proxy's configuration (it holds the secret headers' values, which only the
	// proxy sees, never the session); the engine sets Listen.
	Config egress.Config
	// Network is the proxy's outside network on Docker; "" is the engine's own.
	Network string
}

// ImageChecker is an engine that keeps images itself (Docker): the library checks a session's
// image there before it makes the session, so that a missing image is said at once with what
// to do. CheckImage returns ErrNotFound for a missing image and ErrNoAgent for one that does
// not carry the agent. An engine without it (Kubernetes) pulls the image, and one it cannot
// pull fails the start with ErrImage.
type ImageChecker interface {
	CheckImage(ctx context.Context, ref string) error
}
