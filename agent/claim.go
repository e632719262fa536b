package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"

	"github.com/runtimectl/runtimectl/contract"
)

// claimFile, in the state directory, holds the name of the session that claimed this warm
// pool member: the agent takes it again when it starts in the same container (a restart by
// the engine), whose environment still carries the member's settings.
const claimFile = "claimed"

// recordClaim makes the claim's name the session's for good: in the settings the state keeps
// (session.json names the session, not the member) and in claimFile.
func (a *Agent) recordClaim(name string) {
	if err := writeFileAtomic(filepath.Join(a.cfg.StateDir, claimFile), []byte(name)); err != nil {
		a.cfg.Logger.Warn("record the claim", "err", err)
	}
	if len(a.cfg.Settings) == 0 {
		return
	}
	var st map[string]any
	if err := json.Unmarshal(a.cfg.Settings, &st); err != nil {
		return
	}
	st["session"] = name
	if b, err := json.Marshal(st); err == nil {
		if err := writeFileAtomic(filepath.Join(a.cfg.StateDir, contract.SettingsFile), b); err != nil {
			a.cfg.Logger.Warn("record the claim's settings", "err", err)
		}
	}
}

// loadClaim takes the name of a claim recorded by an earlier agent of this container.
func (a *Agent) loadClaim() {
	f, err := os.OpenFile(filepath.Join(a.cfg.StateDir, claimFile), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := f.Read(b)
	if name := string(b[:n]); name != "" && name != a.cfg.Session {
		a.claimedAs.Store(&name)
		a.recordClaim(name)
	}
}
