// Package contract is what the controller (session, cli) and the agent inside a session's
// container agree on, defined once and imported by both sides: where things live in the
// container and on the session's volume, the settings document the controller passes to the
// agent and the agent keeps on the volume, the agent's command line, and the vocabulary of
// statuses and policies that history records, protocol results and the CLI share.
//
// Changing a path or a name here changes it for both sides at once; the volume's layout is
// versioned by the settings' Schema.
//
// Standard library only; it imports nothing of the project.
package contract

import (
	"encoding/json"
	"fmt"
	"path"
	"time"
)

// Paths inside a session's container.
const (
	// Workspace is the session's working directory, the workspace volume's mount point.
	Workspace = "/workspace"
	// StateDir is the runtime's own directory (root, 0700): settings, history, snapshots. It is
	// the session's state volume, mounted outside the workspace, so that nothing the session
	// user can rename or replace leads to it.
	StateDir = "/var/lib/runtimectl"
	// LegacyStateDir is where sessions made before the state volume kept their state, inside
	// the workspace (which the session user owns). The controller copies what root wrote there
	// to the state volume when it next creates the session's container (MigratedFile marks it)
	// and the agent then removes the folder.
	LegacyStateDir = "/workspace/.runtimectl"
	// Socket is the agent's unix socket, which `runtime-agent connect` joins.
	Socket = "/run/runtimectl/agent.sock"
	// AgentBinary is where the images put the agent.
	AgentBinary = "/usr/local/bin/runtime-agent"
)

// Files and folders in StateDir.
const (
	SettingsFile = "session.json"  // the Settings, as the controller passed them
	HistoryFile  = "history.jsonl" // the history (package history)
	SnapshotsDir = "snapshots"     // snapshot manifests, ID + ".json" (package snapshot)
	SnapdataDir  = "snapdata"      // snapshot data, ID + ".snap"
	ReserveFile  = "reserve"       // room kept for the history on a full volume
	MigratedFile = "migrated"      // written when the state was moved here from LegacyStateDir
)

// StatePath returns the absolute path of a file or folder of StateDir.
func StatePath(name string) string { return path.Join(StateDir, name) }

// SnapshotFiles returns the paths, relative to StateDir, of snapshot id's manifest and data.
func SnapshotFiles(id string) (manifest, data string) {
	return path.Join(SnapshotsDir, id+".json"), path.Join(SnapdataDir, id+".snap")
}

// The agent's command line.
const (
	// SettingsEnv is the environment variable that carries the Settings (JSON) to the agent.
	SettingsEnv = "RUNTIMECTL_SETTINGS"
	// AgentServe and AgentConnect are the agent's subcommands: the container's main process,
	// and a client's private stream (run with docker exec).
	AgentServe   = "serve"
	AgentConnect = "connect"
	// AgentDu measures folder trees (a helper container runs it to size volumes).
	AgentDu = "du"
	// AgentEgressRun runs one command behind an egress relay (an installer reaching only its
	// index through its own proxy).
	AgentEgressRun = "egress-run"
	// Flags of `runtime-agent serve`.
	FlagLang    = "lang"
	FlagState   = "state"
	FlagWorkdir = "workdir"
	FlagUID     = "uid"
)

// Egress: a session started with allowed hosts (`--allow-host`) has loopback as its only
// network; its agent relays the proxy port, DNS and the allowed names' ports there to the
// session's egress proxy (package egress), which runs in a container (a pod) of its own.
const (
	// EgressBinary is where the egress image puts the proxy (cmd/runtime-egress).
	EgressBinary = "/usr/local/bin/runtime-egress"
	// EgressDir is where the proxy's socket is, on a volume that only the proxy's container and
	// the session's agent mount (Docker): under the agent's own 0700 folder.
	EgressDir = "/run/runtimectl/egress"
	// EgressSocket is the proxy's socket in EgressDir.
	EgressSocket = EgressDir + "/proxy.sock"
	// EgressProxyEnv tells the agent where its relay reaches the proxy: unix:PATH (the default,
	// EgressSocket) or tcp:HOST:PORT (Kubernetes).
	EgressProxyEnv = "RUNTIMECTL_EGRESS_PROXY"
	// EgressTrustDir (a small tmpfs the session user can read) holds EgressTrustBundle: the
	// system's CA certificates and the session's egress CA, which the agent writes when the
	// session has secret headers.
	EgressTrustDir    = "/run/runtimectl-trust"
	EgressTrustBundle = EgressTrustDir + "/ca-bundle.pem"
	// EgressProxyURL is the session's HTTP(S)_PROXY: the agent's relay on loopback.
	EgressProxyURL = "http://127.0.0.1:3128"
)

// EgressEnv is the environment the agent gives the interpreter of a session with allowed
// hosts: the proxy for the tools that read it (pip, curl, requests, git), and with a trust
// bundle, the bundle for the tools that take one (so that they accept the certificates the
// proxy makes for the secret hosts).
func EgressEnv(bundle bool) []string {
	env := []string{
		"HTTP_PROXY=" + EgressProxyURL, "http_proxy=" + EgressProxyURL,
		"HTTPS_PROXY=" + EgressProxyURL, "https_proxy=" + EgressProxyURL,
		"NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1",
	}
	if bundle {
		for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS"} {
			env = append(env, k+"="+EgressTrustBundle)
		}
	}
	return env
}

// ConnectCommand is the argv the controller execs in a session's container to reach its agent.
func ConnectCommand() []string { return []string{AgentBinary, AgentConnect} }

// Status is how an execution ended (or that it is still running).
type Status string

// Execution statuses.
const (
	StatusRunning     Status = "running"     // a start record with no end (yet)
	StatusOK          Status = "ok"          // ran to its end without error
	StatusError       Status = "error"       // raised, or the last command failed
	StatusTimeout     Status = "timeout"     // ran past its timeout and was interrupted
	StatusInterrupted Status = "interrupted" // interrupted by the user
	StatusCrashed     Status = "crashed"     // the interpreter (or the container) died during it
)

// StateStatus says what became of the interpreter's state after an execution.
type StateStatus string

// State statuses.
const (
	StateSaved     StateStatus = "saved"     // a snapshot of the state after the execution was written
	StatePending   StateStatus = "pending"   // a snapshot is being written in the background
	StateFailed    StateStatus = "failed"    // the snapshot could not be written
	StateUnchanged StateStatus = "unchanged" // the execution provably changed nothing: no snapshot needed
	StateOff       StateStatus = "off"       // snapshots are not taken automatically for the session
	StateRestored  StateStatus = "restored"  // the interpreter died and an earlier state was brought back
)

// SnapshotPolicy says when the agent takes snapshots.
type SnapshotPolicy string

// Snapshot policies.
const (
	// SnapshotEvery takes one after every execution that ran code (it may have changed the
	// state), in the background. The default.
	SnapshotEvery SnapshotPolicy = "every"
	// SnapshotManual takes one only when asked, and when the session is stopped with unsaved
	// changes.
	SnapshotManual SnapshotPolicy = "manual"
)

// ParseSnapshotPolicy returns the policy called s ("" is the default, every).
func ParseSnapshotPolicy(s string) (SnapshotPolicy, error) {
	switch p := SnapshotPolicy(s); p {
	case "":
		return SnapshotEvery, nil
	case SnapshotEvery, SnapshotManual:
		return p, nil
	}
	return "", fmt.Errorf("snapshot policy %q: use every or manual", s)
}

// ForkDoneFile, in a fork's state folder, says that the fork is whole (Settings.ForkOf).
const ForkDoneFile = "forked.json"

// DefaultDisk is the workspace's disk cap when a session's settings name none.
const DefaultDisk = 10 << 30

// EntriesPerCapByte: the workspace's cap on entries (files, folders, links) is one entry per
// this many bytes of its disk cap, and never under MinDiskEntries (16,384 entries for a 64 MiB
// cap, 2.6 million for the default 10 GiB).
const (
	EntriesPerCapByte = 4096
	MinDiskEntries    = 16384
)

// EntryLimit is the cap on entries of a workspace whose disk cap is disk (0: none).
func EntryLimit(disk int64) int64 {
	if disk <= 0 {
		return 0
	}
	return max(disk/EntriesPerCapByte, MinDiskEntries)
}

// DiskCapCode is the error code of an execution refused because the workspace is past its
// disk cap; IgnoreDiskCap in the request runs it anyway (to free space).
const DiskCapCode = "disk_cap"

// SettingsSchema versions the settings document.
const SettingsSchema = 1

// Settings are what a session is made of. The controller records them on the session's volume
// (a label) and passes them to the agent in SettingsEnv; the agent keeps them in
// StateDir/SettingsFile. They hold again after stop and start and after the container is
// removed by other means.
type Settings struct {
	Schema        int            `json:"schema"`
	Session       string         `json:"session"`
	Lang          string         `json:"lang"`
	Image         string         `json:"image"`
	Memory        int64          `json:"memory"` // bytes
	CPUs          float64        `json:"cpus,omitempty"`
	Pids          int64          `json:"pids"`
	Network       string         `json:"network"`
	Env           []string       `json:"env,omitempty"`
	Snapshot      SnapshotPolicy `json:"snapshot"`
	KeepSnapshots int            `json:"keep_snapshots"`
	MaxOutput     int64          `json:"max_output,omitempty"`
	// Disk caps the bytes the workspace may take (0: DefaultDisk, for sessions made before the
	// cap); the agent measures it and refuses executions past it.
	Disk     int64  `json:"disk,omitempty"`
	Runtime  string `json:"runtime,omitempty"`
	IdleStop string `json:"idle_stop,omitempty"` // a duration: `session gc` stops the session after this long idle
	// TTL is a duration: `session gc` (and `runtimectl serve`, on its own) removes the session
	// once it has been idle that long.
	TTL string `json:"ttl,omitempty"`
	// TestRun names the test process that made the session ("HOST/PID/START"): once that
	// process is gone, `session gc` removes what it left behind.
	TestRun string    `json:"test_run,omitempty"`
	Created time.Time `json:"created"`

	// Owner names who made the session through `runtimectl serve` (its token's name); "" for
	// sessions made otherwise. The server shows a session only to its owner and to admins.
	Owner string `json:"owner,omitempty"`
	// Preload is Python code the interpreter runs at each start, before the session's state is
	// restored, in a namespace of its own (its names are not the session's; the modules it
	// imports are loaded): what a warm pool's members were started with (`runtimectl pool set
	// --preload`). Python sessions only.
	Preload string `json:"preload,omitempty"`
	// AllowHosts are the destinations the session may reach by name through its egress proxy
	// (`--allow-host`, canonical: egress.CanonicalAllowHosts); empty: no egress proxy, and the
	// session's Network applies.
	AllowHosts []string `json:"allow_hosts,omitempty"`
	// ForkOf names the session this one was forked from, and ForkedBy the process that made
	// the fork ("HOST/PID/START"); a fork is whole once ForkDoneFile is in its state, written
	// last: one whose maker was killed midway is an incomplete fork (refused at start, shown
	// by ls, removed by gc).
	ForkOf   string `json:"fork_of,omitempty"`
	ForkedBy string `json:"forked_by,omitempty"`
	// SecretHeaders are the `--secret-header` specs (HOST=HEADER:SOURCE, canonical): where the
	// controller takes each value from, never the value.
	SecretHeaders []string `json:"secret_headers,omitempty"`
	// Read by the agent only, for tests and tuning; zero values take the agent's defaults.
	GraceMs         int64 `json:"grace_ms,omitempty"`
	SnapshotBudgetS int64 `json:"snapshot_budget_s,omitempty"`
}

// Encode returns the settings as JSON.
func (s Settings) Encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}

// DecodeSettings parses a settings document as the controller reads it back: session, lang and
// image are required.
func DecodeSettings(raw string) (Settings, error) {
	var s Settings
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return s, fmt.Errorf("decode session settings: %w", err)
	}
	if s.Session == "" || s.Lang == "" || s.Image == "" {
		return s, fmt.Errorf("decode session settings: session, lang and image are required")
	}
	return s, nil
}

// DisplayKind says what a rich output of an execution is, in Jupyter's words.
type DisplayKind string

// The kinds of displays. DisplayPage is IPython's pager (obj?, obj??), which Jupyter sends as
// an execute_reply payload rather than an output.
const (
	DisplayData   DisplayKind = "display_data"
	DisplayResult DisplayKind = "execute_result"
	DisplayUpdate DisplayKind = "update_display_data"
	DisplayClear  DisplayKind = "clear_output"
	DisplayPage   DisplayKind = "page"
)
