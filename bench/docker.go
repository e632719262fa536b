package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
)

// LabelBench marks every container the benchmarks create; its value is the run's id.
const LabelBench = "io.runtimectl.bench"

// Docker is the raw Docker access of the baselines.
type Docker struct {
	cli *client.Client
	run string

	mu      sync.Mutex
	created map[string]bool
}

// DialDocker connects to the engine that DOCKER_HOST or the default socket names.
func DialDocker(runID string) (*Docker, error) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return &Docker{cli: cli, run: runID, created: map[string]bool{}}, nil
}

// Close closes the client.
func (d *Docker) Close() error { return d.cli.Close() }

// ContainerSpec is a bare container of a baseline.
type ContainerSpec struct {
	Image      string
	Entrypoint []string
	Cmd        []string
	Network    string // default "none"
	Memory     int64
	User       string
}

// Run creates and starts a labelled container and returns its id.
func (d *Docker) Run(ctx context.Context, s ContainerSpec) (string, error) {
	netMode := s.Network
	if netMode == "" {
		netMode = "none"
	}
	cfg := &container.Config{
		Image: s.Image, Entrypoint: s.Entrypoint, Cmd: s.Cmd, User: s.User,
		Labels: map[string]string{LabelBench: d.run},
	}
	hc := &container.HostConfig{NetworkMode: container.NetworkMode(netMode), Resources: container.Resources{Memory: s.Memory}}
	r, err := d.cli.ContainerCreate(ctx, cfg, hc, nil, nil, "")
	if err != nil {
		return "", fmt.Errorf("create %s container: %w", s.Image, err)
	}
	d.mu.Lock()
	d.created[r.ID] = true
	d.mu.Unlock()
	if err := d.cli.ContainerStart(ctx, r.ID, container.StartOptions{}); err != nil {
		return r.ID, fmt.Errorf("start %s container: %w", s.Image, err)
	}
	return r.ID, nil
}

// Remove removes a container and its anonymous volumes.
func (d *Docker) Remove(ctx context.Context, id string) error {
	err := d.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	d.mu.Lock()
	delete(d.created, id)
	d.mu.Unlock()
	return err
}

// RemoveAll removes every container this run created and has not removed yet.
func (d *Docker) RemoveAll(ctx context.Context) {
	d.mu.Lock()
	ids := make([]string, 0, len(d.created))
	for id := range d.created {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	for _, id := range ids {
		_ = d.Remove(ctx, id)
	}
}

// Sweep removes containers that an earlier run left behind (a run killed with SIGKILL):
// those labelled LabelBench and created more than age ago.
func (d *Docker) Sweep(ctx context.Context, age time.Duration) int {
	cs, err := d.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", LabelBench))})
	if err != nil {
		return 0
	}
	n := 0
	for _, c := range cs {
		if time.Since(time.Unix(c.Created, 0)) > age && c.Labels[LabelBench] != d.run {
			if d.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}) == nil {
				n++
			}
		}
	}
	return n
}

// ImageExists reports whether ref is in the local engine.
func (d *Docker) ImageExists(ctx context.Context, ref string) bool {
	_, err := d.cli.ImageInspect(ctx, ref)
	return err == nil
}

// ImageID returns the id of ref, or "".
func (d *Docker) ImageID(ctx context.Context, ref string) string {
	img, err := d.cli.ImageInspect(ctx, ref)
	if err != nil {
		return ""
	}
	return img.ID
}

// BuildImage builds dockerfile (the only file of the context) as ref.
func (d *Docker) BuildImage(ctx context.Context, ref, dockerfile string, progress io.Writer) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile))}); err != nil {
		return err
	}
	if _, err := tw.Write([]byte(dockerfile)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := d.cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{
		Tags: []string{ref}, Remove: true, ForceRemove: true, Version: build.BuilderV1,
		Labels: map[string]string{LabelBench: "image"},
	})
	if err != nil {
		return fmt.Errorf("build %s: %w", ref, err)
	}
	defer resp.Body.Close()
	if progress == nil {
		progress = io.Discard
	}
	if err := jsonmessage.DisplayJSONMessagesStream(resp.Body, progress, 0, false, nil); err != nil {
		return fmt.Errorf("build %s: %w", ref, err)
	}
	return nil
}

// MemoryUsage returns the memory charged to the container's cgroup, less its inactive file
// cache (what `docker stats` shows).
func (d *Docker) MemoryUsage(ctx context.Context, id string) (int64, error) {
	r, err := d.cli.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return 0, err
	}
	defer r.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(r.Body).Decode(&st); err != nil {
		return 0, err
	}
	if st.MemoryStats.Usage == 0 {
		return 0, errors.New("no memory statistics (is the container running?)")
	}
	u := int64(st.MemoryStats.Usage)
	for _, k := range []string{"total_inactive_file", "inactive_file"} {
		if v, ok := st.MemoryStats.Stats[k]; ok {
			if int64(v) < u {
				u -= int64(v)
			}
			break
		}
	}
	return u, nil
}

// ExecStream is a docker exec (no TTY) with its stdin and its demultiplexed stdout: the same
// kind of stream as runtimectl's relay.
type ExecStream struct {
	hj     types.HijackedResponse
	remain int
	hdr    [8]byte
	Stderr bytes.Buffer
}

// Exec starts cmd in the container and attaches to it.
func (d *Docker) Exec(ctx context.Context, id string, cmd []string, user string, stdin bool) (*ExecStream, error) {
	ex, err := d.cli.ContainerExecCreate(ctx, id, container.ExecOptions{
		Cmd: cmd, User: user, AttachStdin: stdin, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("exec %s: %w", strings.Join(cmd, " "), err)
	}
	hj, err := d.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("attach exec %s: %w", strings.Join(cmd, " "), err)
	}
	return &ExecStream{hj: hj}, nil
}

// Read returns stdout bytes; stderr payloads are kept in Stderr.
func (s *ExecStream) Read(p []byte) (int, error) {
	for s.remain == 0 {
		if _, err := io.ReadFull(s.hj.Reader, s.hdr[:]); err != nil {
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			return 0, err
		}
		n := int(binary.BigEndian.Uint32(s.hdr[4:8]))
		if s.hdr[0] == 1 {
			s.remain = n
			continue
		}
		if _, err := io.CopyN(&s.Stderr, s.hj.Reader, int64(n)); err != nil {
			return 0, err
		}
	}
	if len(p) > s.remain {
		p = p[:s.remain]
	}
	n, err := s.hj.Reader.Read(p)
	s.remain -= n
	if err == io.EOF && s.remain == 0 {
		err = nil
	}
	return n, err
}

// Write writes to the process's stdin.
func (s *ExecStream) Write(p []byte) (int, error) { return s.hj.Conn.Write(p) }

// CloseWrite closes the process's stdin.
func (s *ExecStream) CloseWrite() error { return s.hj.CloseWrite() }

// Close ends the stream.
func (s *ExecStream) Close() error {
	s.hj.Close()
	return nil
}
