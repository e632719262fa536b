package containers

// The labels that runtimectl puts on everything it creates. Objects are found by label, never
// by name prefix.
const (
	LabelSession  = "io.runtimectl.session"
	LabelLang     = "io.runtimectl.lang"
	LabelSchema   = "io.runtimectl.schema"
	LabelSettings = "io.runtimectl.settings" // on the volume: the session's settings (JSON)
	LabelAgent    = "io.runtimectl.agent"    // on images: carries the runtimectl agent
	LabelHash     = "io.runtimectl.content-hash"
	LabelOwner    = "io.runtimectl.owner" // on containers made through `runtimectl serve`: the token's name
	LabelRole     = "io.runtimectl.role"  // on volumes: RoleState for a session's state volume (none on its workspace volume)
	// LabelPool names the warm pool of a pool member's container and volumes, and of a pool's
	// own volume (RolePool), whose LabelPoolConfig holds its settings.
	LabelPool       = "io.runtimectl.pool"
	LabelPoolConfig = "io.runtimectl.pool-config"
	// LabelBacking is on both volumes of a session claimed from a pool: the names of the pool
	// member's workspace and state volumes (comma-separated), whose data they bind.
	LabelBacking = "io.runtimectl.backing"
	Schema       = "1"
)

// Prefix is the prefix of container and volume names: runtimectl-NAME.
const Prefix = "runtimectl-"

// RoleState is the LabelRole of a session's state volume; RolePool of a warm pool's own volume.
const (
	RoleState = "state"
	RolePool  = "pool"
)
