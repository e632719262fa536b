package kube

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
)

// Volumes is a Backend seen as the keeper of sessions' claims: each session has two,
// runtimectl-KEY-workspace and runtimectl-KEY-state, one unit for every verb, named
// runtimectl-KEY together (engine.Volume.Name). It implements engine.Storage.
type Volumes Backend

// create creates the session's two claims, the workspace one carrying the settings, or keeps
// those that exist. A claim binds when its storage class provisions it (or when an operator made
// a PersistentVolume for it); the pod waits for that.
func (v *Volumes) create(ctx context.Context, session, lang, settings string) (engine.Volume, error) {
	b := (*Backend)(v)
	claims, err := Claims(b.ns, session, lang, settings, b.opts)
	if err != nil {
		return engine.Volume{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	for _, c := range claims {
		_, err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).Create(cctx, c, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return engine.Volume{}, fmt.Errorf("create claim %s for session %q: %w", c.Name, session, b.classify(err))
		}
	}
	return v.Inspect(ctx, session)
}

// Inspect returns the session's claims as one volume: those named for it, else (a session
// claimed from a warm pool keeps its member's claims, relabelled) those labelled and annotated
// as it. engine.ErrNotFound without a workspace claim of that session.
func (v *Volumes) Inspect(ctx context.Context, session string) (engine.Volume, error) {
	b := (*Backend)(v)
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	c, err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).Get(cctx, WorkspaceClaim(session), metav1.GetOptions{})
	if err == nil && c.Annotations[AnnotationSession] == session {
		return volume(c), nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return engine.Volume{}, fmt.Errorf("volume of session %q: %w", session, b.classify(err))
	}
	l, lerr := b.cs.CoreV1().PersistentVolumeClaims(b.ns).List(cctx, metav1.ListOptions{
		LabelSelector: contract.LabelSession + "=" + Key(session) + "," + LabelRole + "=" + RoleWorkspace,
	})
	if lerr != nil {
		return engine.Volume{}, fmt.Errorf("volume of session %q: %w", session, b.classify(lerr))
	}
	for i := range l.Items {
		if l.Items[i].Annotations[AnnotationSession] == session {
			return volume(&l.Items[i]), nil
		}
	}
	if err != nil {
		return engine.Volume{}, fmt.Errorf("volume of session %q: %w", session, b.classify(err))
	}
	return engine.Volume{}, fmt.Errorf("%w: claim %s belongs to session %q, not %q", engine.ErrNotFound, c.Name, c.Annotations[AnnotationSession], session)
}

func volume(c *corev1.PersistentVolumeClaim) engine.Volume {
	return engine.Volume{
		Name: strings.TrimSuffix(c.Name, "-workspace"), Session: c.Annotations[AnnotationSession],
		Lang: c.Labels[contract.LabelLang], Settings: c.Annotations[AnnotationSettings],
		Created: c.CreationTimestamp.Time, Size: -1,
	}
}

// Remove deletes the pair of claims named name (engine.Volume.Name); missing claims are
// removed already. While the session's pod exists, engine.ErrInUse.
func (v *Volumes) Remove(ctx context.Context, name string) error {
	b := (*Backend)(v)
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	if _, err := b.cs.CoreV1().Pods(b.ns).Get(cctx, name, metav1.GetOptions{}); err == nil {
		return fmt.Errorf("remove volume %s: %w (stop and remove its session first)", name, engine.ErrInUse)
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove volume %s: %w", name, b.classify(err))
	}
	// A session claimed from a warm pool has the member's claims, its pod another name.
	if c, err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).Get(cctx, name+"-workspace", metav1.GetOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove volume %s: %w", name, b.classify(err))
	} else if err == nil {
		if s := c.Annotations[AnnotationSession]; s != "" {
			if p, err := b.podName(cctx, s); err != nil {
				return fmt.Errorf("remove volume %s: %w", name, err)
			} else if p != "" {
				return fmt.Errorf("remove volume %s: %w by pod %s (stop and remove session %q first)", name, engine.ErrInUse, p, s)
			}
		}
	}
	claims := []string{name + "-workspace", name + "-state"}
	for _, c := range claims {
		err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).Delete(cctx, c, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("remove claim %s: %w", c, b.classify(err))
		}
	}
	// A claim stays (Terminating) until its protection finalizer is removed: wait, so that a
	// session of the same name can be made next.
	for _, c := range claims {
		for delay := 20 * time.Millisecond; ; delay = min(delay*2, 500*time.Millisecond) {
			_, err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).Get(cctx, c, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if cctx.Err() != nil {
				return fmt.Errorf("remove claim %s: still there after %s (`kubectl describe pvc %s -n %s` says why)", c, b.call, c, b.ns)
			}
			time.Sleep(delay)
		}
	}
	return nil
}

// List returns every session's claims as volumes, by name. Sizes are unknown (-1): the API says
// what a claim may hold, not what it holds.
func (v *Volumes) List(ctx context.Context, withSize bool) ([]engine.Volume, error) {
	b := (*Backend)(v)
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	l, err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).List(cctx, metav1.ListOptions{
		LabelSelector: contract.LabelSession + "," + LabelRole + "=" + RoleWorkspace,
	})
	if err != nil {
		return nil, fmt.Errorf("list claims: %w", b.classify(err))
	}
	out := make([]engine.Volume, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, volume(&l.Items[i]))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
