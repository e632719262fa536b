package session

import (
	"encoding/json"
	"fmt"
	"time"
)

// SettingsSchema versions the settings document.
const SettingsSchema = 1

// Settings are what a session is made of. They are recorded on the session's volume (a label,
// and session.json in its state directory) when it is created, and hold again after stop and
// start and after the container is removed by other means.
type Settings struct {
	Schema        int       `json:"schema"`
	Session       string    `json:"session"`
	Lang          string    `json:"lang"`
	Image         string    `json:"image"`
	Memory        int64     `json:"memory"` // bytes
	CPUs          float64   `json:"cpus,omitempty"`
	Pids          int64     `json:"pids"`
	Network       string    `json:"network"`
	Env           []string  `json:"env,omitempty"`
	Snapshot      string    `json:"snapshot"` // every | manual
	KeepSnapshots int       `json:"keep_snapshots"`
	MaxOutput     int64     `json:"max_output,omitempty"`
	Runtime       string    `json:"runtime,omitempty"`
	IdleStop      string    `json:"idle_stop,omitempty"` // a duration: `session gc` stops the session after this long idle
	Created       time.Time `json:"created"`

	// Owner names who made the session through `runtimectl serve` (its token's name); "" for
	// sessions made otherwise. The server shows a session only to its owner and to admins.
	Owner string `json:"owner,omitempty"`
}

func (s Settings) encode() string {
	b, _ := json.Marshal(s)
	return string(b)
}

func decodeSettings(raw string) (Settings, error) {
	var s Settings
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		return s, fmt.Errorf("decode session settings: %w", err)
	}
	if s.Session == "" || s.Lang == "" || s.Image == "" {
		return s, fmt.Errorf("decode session settings: session, lang and image are required")
	}
	return s, nil
}
