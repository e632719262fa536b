package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtimectl/runtimectl/backend"
	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/session"
	"github.com/runtimectl/runtimectl/volumes"
)

// Session returns the Backend as the session library's seam: session.NewWithBackend(b.Session())
// runs the same sessions (agent, protocol, snapshots, history, every verb) on the cluster.
func (b *Backend) Session() session.Backend {
	return session.Backend{Name: backend.Kubernetes, Runtimes: (*sessionRuntimes)(b), Storage: (*sessionStorage)(b), Pools: (*pools)(b), Egress: (*sessionEgress)(b), Closer: b}
}

// seamError is a backend error as session tests for it: errors.Is finds both the backend's
// error and the Docker packages' one that session checks (not found, unreachable, in use).
type seamError struct{ err error }

func (e *seamError) Error() string { return e.err.Error() }
func (e *seamError) Unwrap() error { return e.err }
func (e *seamError) Is(target error) bool {
	switch target {
	case containers.ErrNotFound, volumes.ErrNotFound:
		return errors.Is(e.err, backend.ErrNotFound)
	case containers.ErrUnreachable:
		return errors.Is(e.err, backend.ErrUnreachable)
	case volumes.ErrInUse:
		return errors.Is(e.err, backend.ErrInUse)
	}
	return false
}

func seam(err error) error {
	if err == nil {
		return nil
	}
	return &seamError{err}
}

// sessionRuntimes is the Backend as session.Runtimes: a session's runtime is its pod.
type sessionRuntimes Backend

func (r *sessionRuntimes) b() *Backend { return (*Backend)(r) }

func toInfo(i backend.Info) containers.Info {
	return containers.Info{
		ID: i.ID, Name: i.Name, Session: i.Session, Lang: i.Lang, Image: i.Image, State: i.State, Running: i.Running,
		OOMKilled: i.OOMKilled, ExitCode: i.ExitCode, Created: i.Created, StartedAt: i.StartedAt, Labels: i.Labels,
		StateMounted: true, // every pod mounts the state claim
	}
}

func toSpec(s containers.Spec) backend.Spec {
	if s.TmpSize <= 0 && s.Memory > 0 {
		// /tmp is memory on both engines; a pod must keep it below its limit, so a small
		// session gets half its memory for it rather than Docker's 512 MiB.
		s.TmpSize = min(int64(containers.DefaultTmpSize), s.Memory/2)
	}
	return backend.Spec{Session: s.Session, Lang: s.Lang, Image: s.Image, Memory: s.Memory, CPUs: s.CPUs, Pids: s.Pids,
		Network: s.Network, Env: s.Env, Settings: s.Settings, Runtime: s.Runtime, TmpSize: s.TmpSize, Labels: s.Labels}
}

func (r *sessionRuntimes) Create(ctx context.Context, s containers.Spec) (containers.Info, error) {
	i, err := r.b().Create(ctx, toSpec(s))
	return toInfo(i), seam(err)
}

// CreateIfAbsent creates the pod unless the session has one; the API server is the arbiter
// (a create of an existing name fails), so two starts never both think they made it.
func (r *sessionRuntimes) CreateIfAbsent(ctx context.Context, s containers.Spec) (containers.Info, bool, error) {
	if i, err := r.b().Inspect(ctx, s.Session); err == nil {
		return toInfo(i), false, nil
	} else if !errors.Is(err, backend.ErrNotFound) {
		return containers.Info{}, false, seam(err)
	}
	i, err := r.b().Create(ctx, toSpec(s))
	return toInfo(i), err == nil, seam(err)
}

func (r *sessionRuntimes) Start(ctx context.Context, name string) error {
	return seam(r.b().Start(ctx, name))
}

func (r *sessionRuntimes) Stop(ctx context.Context, name string, timeout time.Duration) error {
	return seam(r.b().Stop(ctx, name, timeout))
}

func (r *sessionRuntimes) Remove(ctx context.Context, name string, force bool) error {
	return seam(r.b().Remove(ctx, name, force))
}

func (r *sessionRuntimes) Inspect(ctx context.Context, name string) (containers.Info, error) {
	i, err := r.b().Inspect(ctx, name)
	return toInfo(i), seam(err)
}

func (r *sessionRuntimes) List(ctx context.Context) ([]containers.Info, error) {
	l, err := r.b().List(ctx)
	out := make([]containers.Info, 0, len(l))
	for _, i := range l {
		out = append(out, toInfo(i))
	}
	return out, seam(err)
}

func (r *sessionRuntimes) Dial(ctx context.Context, name string) (io.ReadWriteCloser, error) {
	s, err := r.b().Dial(ctx, name)
	return s, seam(err)
}

func (r *sessionRuntimes) CopyTo(ctx context.Context, name, dir string, content io.Reader) error {
	return seam(r.b().CopyTo(ctx, name, dir, content))
}

func (r *sessionRuntimes) CopyFrom(ctx context.Context, name, path string) (io.ReadCloser, error) {
	rc, err := r.b().CopyFrom(ctx, name, path)
	return rc, seam(err)
}

func (r *sessionRuntimes) Stat(ctx context.Context, name, path string) (containers.PathInfo, error) {
	p, err := r.b().Stat(ctx, name, path)
	return containers.PathInfo{Exists: p.Exists, IsDir: p.IsDir, Size: p.Size}, seam(err)
}

func (r *sessionRuntimes) Host() string { return r.b().Host() }

// Engine is the API server's version, as `runtimectl version` and `doctor` show an engine.
func (r *sessionRuntimes) Engine(ctx context.Context) (containers.Engine, error) {
	v, err := r.b().Ping(ctx)
	if err != nil {
		return containers.Engine{}, seam(err)
	}
	return containers.Engine{Name: "Kubernetes", Host: r.b().Host(), Version: v, APIVersion: v}, nil
}

// Logs returns the agent container's log.
func (r *sessionRuntimes) Logs(ctx context.Context, name string, max int64) ([]byte, error) {
	b := r.b()
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	pod, err := b.get(ctx, name)
	if err != nil {
		return nil, seam(fmt.Errorf("logs of session %q: %w", name, err))
	}
	out, err := b.cs.CoreV1().Pods(b.ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: ContainerName, LimitBytes: &max}).DoRaw(cctx)
	if err != nil {
		return nil, seam(fmt.Errorf("logs of session %q: %w", name, b.classify(err)))
	}
	return out, nil
}

// Stats is not offered: the cluster's metrics API (metrics-server) is not assumed.
func (r *sessionRuntimes) Stats(context.Context, string) (containers.Stats, error) {
	return containers.Stats{}, errors.New("stats are not read on Kubernetes (runtimectl does not use the metrics API): use `kubectl top pod`")
}

// CreateStarts is true: a pod starts when it is made, and files go in through its running
// container.
func (r *sessionRuntimes) CreateStarts() bool { return true }

// StopRemoves is true: stop deletes the pod and keeps the claims.
func (r *sessionRuntimes) StopRemoves() bool { return true }

// EnsureNetwork has nothing to make: a NetworkPolicy per session (Create) isolates it.
func (r *sessionRuntimes) EnsureNetwork(context.Context, string) error { return nil }

// Measure is not offered: the API says what a claim may hold, not what it holds.
func (r *sessionRuntimes) Measure(context.Context, string, []string) ([]int64, error) {
	return nil, errors.New("volume sizes are not measured on Kubernetes")
}

// sessionStorage is the Backend as session.Storage: a session's volumes are its two claims.
type sessionStorage Backend

func (s *sessionStorage) v() *Volumes { return (*Volumes)(s) }

func toVolume(v backend.Volume) volumes.Volume {
	return volumes.Volume{Name: v.Name, State: v.Name + "-state", Session: v.Session, Lang: v.Lang, Settings: v.Settings, Created: v.Created, Size: v.Size}
}

// Create makes the session's claims; Docker's volume options (driver options, labels) do not
// apply: the claims' storage class and sizes are the Backend's Options.
// The workspace claim asks for the session's disk cap (--disk) when it names one, so that the
// storage enforces it where the provisioner does.
func (s *sessionStorage) Create(ctx context.Context, name, lang, settings string, _ ...volumes.CreateOption) (volumes.Volume, error) {
	b := *(*Backend)(s)
	if st, err := contract.DecodeSettings(settings); err == nil && st.Disk > 0 {
		b.opts.WorkspaceSize = strconv.FormatInt(st.Disk, 10)
	}
	v, err := (*Volumes)(&b).Create(ctx, name, lang, settings)
	return toVolume(v), seam(err)
}

// EnsureState has nothing to do: the state claim is made with the workspace's.
func (s *sessionStorage) EnsureState(context.Context, string) (bool, error) { return false, nil }

func (s *sessionStorage) Inspect(ctx context.Context, name string) (volumes.Volume, error) {
	v, err := s.v().Inspect(ctx, name)
	return toVolume(v), seam(err)
}

func (s *sessionStorage) Remove(ctx context.Context, name string) error {
	return seam(s.v().Remove(ctx, name))
}

// RemoveSession removes the session's pair of claims, named by the session or, for a session
// claimed from a warm pool, by the member it was.
func (s *sessionStorage) RemoveSession(ctx context.Context, name string) error {
	v, err := s.v().Inspect(ctx, name)
	if errors.Is(err, backend.ErrNotFound) {
		// No workspace claim: a state claim of the session's own name may be left (a removal
		// that stopped between the two).
		b := (*Backend)(s)
		cctx, cancel := context.WithTimeout(ctx, b.call)
		defer cancel()
		c, err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).Get(cctx, StateClaim(name), metav1.GetOptions{})
		if err == nil && c.Annotations[AnnotationSession] == name {
			return seam(s.v().Remove(ctx, VolumeName(name)))
		}
		return nil
	}
	if err != nil {
		return seam(err)
	}
	return seam(s.v().Remove(ctx, v.Name))
}

// RemoveState is what undoes a state volume made for a session that had none (Docker's
// sessions from before it): on Kubernetes the claims come and go together.
func (s *sessionStorage) RemoveState(context.Context, string) error { return nil }

func (s *sessionStorage) List(ctx context.Context, withSize bool) ([]volumes.Volume, error) {
	l, err := s.v().List(ctx, withSize)
	out := make([]volumes.Volume, 0, len(l))
	for _, v := range l {
		out = append(out, toVolume(v))
	}
	return out, seam(err)
}

var (
	_ session.Runtimes = (*sessionRuntimes)(nil)
	_ session.Storage  = (*sessionStorage)(nil)
)
