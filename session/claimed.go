package session

import (
	"strings"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
)

// remake reports whether a stopped container is to be made again from its volume's settings
// before it starts: one made before sessions had a state volume, and a warm pool's member that
// a start claimed, whose container still carries the member's making (RUNTIMECTL_SETTINGS
// naming the member, its preload): the session's next start is its own.
func remake(ci engine.Info) bool {
	return !ci.StateMounted || (ci.Labels[contract.LabelPool] != "" && !strings.HasPrefix(ci.Session, poolPrefix))
}
