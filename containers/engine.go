package containers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/docker/docker/api/types"

	"github.com/runtimectl/runtimectl/engine"
)

// Engine describes the Docker engine that a client talks to (engine.About).
type Engine = engine.About

// engineInfo is the part of the engine's /info that Engine reports. Podman says it is rootless
// in a field of its own; a rootless Docker says it among its security options.
type engineInfo struct {
	CgroupVersion   string
	SecurityOptions []string
	Rootless        bool
}

// infoAPI is the real Docker client's way to make a request of its own (Podman's /info carries
// a field that the SDK's type drops).
type infoAPI interface {
	HTTPClient() *http.Client
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

// About asks the engine for its version. An engine that cannot be reached is ErrUnreachable,
// with a message that says what to check (TLS certificates included).
func (m *Manager) About(ctx context.Context) (Engine, error) {
	v, ok := m.api.(versionAPI)
	if !ok {
		return Engine{}, errors.New("engine version: this client cannot ask for it")
	}
	sv, err := v.ServerVersion(ctx)
	if err != nil {
		return Engine{Host: v.DaemonHost()}, classifyHost(err, v.DaemonHost())
	}
	e := Engine{
		Name: engineName(sv), Host: v.DaemonHost(), Version: sv.Version, APIVersion: sv.APIVersion, MinAPIVersion: sv.MinAPIVersion,
		ClientAPI: v.ClientVersion(), OS: sv.Os, Arch: sv.Arch,
	}
	if ia, ok := m.api.(infoAPI); ok && strings.HasPrefix(e.Host, "unix://") {
		if info, err := readInfo(ctx, ia.HTTPClient(), v.ClientVersion()); err == nil {
			e.CgroupVersion = info.CgroupVersion
			e.Rootless = info.Rootless
			for _, o := range info.SecurityOptions {
				if o == "name=rootless" {
					e.Rootless = true
				}
			}
		}
	}
	return e, nil
}

// readInfo asks a local engine (a unix socket, which the client's transport dials whatever the
// URL's host) for its /info.
func readInfo(ctx context.Context, hc *http.Client, version string) (engineInfo, error) {
	var info engineInfo
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://api.moby.localhost/v"+version+"/info", nil)
	if err != nil {
		return info, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return info, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return info, fmt.Errorf("engine info: %s", resp.Status)
	}
	return info, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info)
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
