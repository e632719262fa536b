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
	Schema        = "1"
)

// Prefix is the prefix of container and volume names: runtimectl-NAME.
const Prefix = "runtimectl-"

// RoleState is the LabelRole of a session's state volume.
const RoleState = "state"
