package contract

// The labels that runtimectl puts on everything it makes, on every engine (Docker's labels,
// Kubernetes' labels and annotations). Objects are found by label, never by name prefix.
const (
	LabelSession  = "io.runtimectl.session"
	LabelLang     = "io.runtimectl.lang"
	LabelSchema   = "io.runtimectl.schema"
	LabelSettings = "io.runtimectl.settings" // on the volume: the session's settings (JSON)
	LabelAgent    = "io.runtimectl.agent"    // on images: carries the runtimectl agent
	LabelHash     = "io.runtimectl.content-hash"
	LabelOwner    = "io.runtimectl.owner" // on runtimes made through `runtimectl serve`: the token's name
	LabelRole     = "io.runtimectl.role"  // on volumes: RoleState for a session's state volume (none on its workspace volume)
	// LabelPool names the warm pool of a pool member's runtime and volumes, and of a pool's
	// own record (RolePool), whose LabelPoolConfig holds its settings.
	LabelPool       = "io.runtimectl.pool"
	LabelPoolConfig = "io.runtimectl.pool-config"
	// LabelBacking is on both volumes of a session claimed from a pool (Docker): the names of
	// the pool member's workspace and state volumes (comma-separated), whose data they bind.
	LabelBacking = "io.runtimectl.backing"
	// LabelEgress is on a session's egress proxy (Docker: its container and socket volume;
	// Kubernetes: its pod): the session's name (Kubernetes: its key). They carry no
	// LabelSession, so that they are never taken for a session's own.
	LabelEgress = "io.runtimectl.egress"
	// LabelAllowHosts is on the runtime of a session with allowed hosts: its proxy must run
	// before it starts.
	LabelAllowHosts = "io.runtimectl.allow-hosts"
	// LabelHelper marks a short-lived helper container (never a session's): its kind
	// ("install", "measure"). LabelHelperFor names the session it works for; LabelDeadline is
	// the Unix time past which it is a leftover that gc removes.
	LabelHelper    = "io.runtimectl.helper"
	LabelHelperFor = "io.runtimectl.helper-for"
	LabelDeadline  = "io.runtimectl.deadline"
	// LabelsSchema is the value of LabelSchema: the version of this set of labels.
	LabelsSchema = "1"
)

// NamePrefix is the prefix of runtime and volume names: runtimectl-NAME.
const NamePrefix = "runtimectl-"

// RoleState is the LabelRole of a session's state volume; RolePool of a warm pool's own record.
const (
	RoleState = "state"
	RolePool  = "pool"
)

// VolumeName is the name of a session's workspace volume (Docker's named volume; on Kubernetes
// the name of its pair of claims): runtimectl-NAME.
func VolumeName(session string) string { return NamePrefix + session }

// StateVolumeName is the name of a session's state volume on Docker. No workspace volume can
// have it: theirs all begin with NamePrefix, which ends in '-'.
func StateVolumeName(session string) string { return "runtimectl_state-" + session }
