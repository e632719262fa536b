package containers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-units"

	"github.com/runtimectl/runtimectl/contract"
)

// LabelHelper marks a short-lived helper container (never a session's).
const LabelHelper = "io.runtimectl.helper"

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
		Labels: map[string]string{LabelHelper: "measure"}}
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
// stderr to the writers as it runs, and removes it; it returns the helper's exit code.
func (m *Manager) RunHelper(ctx context.Context, cfg *container.Config, hc *container.HostConfig, stdout, stderr io.Writer) (int, error) {
	if cfg.Labels == nil {
		cfg.Labels = map[string]string{}
	}
	if _, ok := cfg.Labels[LabelHelper]; !ok {
		cfg.Labels[LabelHelper] = "1"
	}
	created, err := m.api.ContainerCreate(ctx, cfg, hc, nil, nil, "")
	if err != nil {
		return -1, m.classify(err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = m.api.ContainerRemove(rctx, created.ID, container.RemoveOptions{Force: true})
	}()
	waitC, errC := m.api.ContainerWait(ctx, created.ID, container.WaitConditionNextExit)
	if err := m.api.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return -1, m.classify(err)
	}
	rc, err := m.api.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
	if err != nil {
		return -1, m.classify(err)
	}
	copied := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, rc)
		copied <- err
	}()
	var code int
	select {
	case w := <-waitC:
		code = int(w.StatusCode)
		if w.Error != nil && w.Error.Message != "" {
			rc.Close()
			return -1, errors.New(w.Error.Message)
		}
	case err := <-errC:
		rc.Close()
		return -1, m.classify(err)
	case <-ctx.Done():
		rc.Close()
		return -1, ctx.Err()
	}
	select {
	case <-copied: // the log stream ends with the container
	case <-time.After(10 * time.Second):
	}
	rc.Close()
	return code, nil
}

// Installer is a short-lived container that installs packages into a session's workspace:
// the session's image, run as the session user with network access (the engine's default
// bridge) and the workspace volume mounted, a read-only root with a 1 GiB /tmp.
type Installer struct {
	Image  string
	Volume string   // the session's workspace volume, mounted at /workspace
	Argv   []string // the command
	Env    []string
	Labels map[string]string
}

// RunInstaller runs it to its end, streaming its output to out, and returns its exit code.
func (m *Manager) RunInstaller(ctx context.Context, in Installer, out io.Writer) (int, error) {
	pids := int64(256)
	const memory = 1 << 30
	labels := map[string]string{LabelHelper: "install"}
	for k, v := range in.Labels {
		labels[k] = v
	}
	cfg := &container.Config{Image: in.Image, User: "1000:1000", WorkingDir: contract.Workspace, Entrypoint: in.Argv, Env: in.Env, Labels: labels}
	hc := &container.HostConfig{
		NetworkMode: "bridge", // the engine's default network: the index is outside
		CapDrop:     []string{"ALL"}, SecurityOpt: []string{"no-new-privileges"}, ReadonlyRootfs: true,
		Tmpfs:  map[string]string{"/tmp": "rw,nosuid,nodev,size=1g,mode=1777"},
		Mounts: []mount.Mount{{Type: mount.TypeVolume, Source: in.Volume, Target: contract.Workspace}},
		Resources: container.Resources{Memory: memory, MemorySwap: memory, PidsLimit: &pids, NanoCPUs: 2e9,
			Ulimits: []*units.Ulimit{{Name: "nofile", Soft: OpenFilesLimit, Hard: OpenFilesLimit}}},
	}
	return m.RunHelper(ctx, cfg, hc, out, out)
}

// HumanSize spells a size as the CLI and messages do ("2GiB").
func HumanSize(b int64) string { return units.BytesSize(float64(b)) }
