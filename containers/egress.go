package containers

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/egress"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// Egress on Docker (issue 26). A session started with allowed hosts gets a proxy of its own: a
// container named EgressName(session), running runtime-egress from the session's image, on an
// outside network (EgressNetwork unless the spec names another). The session's container has
// no network but loopback (network mode none): its agent relays the session's proxy port, DNS
// and the allowed names' ports to the proxy over a unix socket on a volume (EgressName too)
// that only the two containers mount, at contract.EgressDir, under the agent's own 0700 tmpfs.
// The session's code has no socket, no route and no resolver that leads anywhere else.
//
// One proxy per session rather than one per engine: each proxy holds only its session's
// allowlist, secret values and CA, so sessions with different allowlists share nothing, a
// proxy that is attacked through its session exposes no other session's secrets, and its log
// is its session's (`session logs`, /metrics). It costs one small container (a static Go
// binary, a few MiB of memory) per such session.

// EgressNetwork is the outside network of egress proxies: a bridge with traffic between its
// containers off, so that a proxy reaches the outside but no other session's proxy.
const EgressNetwork = "runtimectl-egress"

// EgressName is the name of a session's egress proxy container and of its socket volume. The
// underscore keeps it apart from every session's runtimectl-NAME.
func EgressName(session string) string { return "runtimectl_egress-" + session }

// egressStateDir is where the proxy keeps what it makes at its start (a tmpfs).
const egressStateDir = "/var/lib/runtimectl-egress"

// EgressSpec is what a session's egress proxy container is made from (engine.EgressSpec).
type EgressSpec = engine.EgressSpec

// egressAPI is what egress needs of the engine beyond API: removing the socket volume.
type egressAPI interface {
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
}

// EnsureEgressNetwork makes EgressNetwork when it is missing.
func (m *Manager) EnsureEgressNetwork(ctx context.Context) error {
	n, err := m.api.NetworkInspect(ctx, EgressNetwork, network.InspectOptions{})
	if err == nil {
		if n.Options["com.docker.network.bridge.enable_icc"] != "false" {
			return fmt.Errorf("network %s exists but lets its containers reach one another (com.docker.network.bridge.enable_icc is not false): it was not made by runtimectl; remove it (`docker network rm %s`) and runtimectl makes its own", EgressNetwork, EgressNetwork)
		}
		return nil
	}
	if !errdefs.IsNotFound(err) {
		return fmt.Errorf("inspect network %s: %w", EgressNetwork, m.classify(err))
	}
	_, err = m.api.NetworkCreate(ctx, EgressNetwork, network.CreateOptions{
		Driver:  "bridge",
		Options: map[string]string{"com.docker.network.bridge.enable_icc": "false"},
		Labels:  map[string]string{contract.LabelSchema: contract.LabelsSchema},
	})
	if err != nil && !IsConflict(err) {
		return advice.Errorf("create network %s (the egress proxies of sessions with %s use it): %w", EgressNetwork, advice.Words{Lib: "AllowHosts", CLI: "--allow-host"}, m.classify(err))
	}
	return nil
}

// egressConfig builds the proxy container's configuration: hardened like a session's (no
// capabilities, no new privileges, read-only root, small tmpfs), on its outside network, with
// the socket volume at contract.EgressDir.
func egressConfig(s EgressSpec) (*container.Config, *container.HostConfig) {
	cfg := s.Config
	cfg.Session = s.Session
	cfg.Listen = "unix:" + contract.EgressSocket
	if len(cfg.Secrets) > 0 && cfg.CACert == "" {
		cfg.StateDir = egressStateDir
	}
	nw := s.Network
	if nw == "" {
		nw = EgressNetwork
	}
	labels := map[string]string{contract.LabelEgress: s.Session, contract.LabelSchema: contract.LabelsSchema}
	pids := int64(256)
	c := &container.Config{
		Image:      s.Image,
		Entrypoint: []string{contract.EgressBinary},
		Cmd:        []string{},
		Env:        []string{egress.ConfigEnv + "=" + cfg.Encode()},
		Labels:     labels,
		User:       "0:0", // owns the socket volume's root; no capability
	}
	init := true
	hc := &container.HostConfig{
		Init:           &init,
		NetworkMode:    container.NetworkMode(nw),
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Tmpfs: map[string]string{
			"/tmp":         "rw,nosuid,nodev,noexec,size=16m,mode=1777",
			egressStateDir: "rw,nosuid,nodev,noexec,size=1m,mode=0700",
		},
		Mounts: []mount.Mount{{
			Type: mount.TypeVolume, Source: EgressName(s.Session), Target: contract.EgressDir,
			VolumeOptions: &mount.VolumeOptions{Labels: labels},
		}},
		LogConfig: container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "2"}},
		Resources: container.Resources{Memory: 128 << 20, MemorySwap: 128 << 20, PidsLimit: &pids, NanoCPUs: 5e8},
		// A proxy that dies is started again; the session's relay dials it anew per connection.
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyOnFailure, MaximumRetryCount: 5},
	}
	return c, hc
}

// egressMounts are what a session's container with allowed hosts adds to its own: the proxy's
// socket volume.
func egressMounts(s Spec) []mount.Mount {
	if !s.Egress {
		return nil
	}
	return []mount.Mount{{Type: mount.TypeVolume, Source: EgressName(s.Session), Target: contract.EgressDir,
		VolumeOptions: &mount.VolumeOptions{Labels: map[string]string{contract.LabelEgress: s.Session, contract.LabelSchema: contract.LabelsSchema}}}}
}

// egressHost is what a session's container with allowed hosts changes of its host config:
// loopback only, the agent's resolver on it, and ports below 1024 on it for the agent's relay
// (the agent has no CAP_NET_BIND_SERVICE; the sysctl is the container's own network
// namespace's).
func egressHost(s Spec, cfg *container.Config, hc *container.HostConfig) {
	if !s.Egress {
		return
	}
	cfg.Labels[contract.LabelAllowHosts] = "1"
	hc.NetworkMode = "none"
	hc.DNS = []string{egress.AnswerAddr}
	hc.DNSSearch = []string{"."}
	if hc.Sysctls == nil {
		hc.Sysctls = map[string]string{}
	}
	hc.Sysctls["net.ipv4.ip_unprivileged_port_start"] = "0"
	if hc.Tmpfs == nil {
		hc.Tmpfs = map[string]string{}
	}
	// the agent's trust bundle (the system's CAs and the session's egress CA), for the session
	// user to read
	hc.Tmpfs[contract.EgressTrustDir] = "rw,nosuid,nodev,noexec,size=1m,mode=0755"
	hc.Mounts = append(hc.Mounts, egressMounts(s)...)
}

// StartEgress starts the session's egress proxy, creating it from spec() when there is none
// (spec is only called then: it reads the secret values), and returns once it listens.
func (m *Manager) StartEgress(ctx context.Context, session string, spec func() (EgressSpec, error)) error {
	name := EgressName(session)
	r, err := m.api.ContainerInspect(ctx, name)
	switch {
	case err == nil && r.State != nil && r.State.Running:
		return nil
	case err == nil:
	case errdefs.IsNotFound(err):
		s, err := spec()
		if err != nil {
			return err
		}
		if s.Network == "" {
			if err := m.EnsureEgressNetwork(ctx); err != nil {
				return err
			}
		}
		cfg, hc := egressConfig(s)
		if _, err := m.api.ContainerCreate(ctx, cfg, hc, nil, nil, name); err != nil && !IsConflict(err) {
			return fmt.Errorf("create the egress proxy of session %q: %w", session, m.classify(err))
		}
	default:
		return fmt.Errorf("inspect the egress proxy of session %q: %w", session, m.classify(err))
	}
	if err := m.api.ContainerStart(ctx, name, container.StartOptions{}); err != nil {
		return fmt.Errorf("start the egress proxy of session %q: %w", session, m.classify(err))
	}
	return m.waitEgress(ctx, session)
}

// egressReadyTimeout bounds the wait for a proxy's ready line (it takes milliseconds on an idle
// machine; a loaded one may take seconds to start any container).
const egressReadyTimeout = 45 * time.Second

// waitEgress waits for the proxy's ready line in its log.
func (m *Manager) waitEgress(ctx context.Context, session string) error {
	return m.waitProxy(ctx, EgressName(session), "the egress proxy of session "+strconv.Quote(session))
}

// waitProxy waits for the ready line of this start of proxy container name (what, in errors).
func (m *Manager) waitProxy(ctx context.Context, name, what string) error {
	deadline := time.Now().Add(egressReadyTimeout)
	for {
		since := time.Time{}
		logs, err := m.proxyLogs(ctx, name, what, 1<<20)
		if err == nil && bytes.Contains(logs, []byte(egress.LogReady)) {
			// a ready line of this start: the container's StartedAt is not older than it
			if r, ierr := m.api.ContainerInspect(ctx, name); ierr == nil && r.State != nil {
				since, _ = time.Parse(time.RFC3339Nano, r.State.StartedAt)
				if readySince(logs, since) {
					return nil
				}
				if !r.State.Running && r.State.ExitCode != 0 {
					return fmt.Errorf("%s exited (%d): %s", what, r.State.ExitCode, lastLine(logs))
				}
			}
		}
		if time.Now().After(deadline) {
			logs, _ := m.proxyLogs(ctx, name, what, 1<<20)
			return fmt.Errorf("%s did not say it was ready within %s (its log ends %q); `docker logs %s` may say more", what, egressReadyTimeout, lastLine(logs), name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readySince reports whether logs hold a ready line written at or after since.
func readySince(logs []byte, since time.Time) bool {
	sc := bufio.NewScanner(bytes.NewReader(logs))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, egress.LogReady) {
			continue
		}
		var t time.Time
		if i := strings.Index(line, `"time":"`); i >= 0 {
			rest := line[i+8:]
			if j := strings.IndexByte(rest, '"'); j > 0 {
				t, _ = time.Parse(time.RFC3339Nano, rest[:j])
			}
		}
		if t.IsZero() || !t.Before(since.Add(-time.Second)) {
			return true
		}
	}
	return false
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// StopEgress stops the session's egress proxy; a missing one is stopped.
func (m *Manager) StopEgress(ctx context.Context, session string, timeout time.Duration) error {
	secs := int(timeout.Seconds())
	err := m.api.ContainerStop(ctx, EgressName(session), container.StopOptions{Timeout: &secs})
	if err = m.classify(err); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("stop the egress proxy of session %q: %w", session, err)
	}
	return nil
}

// AdoptEgress makes the proxy of a warm pool's member the proxy of the session that claimed it
// (a rename; its socket volume keeps the member's name, which the session's container mounts).
func (m *Manager) AdoptEgress(ctx context.Context, member, session string) error {
	if err := m.api.ContainerRename(ctx, EgressName(member), EgressName(session)); err != nil {
		return fmt.Errorf("hand the egress proxy of %q to session %q: %w", member, session, m.classify(err))
	}
	return nil
}

// RemoveEgress removes the session's egress proxy and its socket volume (after the session's
// container, which mounts it); missing ones are removed.
func (m *Manager) RemoveEgress(ctx context.Context, session string) error {
	name := EgressName(session)
	vol := name
	if r, err := m.api.ContainerInspect(ctx, name); err == nil {
		for _, mp := range r.Mounts {
			if mp.Destination == contract.EgressDir && mp.Name != "" {
				vol = mp.Name // a pool member's, for a session claimed from a pool
			}
		}
	}
	err := m.api.ContainerRemove(ctx, name, container.RemoveOptions{Force: true})
	if err = m.classify(err); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("remove the egress proxy of session %q: %w", session, err)
	}
	va, ok := m.api.(egressAPI)
	if !ok {
		return nil
	}
	err = va.VolumeRemove(ctx, vol, true)
	if err = m.classify(err); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("remove the egress volume of session %q: %w", session, err)
	}
	return nil
}

// EgressLogs returns the session's egress proxy's log (its refusals, one JSON line each), at
// most max bytes of it; ErrNotFound when the session has no proxy.
func (m *Manager) EgressLogs(ctx context.Context, session string, max int64) ([]byte, error) {
	return m.proxyLogs(ctx, EgressName(session), "the egress proxy of session "+strconv.Quote(session), max)
}

// proxyLogs returns at most max bytes of the log of proxy container name (what, in errors).
func (m *Manager) proxyLogs(ctx context.Context, name, what string, max int64) ([]byte, error) {
	rc, err := m.api.ContainerLogs(ctx, name, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	if err != nil {
		return nil, fmt.Errorf("logs of %s: %w", what, m.classify(err))
	}
	defer rc.Close()
	var buf bytes.Buffer
	w := &capWriter{w: &buf, left: max}
	if _, err := stdcopy.StdCopy(w, w, rc); err != nil && !errors.Is(err, errCapReached) {
		return buf.Bytes(), fmt.Errorf("logs of %s: %w", what, err)
	}
	return buf.Bytes(), nil
}
