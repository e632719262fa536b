package session

import "github.com/runtimectl/runtimectl/contract"

// SettingsSchema versions the settings document (see contract.Settings).
const SettingsSchema = contract.SettingsSchema

// Settings are what a session is made of: the document the controller records on the session's
// volume and passes to the agent, defined once in package contract for both sides.
type Settings = contract.Settings

func decodeSettings(raw string) (Settings, error) { return contract.DecodeSettings(raw) }
