package containers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-units"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
)

// Measurement is what `runtime-agent du` printed for one path.
type Measurement struct {
	Path    string `json:"path"`
	Bytes   int64  `json:"bytes"`
	Entries int64  `json:"entries"`
	Skipped int64  `json:"skipped"`
	Depth   int    `json:"depth"`
	Error   string `json:"error,omitempty"`
}

// Measure measures volumes (their bytes on disk) in a short-lived helper container of image
// (an image with runtimectl's agent): `runtime-agent du` walks each with folder descriptors, so
// a folder thousands of levels deep is measured where the engine's own volume sizes give up. The
// helper mounts the volumes read-only, has no network, and only the capability to read what it
// measures. It returns one size per volume, -1 for one it could not measure.
func (m *Manager) Measure(ctx context.Context, image string, vols []string) ([]int64, error) {
	cmd := []string{contract.AgentBinary, contract.AgentDu}
	var ms []mount.Mount
	for i, v := range vols {
		p := "/measure/" + strconv.Itoa(i)
		ms = append(ms, mount.Mount{Type: mount.TypeVolume, Source: v, Target: p, ReadOnly: true})
		cmd = append(cmd, p)
	}
	pids := int64(16)
	cfg := &container.Config{Image: image, Entrypoint: cmd, User: "0:0", NetworkDisabled: true,
		Labels: map[string]string{contract.LabelHelper: "measure"}}
	hc := &container.HostConfig{
		NetworkMode: "none", CapDrop: []string{"ALL"}, CapAdd: []string{"DAC_READ_SEARCH"},
		SecurityOpt: []string{"no-new-privileges"}, ReadonlyRootfs: true, Mounts: ms,
		Resources: container.Resources{Memory: 256 << 20, MemorySwap: 256 << 20, PidsLimit: &pids, NanoCPUs: 1e9,
			Ulimits: []*units.Ulimit{{Name: "nofile", Soft: OpenFilesLimit, Hard: OpenFilesLimit}}},
	}
	var out bytes.Buffer
	if code, err := m.RunHelper(ctx, cfg, hc, &out, io.Discard); err != nil {
		return nil, fmt.Errorf("measure volumes: %w", err)
	} else if code != 0 && out.Len() == 0 {
		return nil, fmt.Errorf("measure volumes: the helper exited with code %d", code)
	}
	sizes := make([]int64, len(vols))
	for i := range sizes {
		sizes[i] = -1
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r Measurement
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.Error != "" {
			continue
		}
		n, ok := strings.CutPrefix(r.Path, "/measure/")
		if i, err := strconv.Atoi(n); ok && err == nil && i >= 0 && i < len(sizes) {
			sizes[i] = r.Bytes
		}
	}
	return sizes, nil
}

// RunHelper runs a short-lived helper container (cfg, hc) to its end, streaming its stdout and
// stderr to the writers as it runs, and removes it; it returns the helper's exit code. The
// helper removes itself when it ends (AutoRemove), even when this process is gone by then; its
// output is attached before it starts, so that nothing of a quick one is lost.
func (m *Manager) RunHelper(ctx context.Context, cfg *container.Config, hc *container.HostConfig, stdout, stderr io.Writer) (int, error) {
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	if _, ok := cfg.Labels[contract.LabelHelper]; !ok {
		cfg.Labels[contract.LabelHelper] = "1"
	}
	hc.AutoRemove = true
	created, err := m.api.ContainerCreate(ctx, cfg, hc, nil, nil, "")
	if err != nil {
		return -1, m.classify(err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = m.api.ContainerRemove(rctx, created.ID, container.RemoveOptions{Force: true})
	}()
	att, err := m.api.ContainerAttach(ctx, created.ID, container.AttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return -1, m.classify(err)
	}
	defer att.Close()
	waitC, errC := m.api.ContainerWait(ctx, created.ID, container.WaitConditionRemoved)
	if err := m.api.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return -1, m.classify(err)
	}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, att.Reader)
		copied <- err
	}()
	var code int
	select {
	case w := <-waitC:
		code = int(w.StatusCode)
		if w.Error != nil && w.Error.Message != "" {
			return -1, errors.New(w.Error.Message)
		}
	case err := <-errC:
		return -1, m.classify(err)
	case <-ctx.Done():
		return -1, ctx.Err()
	}
	select {
	case <-copied: // the attached stream ends with the container
	case <-time.After(10 * time.Second):
	}
	return code, nil
}

// Installer is a short-lived container that installs packages into a session's workspace:
// the session's image and runtime, run as the session user with the workspace volume mounted;
// with Egress, it has loopback only and reaches its own egress proxy, which allows the index's
// hosts and nothing else (installegress.go); without, it runs on runtimectl's own bridge (its
// containers cannot reach one another, so the installer reaches no session, but it reaches
// the outside); a read-only root with a 1 GiB /tmp, its working folder
// /tmp. It kills itself at its deadline and removes itself when it ends; it carries no
// session's label (`session ls` never shows it), only contract.LabelHelper and contract.LabelHelperFor, and
// `session gc` and `session rm` remove it.
type Installer struct {
	Image   string
	Volume  string   // the session's workspace volume, mounted at /workspace
	Argv    []string // the command
	Env     []string
	For     string // the session it installs into (LabelHelperFor)
	Runtime string // the session's OCI runtime (runsc...); "" the engine's default
	// Deadline is when the installer kills itself (zero: 15 minutes from now).
	Deadline time.Time
	// Egress is the installer's own egress proxy (nil: runtimectl's bridge, the outside).
	Egress *EgressSpec
}

// InstallTimeout is an installer's deadline when the caller sets none (engine.InstallTimeout).
const InstallTimeout = engine.InstallTimeout

// RunInstaller runs it to its end, streaming its output to out, and returns its exit code.
func (m *Manager) RunInstaller(ctx context.Context, in Installer, out io.Writer) (int, error) {
	pids := int64(256)
	const memory = 1 << 30
	deadline := in.Deadline
	if deadline.IsZero() {
		deadline = time.Now().Add(InstallTimeout)
	}
	secs := int(math.Ceil(time.Until(deadline).Seconds()))
	if secs < 1 {
		return -1, fmt.Errorf("install: %w before the installer started", context.DeadlineExceeded)
	}
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(15*time.Second))
	defer cancel()
	labels := map[string]string{contract.LabelHelper: "install", contract.LabelHelperFor: in.For, contract.LabelDeadline: strconv.FormatInt(deadline.Unix(), 10)}
	argv := []string{"timeout", "-s", "KILL", strconv.Itoa(secs)}
	hc := &container.HostConfig{
		NetworkMode: BridgeNetwork, Runtime: in.Runtime,
		CapDrop: []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"}, ReadonlyRootfs: true,
		Tmpfs:  map[string]string{"/tmp": "rw,nosuid,nodev,size=1g,mode=1777"},
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: in.Volume, Target: contract.Workspace}},
		Resources: container.Resources{Memory: memory, MemorySwap: memory, PidsLimit: &pids, NanoCPUs: 2e9,
			Ulimits: []*units.Ulimit{{Name: "nofile", Soft: OpenFilesLimit, Hard: OpenFilesLimit}}},
	}
	if in.Egress != nil {
		proxy, remove, err := m.startInstallEgress(ctx, in, deadline, labels)
		if err != nil {
			return -1, err
		}
		defer remove() // after RunHelper removed the installer, which mounts its volume
		argv = append(argv, installerEgress(hc, proxy, in.Egress.Config.Allow)...)
	} else if err := m.EnsureNetwork(ctx, "bridge"); err != nil {
		return -1, err
	}
	cfg := &container.Config{Image: in.Image, User: "1000:1000", WorkingDir: "/tmp", Entrypoint: append(argv, in.Argv...), Env: in.Env, Labels: labels}
	return m.RunHelper(ctx, cfg, hc, out, out)
}

// Helpers lists the helper containers (installers, measures) with their labels; for is the
// session they work for ("" any).
func (m *Manager) Helpers(ctx context.Context, forSession string) ([]Info, error) {
	f := filters.NewArgs(filters.Arg("label", contract.LabelHelper))
	if forSession != "" {
		f.Add("label", contract.LabelHelperFor+"="+forSession)
	}
	cs, err := m.api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("list helper containers: %w", m.classify(err))
	}
	out := make([]Info, 0, len(cs))
	for _, c := range cs {
		out = append(out, Info{ID: c.ID, State: engine.State(c.State), Running: c.State == "running", Created: time.Unix(c.Created, 0), Labels: c.Labels})
	}
	vols, err := m.helperVolumes(ctx, forSession)
	if err != nil {
		return nil, err
	}
	return append(out, vols...), nil
}

// RemoveHelper removes a helper container by its ID, running or not, and the installer proxy's
// socket volume it mounts once no other container does; or a leftover helper volume (an ID
// that Helpers gave).
func (m *Manager) RemoveHelper(ctx context.Context, id string) error {
	if name, ok := strings.CutPrefix(id, helperVolumeID); ok {
		va, ok := m.api.(volumeAPI)
		if !ok {
			return nil
		}
		err := va.VolumeRemove(ctx, name, false)
		if err != nil && errdefs.IsConflict(err) {
			return nil // in use again: the removal of the container that mounts it removes it
		}
		if err := m.classify(err); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("remove helper volume %s: %w", name, err)
		}
		return nil
	}
	var vols []string
	if r, err := m.api.ContainerInspect(ctx, id); err == nil {
		for _, mp := range r.Mounts {
			if mp.Destination == contract.EgressDir && strings.HasPrefix(mp.Name, installEgressPrefix) {
				vols = append(vols, mp.Name)
			}
		}
	}
	err := m.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	if err != nil && !errdefs.IsNotFound(err) && !removing(err) {
		return fmt.Errorf("remove helper container %s: %w", id[:min(12, len(id))], m.classify(err))
	}
	for _, v := range vols {
		m.removeHelperVolume(ctx, v)
	}
	return nil
}

// removing reports the engine's answer to the removal of a container that is being removed
// already (a helper that ended and removes itself).
func removing(err error) bool {
	return errdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress")
}

// HumanSize spells a size as the CLI and messages do ("2GiB").
func HumanSize(b int64) string { return units.BytesSize(float64(b)) }
