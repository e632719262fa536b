package containers

import (
	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"

	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-units"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// API is the subset of the Docker client that this package uses.
type API interface {
	ContainerCreate(ctx context.Context, config *container.Config, hostConfig *container.HostConfig, networkingConfig *network.NetworkingConfig, platform *ocispec.Platform, containerName string) (container.CreateResponse, error)
	ContainerStart(ctx context.Context, containerID string, options container.StartOptions) error
	ContainerStop(ctx context.Context, containerID string, options container.StopOptions) error
	ContainerKill(ctx context.Context, containerID, signal string) error
	ContainerRemove(ctx context.Context, containerID string, options container.RemoveOptions) error
	ContainerInspect(ctx context.Context, containerID string) (container.InspectResponse, error)
	ContainerRename(ctx context.Context, containerID, newContainerName string) error
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerExecCreate(ctx context.Context, containerID string, options container.ExecOptions) (container.ExecCreateResponse, error)
	ContainerExecAttach(ctx context.Context, execID string, options container.ExecAttachOptions) (types.HijackedResponse, error)
	ContainerAttach(ctx context.Context, containerID string, options container.AttachOptions) (types.HijackedResponse, error)
	CopyToContainer(ctx context.Context, containerID, dstPath string, content io.Reader, options container.CopyToContainerOptions) error
	CopyFromContainer(ctx context.Context, containerID, srcPath string) (io.ReadCloser, container.PathStat, error)
	ContainerStatPath(ctx context.Context, containerID, path string) (container.PathStat, error)
	ContainerLogs(ctx context.Context, containerID string, options container.LogsOptions) (io.ReadCloser, error)
	ContainerStats(ctx context.Context, containerID string, stream bool) (container.StatsResponseReader, error)
	ContainerWait(ctx context.Context, containerID string, condition container.WaitCondition) (<-chan container.WaitResponse, <-chan error)
	NetworkInspect(ctx context.Context, networkID string, options network.InspectOptions) (network.Inspect, error)
	NetworkCreate(ctx context.Context, name string, options network.CreateOptions) (network.CreateResponse, error)
	DaemonHost() string
}

// Spec is what a session container is made from (engine.Spec).
type Spec = engine.Spec

// Defaults for a session container.
const (
	DefaultMemory = engine.DefaultMemory
	// DefaultCPUs caps a session at one CPU, so that code spinning in a few sessions cannot
	// starve the others or the host; DefaultCPUShares is its weight when CPUs are contended
	// (half a default container's 1024), for the same reason.
	DefaultCPUs      = engine.DefaultCPUs
	DefaultCPUShares = 512
	DefaultPids      = engine.DefaultPids
	DefaultNetwork   = engine.DefaultNetwork
	DefaultTmpSize   = engine.DefaultTmpSize
	// FileSizeLimit caps a single file the session writes (RLIMIT_FSIZE).
	FileSizeLimit = 16 << 30
	// OpenFilesLimit caps the open files of each process of the session (RLIMIT_NOFILE).
	OpenFilesLimit = 4096
	// ProcessLimit is RLIMIT_NPROC, set so that no engine adds its own: Podman raises nproc and
	// nofile to 1048576 when they are not given, which fails ("error setting rlimit type 6")
	// where root lacks CAP_SYS_RESOURCE. The kernel counts it per user id across the whole
	// host (uid 1000 of every session on a rootful engine, whatever their containers), so it is
	// a host-wide backstop far above the pids limit, which stays the per-session one (the agent
	// watches that cgroup limit to end fork bombs). It must not exceed the engine's own hard
	// limit, which an engine without CAP_SYS_RESOURCE cannot raise: 8192 is under the kernel's
	// default (threads-max / 2) on any machine with 2 GiB of memory or more.
	ProcessLimit = 8192
)

// Info is what runtimectl knows of a session container (engine.Info).
type Info = engine.Info

// Manager creates and drives session containers.
type Manager struct {
	api API
}

// New returns a Manager over api (a *client.Client, wrapped by Wrap).
func New(api API) *Manager { return &Manager{api: api} }

// classify maps an error of the engine to the project's errors, naming the engine this Manager
// talks to (--host, DOCKER_HOST or the default socket).
func (m *Manager) classify(err error) error { return classifyHost(err, m.api.DaemonHost()) }

// Name returns the container name of a session.
func Name(session string) string { return contract.NamePrefix + session }

// Config builds the container's configuration: the hardening lives here, in one place. Create
// uses it; so does tcsession, which hands it to testcontainers-go.
func Config(s Spec) (*container.Config, *container.HostConfig) {
	env := append([]string{
		contract.SettingsEnv + "=" + s.Settings,
		"PAGER=cat", "GIT_TERMINAL_PROMPT=0", "DEBIAN_FRONTEND=noninteractive",
	}, s.Env...)
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	labels[contract.LabelSession], labels[contract.LabelLang], labels[contract.LabelSchema] = s.Session, s.Lang, contract.LabelsSchema
	cfg := &container.Config{
		Image:      s.Image,
		Env:        env,
		Labels:     labels,
		WorkingDir: "/workspace",
		User:       "0:0", // the agent; it starts the kernel as uid 1000
		// The agent's stdin and stdout carry nothing: clients use the exec relay.
		AttachStdin: false, AttachStdout: false, AttachStderr: false, Tty: false, OpenStdin: false,
	}
	memory := s.Memory
	if memory <= 0 {
		memory = DefaultMemory
	}
	cpus := s.CPUs
	if cpus <= 0 {
		cpus = DefaultCPUs
	}
	pids := s.Pids
	if pids <= 0 {
		pids = DefaultPids
	}
	netMode := networkMode(s.Network)
	tmp := s.TmpSize
	if tmp <= 0 {
		tmp = DefaultTmpSize
	}
	init := true
	hc := &container.HostConfig{
		Init:        &init,
		NetworkMode: container.NetworkMode(netMode),
		// Only what the agent needs: switch to the session user, and signal its processes.
		CapDrop:        []string{"ALL"},
		CapAdd:         []string{"SETUID", "SETGID", "KILL"},
		SecurityOpt:    []string{"no-new-privileges"},
		ReadonlyRootfs: true,
		Tmpfs: map[string]string{
			"/tmp":            fmt.Sprintf("rw,nosuid,nodev,size=%d,mode=1777", tmp),
			"/run/runtimectl": "rw,nosuid,nodev,noexec,size=1m,mode=0700",
		},
		Mounts: mounts(s),
		LogConfig: container.LogConfig{
			Type:   "json-file",
			Config: map[string]string{"max-size": "1m", "max-file": "2"},
		},
		Runtime: s.Runtime,
		Resources: container.Resources{
			Memory:     memory,
			MemorySwap: memory,
			PidsLimit:  &pids,
			NanoCPUs:   int64(cpus * 1e9),
			CPUShares:  DefaultCPUShares,
			Ulimits: []*units.Ulimit{
				{Name: "fsize", Soft: FileSizeLimit, Hard: FileSizeLimit},
				{Name: "nofile", Soft: OpenFilesLimit, Hard: OpenFilesLimit},
				{Name: "nproc", Soft: ProcessLimit, Hard: ProcessLimit},
				{Name: "core", Soft: 0, Hard: 0},
			},
		},
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
	}
	egressHost(s, cfg, hc)
	return cfg, hc
}

func mounts(s Spec) []mount.Mount {
	m := []mount.Mount{{Type: mount.TypeVolume, Source: s.Volume, Target: contract.Workspace}}
	if s.StateVolume != "" {
		m = append(m, mount.Mount{Type: mount.TypeVolume, Source: s.StateVolume, Target: contract.StateDir})
	}
	return m
}

// stateMounted says whether a container's mounts include the state volume.
func stateMounted(ms []container.MountPoint) bool {
	for _, m := range ms {
		if m.Destination == contract.StateDir {
			return true
		}
	}
	return false
}

// Create creates the container, or returns the existing one of that name (create is
// idempotent: a conflict means inspect and reuse).
func (m *Manager) Create(ctx context.Context, s Spec) (Info, error) {
	info, _, err := m.CreateIfAbsent(ctx, s)
	return info, err
}

// CreateIfAbsent is Create, and says whether this call made the container: of two processes
// that create the same session at once, the engine lets exactly one do it.
func (m *Manager) CreateIfAbsent(ctx context.Context, s Spec) (Info, bool, error) {
	if err := m.EnsureNetwork(ctx, s.Network); err != nil {
		return Info{}, false, err
	}
	cfg, hc := Config(s)
	_, err := m.api.ContainerCreate(ctx, cfg, hc, nil, nil, Name(s.Session))
	created := err == nil
	if err != nil && !IsConflict(err) {
		if s.Runtime != "" && strings.Contains(strings.ToLower(err.Error()), "runtime") {
			return Info{}, false, fmt.Errorf("create container for session %q: the Docker engine has no runtime %q (%w); `docker info` lists the runtimes it has (gVisor's runsc must be installed and registered with the engine first)", s.Session, s.Runtime, m.classify(err))
		}
		if strings.Contains(err.Error(), "container-init binary not found") {
			return Info{}, false, fmt.Errorf("create container for session %q: %w; Podman's init binary is missing: install the catatonit package (apt-get install catatonit)", s.Session, m.classify(err))
		}
		return Info{}, false, fmt.Errorf("create container for session %q: %w", s.Session, m.classify(err))
	}
	info, err := m.Inspect(ctx, s.Session)
	// The engine reserves the name before the container exists: another process's create may
	// still be on its way.
	for i := 0; !created && errors.Is(err, ErrNotFound) && i < 50; i++ {
		select {
		case <-ctx.Done():
			return Info{}, false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		info, err = m.Inspect(ctx, s.Session)
	}
	if !created && errors.Is(err, ErrNotFound) {
		return Info{}, false, fmt.Errorf("create container for session %q: %w", s.Session, ErrBeingCreated)
	}
	return info, created, err
}

// CreateStarts is false: a container is made stopped, and files can be copied into it before
// its agent starts (see engine.Runtimes).
func (m *Manager) CreateStarts() bool { return false }

// StopRemoves is false: a stopped container stays (see engine.Runtimes).
func (m *Manager) StopRemoves() bool { return false }

// Start starts the container; starting a running one is a no-op.
func (m *Manager) Start(ctx context.Context, session string) error {
	if err := m.api.ContainerStart(ctx, Name(session), container.StartOptions{}); err != nil {
		if strings.Contains(err.Error(), "container-init binary not found") {
			return fmt.Errorf("start container of session %q: %w; Podman's init binary is missing: install the catatonit package (apt-get install catatonit)", session, m.classify(err))
		}
		cerr := m.classify(err)
		if IsNetworkGone(err) {
			cerr = engine.Also(cerr, engine.ErrNetworkGone)
		}
		return fmt.Errorf("start container of session %q: %w", session, cerr)
	}
	return nil
}

// Stop stops the container, giving the agent timeout to finish (SIGTERM, then SIGKILL).
// A missing container is already stopped.
func (m *Manager) Stop(ctx context.Context, session string, timeout time.Duration) error {
	secs := int(timeout.Seconds())
	err := m.api.ContainerStop(ctx, Name(session), container.StopOptions{Timeout: &secs})
	if err = m.classify(err); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("stop container of session %q: %w", session, err)
	}
	return nil
}

// Kill sends SIGKILL to the container.
func (m *Manager) Kill(ctx context.Context, session string) error {
	if err := m.api.ContainerKill(ctx, Name(session), "KILL"); err != nil {
		return fmt.Errorf("kill container of session %q: %w", session, m.classify(err))
	}
	return nil
}

// Remove removes the container (force: even a running one). A missing container is removed.
func (m *Manager) Remove(ctx context.Context, session string, force bool) error {
	err := m.api.ContainerRemove(ctx, Name(session), container.RemoveOptions{Force: force})
	if err = m.classify(err); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("remove container of session %q: %w", session, err)
	}
	return nil
}

// Inspect returns the session's container; ErrNotFound when there is none.
func (m *Manager) Inspect(ctx context.Context, session string) (Info, error) {
	r, err := m.api.ContainerInspect(ctx, Name(session))
	if err != nil {
		return Info{}, m.classify(err)
	}
	return fromInspect(r), nil
}

// Raw returns Docker's inspect document of the session's container, for tests and `doctor`.
func (m *Manager) Raw(ctx context.Context, session string) (container.InspectResponse, error) {
	r, err := m.api.ContainerInspect(ctx, Name(session))
	return r, m.classify(err)
}

func fromInspect(r container.InspectResponse) Info {
	info := Info{ID: r.ID, Name: trimSlash(r.Name), StateMounted: stateMounted(r.Mounts)}
	if r.Config != nil {
		info.Labels = r.Config.Labels
		info.Session = sessionOf(info.Name, r.Config.Labels)
		info.Lang = r.Config.Labels[contract.LabelLang]
		info.Image = r.Config.Image
	}
	if r.State != nil {
		info.State = engine.State(r.State.Status)
		info.Running = r.State.Running
		info.OOMKilled = r.State.OOMKilled
		info.ExitCode = r.State.ExitCode
		info.StartedAt, _ = time.Parse(time.RFC3339Nano, r.State.StartedAt)
	}
	info.Created, _ = time.Parse(time.RFC3339Nano, r.Created)
	return info
}

// sessionOf is the session a container is: its name less contract.NamePrefix, which a warm pool's claim
// changes (Rename), for a container named so; else its session label (one named by another
// tool, testcontainers-go's say).
func sessionOf(name string, labels map[string]string) string {
	if s, ok := strings.CutPrefix(name, contract.NamePrefix); ok && s != "" {
		return s
	}
	return labels[contract.LabelSession]
}

// Rename renames the session's container to be session to's, atomically: of two renames of one
// container, one fails (ErrNotFound: it is not there under its old name any more), and so does
// a rename to a name taken (ErrConflict). What warm pools claim their members with.
func (m *Manager) Rename(ctx context.Context, from, to string) error {
	err := m.api.ContainerRename(ctx, Name(from), Name(to))
	if err == nil {
		return nil
	}
	if IsConflict(err) {
		return fmt.Errorf("%w: %v", ErrConflict, err)
	}
	return m.classify(err)
}

func trimSlash(s string) string {
	if len(s) > 0 && s[0] == '/' {
		return s[1:]
	}
	return s
}

// List returns every container labelled as a runtimectl session, running or not.
func (m *Manager) List(ctx context.Context) ([]Info, error) {
	cs, err := m.api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", contract.LabelSession))})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", m.classify(err))
	}
	out := make([]Info, 0, len(cs))
	for _, c := range cs {
		name := ""
		if len(c.Names) > 0 {
			name = trimSlash(c.Names[0])
		}
		out = append(out, Info{
			ID: c.ID, Name: name, Session: sessionOf(name, c.Labels), Lang: c.Labels[contract.LabelLang], Image: c.Image,
			State: engine.State(c.State), Running: c.State == "running", Created: time.Unix(c.Created, 0), Labels: c.Labels,
			StateMounted: stateMounted(c.Mounts),
		})
	}
	return out, nil
}
