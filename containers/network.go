package containers

import (
	"context"
	"fmt"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// BridgeNetwork is the network of sessions started with `--network bridge`: runtimectl's own
// bridge, with traffic between its containers off (com.docker.network.bridge.enable_icc), so
// that sessions reach the outside but not one another. What still reaches the host: its
// services listening on the bridge's gateway address or on all addresses.
const BridgeNetwork = "runtimectl-bridge"

// IsNetworkGone reports an error of a container's start whose network no longer exists.
func IsNetworkGone(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "network") && strings.Contains(msg, "not found")
}

// networkMode is the container's network mode for a session's network setting.
func networkMode(setting string) string {
	switch setting {
	case "":
		return DefaultNetwork
	case "bridge":
		return BridgeNetwork
	}
	return setting
}

// EnsureNetwork makes the network that a session's setting needs (BridgeNetwork for bridge),
// when it is missing; other settings need none.
func (m *Manager) EnsureNetwork(ctx context.Context, setting string) error {
	if networkMode(setting) != BridgeNetwork {
		return nil
	}
	n, err := m.api.NetworkInspect(ctx, BridgeNetwork, network.InspectOptions{})
	if err == nil {
		if n.Options["com.docker.network.bridge.enable_icc"] != "false" {
			return fmt.Errorf("network %s exists but lets its containers reach one another (com.docker.network.bridge.enable_icc is not false): it was not made by runtimectl; remove it (`docker network rm %s`) and runtimectl makes its own", BridgeNetwork, BridgeNetwork)
		}
		return nil
	}
	if !errdefs.IsNotFound(err) {
		return fmt.Errorf("inspect network %s: %w", BridgeNetwork, m.classify(err))
	}
	_, err = m.api.NetworkCreate(ctx, BridgeNetwork, network.CreateOptions{
		Driver:  "bridge",
		Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
		Labels:  map[string]string{contract.LabelSchema: contract.LabelsSchema},
	})
	if err != nil && !IsConflict(err) { // another process made it at the same moment
		return advice.Errorf("create network %s (sessions with %s use it): %w", BridgeNetwork, advice.Words{Lib: "Network bridge", CLI: "--network bridge"}, m.classify(err))
	}
	return nil
}
