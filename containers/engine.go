package containers

import (
	"context"
	"errors"
	"strings"

	"github.com/docker/docker/api/types"
)

// Engine describes the Docker engine that a client talks to.
type Engine struct {
	Name          string `json:"name"`            // "Docker" or "Podman", from the server's first component
	Host          string `json:"host"`            // as the client dials it: unix:///var/run/docker.sock, tcp://host:2376
	Version       string `json:"version"`         // the engine's version, e.g. 28.5.2
	APIVersion    string `json:"api_version"`     // the newest API version the engine speaks
	MinAPIVersion string `json:"min_api_version"` // the oldest
	ClientAPI     string `json:"client_api"`      // the API version this client negotiated
	OS            string `json:"os"`
	Arch          string `json:"arch"`
}

// versionAPI is what Engine needs beyond API: the real Docker client has it, test fakes of
// API need not.
type versionAPI interface {
	ServerVersion(ctx context.Context) (types.Version, error)
	ClientVersion() string
	DaemonHost() string
}

// Host returns the address the client dials, or "" when the client cannot say.
func (m *Manager) Host() string {
	if v, ok := m.api.(versionAPI); ok {
		return v.DaemonHost()
	}
	return ""
}

// Engine asks the engine for its version. An engine that cannot be reached is ErrUnreachable,
// with a message that says what to check (TLS certificates included).
func (m *Manager) Engine(ctx context.Context) (Engine, error) {
	v, ok := m.api.(versionAPI)
	if !ok {
		return Engine{}, errors.New("engine version: this client cannot ask for it")
	}
	sv, err := v.ServerVersion(ctx)
	if err != nil {
		return Engine{Host: v.DaemonHost()}, classifyHost(err, v.DaemonHost())
	}
	return Engine{
		Name: engineName(sv), Host: v.DaemonHost(), Version: sv.Version, APIVersion: sv.APIVersion, MinAPIVersion: sv.MinAPIVersion,
		ClientAPI: v.ClientVersion(), OS: sv.Os, Arch: sv.Arch,
	}, nil
}

// engineName names the engine from the components its version names: Podman's first is "Podman
// Engine", Docker's "Engine".
func engineName(v types.Version) string {
	for _, c := range v.Components {
		if name, ok := strings.CutSuffix(c.Name, " Engine"); ok && name != "" {
			return name
		}
	}
	return "Docker"
}
