package agent

import (
	"log/slog"
	"time"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/lang"
)

// Config is what the agent needs to serve one session.
type Config struct {
	Session  string
	Lang     lang.Lang
	StateDir string // the runtime's own directory on the volume, owned by root, mode 0700
	Workdir  string // the workspace, the kernel's working directory
	Socket   string // the unix socket that `runtime-agent connect` joins
	UID, GID int    // the session user; -1 runs the kernel as the agent's own user (tests)

	// MaxOutput caps the bytes of each stream delivered to the client per execution.
	MaxOutput int64
	// HistoryOutput caps the bytes of each stream kept in a history record (head and tail).
	HistoryOutput int
	// Grace is how long interrupted code has to stop before the kernel is killed and restarted.
	Grace time.Duration
	// SnapshotPolicy is when snapshots are taken (default contract.SnapshotEvery).
	SnapshotPolicy contract.SnapshotPolicy
	KeepSnapshots  int
	// SnapshotBudget bounds one snapshot write; a writer that takes longer is killed.
	SnapshotBudget time.Duration
	// QueueLimit bounds the executions waiting their turn; past it requests are refused as busy.
	QueueLimit int
	// DiskLimit caps the bytes the workspace may take: past it, measured by a watchdog (du.go),
	// executions are refused unless they ask to ignore it. 0: no cap.
	DiskLimit int64
	// HistoryMax bounds history.jsonl on the state volume (the oldest executions are cut, with
	// a note); SnapshotMaxBytes bounds the snapshots kept there (the oldest are pruned past it,
	// never the newest). 0: DefaultHistoryMax, DefaultSnapshotMaxBytes.
	HistoryMax       int64
	SnapshotMaxBytes int64
	// Settings is the session's settings document as the controller passed it; the agent keeps
	// it in StateDir/session.json.
	Settings []byte
	// Preload is code the interpreter runs at each start, before the restore (contract.Settings).
	Preload string
	// KernelEnv is added to the interpreter's environment, after the container's (egress).
	KernelEnv []string
	Version   string
	Logger    *slog.Logger
}

// The state volume's meters: what the history and the snapshots may take on it.
const (
	DefaultHistoryMax       = 32 << 20
	DefaultSnapshotMaxBytes = 4 << 30
)

func (c *Config) setDefaults() {
	if c.StateDir == "" {
		c.StateDir = contract.StateDir
	}
	if c.Workdir == "" {
		c.Workdir = contract.Workspace
	}
	if c.Socket == "" {
		c.Socket = contract.Socket
	}
	if c.MaxOutput <= 0 {
		c.MaxOutput = 4 << 20
	}
	if c.HistoryOutput <= 0 {
		c.HistoryOutput = 512 << 10
	}
	if c.Grace <= 0 {
		c.Grace = 2 * time.Second
	}
	if c.SnapshotPolicy == "" {
		c.SnapshotPolicy = contract.SnapshotEvery
	}
	if c.KeepSnapshots <= 0 {
		c.KeepSnapshots = 10
	}
	if c.SnapshotBudget <= 0 {
		c.SnapshotBudget = 5 * time.Minute
	}
	if c.HistoryMax <= 0 {
		c.HistoryMax = DefaultHistoryMax
	}
	if c.SnapshotMaxBytes <= 0 {
		c.SnapshotMaxBytes = DefaultSnapshotMaxBytes
	}
	if c.QueueLimit <= 0 {
		c.QueueLimit = 256
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}
