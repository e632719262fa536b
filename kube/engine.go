package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
)

// The Backend is an engine.Engine: session.NewWithEngine(b) runs the same sessions (agent,
// protocol, snapshots, history, every verb) on the cluster. Its pods are the sessions'
// runtimes (the Backend itself is engine.Runtimes), its claims their storage (Volumes), its
// ConfigMaps and relabelled pods the warm pools (pools).

// Runtimes returns b: the pods.
func (b *Backend) Runtimes() engine.Runtimes { return b }

// Storage returns the claims' side of b.
func (b *Backend) Storage() engine.Storage { return (*Volumes)(b) }

// Pools returns the warm pools' side of b.
func (b *Backend) Pools() engine.Pools { return (*pools)(b) }

// CreateIfAbsent creates the pod unless the session has one; the API server is the arbiter
// (a create of an existing name fails), so two starts never both think they made it.
func (b *Backend) CreateIfAbsent(ctx context.Context, s engine.Spec) (engine.Info, bool, error) {
	if i, err := b.Inspect(ctx, s.Session); err == nil {
		return i, false, nil
	} else if !errors.Is(err, engine.ErrNotFound) {
		return engine.Info{}, false, err
	}
	i, err := b.Create(ctx, s)
	return i, err == nil, err
}

// About is the API server's version, as `runtimectl version` and `doctor` show an engine.
func (b *Backend) About(ctx context.Context) (engine.About, error) {
	v, err := b.Ping(ctx)
	if err != nil {
		return engine.About{}, err
	}
	return engine.About{Name: "Kubernetes", Host: b.Host(), Version: v, APIVersion: v}, nil
}

// CreateStarts is true: a pod starts when it is made, and files go in through its running
// container.
func (b *Backend) CreateStarts() bool { return true }

// StopRemoves is true: stop deletes the pod and keeps the claims.
func (b *Backend) StopRemoves() bool { return true }

// Logs returns the agent container's log (engine.LogReader).
func (b *Backend) Logs(ctx context.Context, name string, max int64) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	pod, err := b.get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("logs of session %q: %w", name, err)
	}
	out, err := b.cs.CoreV1().Pods(b.ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: ContainerName, LimitBytes: &max}).DoRaw(cctx)
	if err != nil {
		return nil, fmt.Errorf("logs of session %q: %w", name, b.classify(err))
	}
	return out, nil
}

// Stats says why there are none (engine.StatsReader): the cluster's metrics API
// (metrics-server) is not assumed.
func (b *Backend) Stats(context.Context, string) (engine.Stats, error) {
	return engine.Stats{}, errors.New("stats are not read on Kubernetes (runtimectl does not use the metrics API): use `kubectl top pod`")
}

// tmpSize is /tmp's size for a session that names none: memory on both engines, and a pod must
// keep it below its limit, so a small session gets half its memory for it rather than
// engine.DefaultTmpSize.
func tmpSize(s engine.Spec) engine.Spec {
	if s.TmpSize <= 0 && s.Memory > 0 {
		s.TmpSize = min(int64(engine.DefaultTmpSize), s.Memory/2)
	}
	return s
}

// Create makes the session's claims; the workspace claim asks for the session's disk cap
// (--disk) when it names one, so that the storage enforces it where the provisioner does.
// Docker's volume options (driver options, labels) do not apply: the claims' storage class and
// sizes are the Backend's Options.
func (v *Volumes) Create(ctx context.Context, name, lang, settings string, _ engine.VolumeOptions) (engine.Volume, error) {
	b := *(*Backend)(v)
	if st, err := contract.DecodeSettings(settings); err == nil && st.Disk > 0 {
		b.opts.WorkspaceSize = strconv.FormatInt(st.Disk, 10)
	}
	return (*Volumes)(&b).create(ctx, name, lang, settings)
}

// EnsureState has nothing to do: the state claim is made with the workspace's.
func (v *Volumes) EnsureState(context.Context, string) (bool, error) { return false, nil }

// RemoveSession removes the session's pair of claims, named by the session or, for a session
// claimed from a warm pool, by the member it was.
func (v *Volumes) RemoveSession(ctx context.Context, name string) error {
	vol, err := v.Inspect(ctx, name)
	if errors.Is(err, engine.ErrNotFound) {
		// No workspace claim: a state claim of the session's own name may be left (a removal
		// that stopped between the two).
		b := (*Backend)(v)
		cctx, cancel := context.WithTimeout(ctx, b.call)
		defer cancel()
		c, err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).Get(cctx, StateClaim(name), metav1.GetOptions{})
		if err == nil && c.Annotations[AnnotationSession] == name {
			return v.Remove(ctx, VolumeName(name))
		}
		return nil
	}
	if err != nil {
		return err
	}
	return v.Remove(ctx, vol.Name)
}

// RemoveState is what undoes a state volume made for a session that had none (Docker's
// sessions from before it): on Kubernetes the claims come and go together.
func (v *Volumes) RemoveState(context.Context, string) error { return nil }

var (
	_ engine.Engine      = (*Backend)(nil)
	_ engine.Runtimes    = (*Backend)(nil)
	_ engine.LogReader   = (*Backend)(nil)
	_ engine.StatsReader = (*Backend)(nil)
	_ engine.Egress      = (*Backend)(nil)
	_ engine.Storage     = (*Volumes)(nil)
	_ engine.Pools       = (*pools)(nil)
)
