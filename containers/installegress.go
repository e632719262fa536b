package containers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/egress"
)

// An installer's egress (issues 26 and 28). An installer whose job has an egress spec gets a
// proxy of its own, as a session with allowed hosts does, but made for the install only and
// removed with it: a container and a socket volume both named installEgressPrefix+SESSION-XXXXXXXX,
// labelled as helpers (contract.LabelHelper "install-egress", LabelHelperFor, LabelDeadline),
// never as the session's (its own proxy, if it has one, is neither used nor widened). The
// proxy kills itself shortly after the installer's deadline and removes itself (AutoRemove);
// RunInstaller removes it and its volume when the installer ends, whatever ended it;
// RemoveHelper (`session rm`, gc) removes the volume with the last container that mounts it,
// and Helpers lists a volume that no container mounts any more, for gc to sweep.

// installEgressPrefix begins the names of installers' proxies and their volumes.
const installEgressPrefix = "runtimectl_install-"

// HelperInstallEgress is the LabelHelper kind of an installer's proxy.
const HelperInstallEgress = "install-egress"

// helperVolumeID is how Helpers names a leftover helper volume among helper containers.
const helperVolumeID = "volume:"

// volumeAPI is what helper volumes need of the engine beyond API.
type volumeAPI interface {
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
}

// startInstallEgress starts the proxy of an installer (labels: the installer's) and returns its
// name (that of its socket volume too) and the function that removes both.
func (m *Manager) startInstallEgress(ctx context.Context, in Installer, deadline time.Time, labels map[string]string) (string, func(), error) {
	s := *in.Egress
	s.Session = in.For
	if s.Network == "" {
		if err := m.EnsureEgressNetwork(ctx); err != nil {
			return "", nil, err
		}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := installEgressPrefix + in.For + "-" + hex.EncodeToString(b[:])
	what := "the installer's egress proxy for session " + strconv.Quote(in.For)
	cfg, hc := egressConfig(s)
	plabels := maps.Clone(labels)
	plabels[contract.LabelHelper] = HelperInstallEgress
	plabels[contract.LabelSchema] = contract.LabelsSchema
	cfg.Labels = plabels
	// it outlives the installer by a little (the installer's last requests), then ends and
	// removes itself even when nobody is left to remove it
	secs := int(time.Until(deadline).Seconds()) + 30
	cfg.Entrypoint = []string{"timeout", "-s", "KILL", strconv.Itoa(secs), contract.EgressBinary}
	hc.AutoRemove = true
	hc.RestartPolicy = container.RestartPolicy{}
	hc.Mounts = []mount.Mount{{Type: mount.TypeVolume, Source: name, Target: contract.EgressDir,
		VolumeOptions: &mount.VolumeOptions{Labels: plabels}}}
	remove := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = m.api.ContainerRemove(rctx, name, container.RemoveOptions{Force: true})
		m.removeHelperVolume(rctx, name)
	}
	if _, err := m.api.ContainerCreate(ctx, cfg, hc, nil, nil, name); err != nil {
		remove()
		return "", nil, fmt.Errorf("create %s: %w", what, m.classify(err))
	}
	if err := m.api.ContainerStart(ctx, name, container.StartOptions{}); err != nil {
		remove()
		return "", nil, fmt.Errorf("start %s: %w", what, m.classify(err))
	}
	if err := m.waitProxy(ctx, name, what); err != nil {
		remove()
		return "", nil, err
	}
	return name, remove, nil
}

// installerEgress makes the installer's host config reach nothing but its proxy's socket
// (volume): loopback only, the relay's resolver, ports below 1024 on loopback for the relay
// (the installer has no capability); it returns the command the installer's runs under:
// `runtime-agent egress-run`, which relays the allowed names' ports, DNS and HTTP(S)_PROXY to
// the proxy, as the installer's user.
func installerEgress(hc *container.HostConfig, volume string, allow []string) []string {
	hc.NetworkMode = "none"
	hc.DNS = []string{egress.AnswerAddr}
	hc.DNSSearch = []string{"."}
	hc.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": "0"}
	hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeVolume, Source: volume, Target: contract.EgressDir})
	return []string{contract.AgentBinary, contract.AgentEgressRun, "--allow", strings.Join(allow, ","), "--uid", "-1", "--"}
}

// removeHelperVolume removes an installer proxy's socket volume once no container mounts it:
// while one of the two that do is still alive, its own removal removes the volume (or gc
// does); when only ended ones are left, it waits a little for the engine to let go of them (a
// container that removes itself is gone a moment after it ends).
func (m *Manager) removeHelperVolume(ctx context.Context, name string) {
	va, ok := m.api.(volumeAPI)
	if !ok || !strings.HasPrefix(name, installEgressPrefix) {
		return
	}
	for i := 0; ; i++ {
		cs, err := m.api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("volume", name))})
		if err != nil {
			return
		}
		for _, c := range cs {
			switch c.State {
			case "running", "created", "paused", "restarting":
				return // its own removal removes the volume
			}
		}
		err = m.classify(va.VolumeRemove(ctx, name, false))
		if err == nil || errors.Is(err, ErrNotFound) || i >= 40 || ctx.Err() != nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// helperVolumes lists the installers' proxy volumes that no container mounts (what a crash
// left), as helpers whose ID is helperVolumeID+NAME.
func (m *Manager) helperVolumes(ctx context.Context, forSession string) ([]Info, error) {
	va, ok := m.api.(volumeAPI)
	if !ok {
		return nil, nil
	}
	f := filters.NewArgs(filters.Arg("label", contract.LabelHelper+"="+HelperInstallEgress), filters.Arg("dangling", "true"))
	if forSession != "" {
		f.Add("label", contract.LabelHelperFor+"="+forSession)
	}
	r, err := va.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list helper volumes: %w", m.classify(err))
	}
	var out []Info
	for _, v := range r.Volumes {
		if !strings.HasPrefix(v.Name, installEgressPrefix) {
			continue
		}
		created, _ := time.Parse(time.RFC3339, v.CreatedAt)
		out = append(out, Info{ID: helperVolumeID + v.Name, Created: created, Labels: v.Labels})
	}
	return out, nil
}
