package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// Create makes the session's NetworkPolicy (unless it asked for network) and its pod, which
// starts at once; an existing pod of the session is returned as it is. The claims must exist
// (Volumes.Create): the pod waits for them otherwise.
func (b *Backend) Create(ctx context.Context, s engine.Spec) (engine.Info, error) {
	s = tmpSize(s)
	pod, err := Pod(b.ns, s, b.opts)
	if err != nil {
		return engine.Info{}, err
	}
	// A session claimed from a warm pool mounts the claims of the member it was.
	if v, err := (*Volumes)(b).Inspect(ctx, s.Session); err == nil && v.Name != VolumeName(s.Session) {
		useClaims(pod, v.Name)
	} else if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return engine.Info{}, fmt.Errorf("create pod for session %q: %w", s.Session, err)
	}
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	if wantsEgress(s) {
		if err := b.prepareEgress(ctx, s, pod); err != nil {
			return engine.Info{}, err
		}
	} else if WantsNetwork(s.Network) {
		err := b.cs.NetworkingV1().NetworkPolicies(b.ns).Delete(cctx, PolicyName(s.Session), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return engine.Info{}, fmt.Errorf("open the network of session %q: %w", s.Session, b.classify(err))
		}
	} else {
		_, err := b.cs.NetworkingV1().NetworkPolicies(b.ns).Create(cctx, Policy(b.ns, s.Session, s.Lang), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return engine.Info{}, fmt.Errorf("create the network policy of session %q: %w", s.Session, b.classify(err))
		}
	}
	created, err := b.cs.CoreV1().Pods(b.ns).Create(cctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return b.Inspect(ctx, s.Session)
	}
	if err != nil {
		return engine.Info{}, fmt.Errorf("create pod for session %q: %w", s.Session, b.classify(err))
	}
	return info(created), nil
}

// Start waits until the session's agent runs. A pod that ended (its agent exited, it was
// evicted, its node went away) is made again from its own spec, on any node its claims can
// attach to. An image that cannot be pulled is engine.ErrImage at once, not a wait.
func (b *Backend) Start(ctx context.Context, session string) error {
	pod, err := b.get(ctx, session)
	if err != nil {
		return fmt.Errorf("start session %q: %w", session, err)
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		if pod, err = b.recreate(ctx, pod); err != nil {
			return fmt.Errorf("start session %q: %w", session, err)
		}
	}
	return b.waitRunning(ctx, session, pod)
}

// recreate deletes an ended pod and creates it again from its spec, unbound from its node.
func (b *Backend) recreate(ctx context.Context, old *corev1.Pod) (*corev1.Pod, error) {
	if err := b.deleteAndWait(ctx, old.Name, 0); err != nil {
		return nil, err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: old.Namespace, Labels: old.Labels, Annotations: old.Annotations},
		Spec:       *old.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = "" // the scheduler places it again
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	created, err := b.cs.CoreV1().Pods(b.ns).Create(cctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create the pod again: %w", b.classify(err))
	}
	return created, nil
}

// waitRunning watches the pod until its agent's container runs, or a state that will not get
// better (a pull failure, a failed init, an ended pod), or the start timeout.
func (b *Backend) waitRunning(ctx context.Context, session string, pod *corev1.Pod) error {
	ctx, cancel := context.WithTimeout(ctx, b.start)
	defer cancel()
	last := ""
	for {
		done, why, err := podProgress(pod)
		if err != nil {
			return fmt.Errorf("start session %q: %w", session, err)
		}
		if done {
			return nil
		}
		if why != "" {
			last = why
		}
		w, err := b.cs.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", pod.Name).String(),
			ResourceVersion: pod.ResourceVersion,
		})
		if err != nil {
			if ctx.Err() != nil {
				return b.startTimeout(session, last, ctx)
			}
			return fmt.Errorf("start session %q: watch its pod: %w", session, b.classify(err))
		}
		next, err := b.nextPodEvent(ctx, w, session, &last)
		w.Stop()
		if err != nil {
			return err
		}
		if next == nil { // the watch ended (server timeout, compaction): read the pod again
			if ctx.Err() != nil {
				return b.startTimeout(session, last, ctx)
			}
			if next, err = b.get(ctx, session); err != nil {
				return fmt.Errorf("start session %q: %w", session, err)
			}
		}
		pod = next
	}
}

// nextPodEvent returns the pod at its first change that settles the wait (done or failed), or
// nil when the watch ended first.
func (b *Backend) nextPodEvent(ctx context.Context, w watch.Interface, session string, last *string) (*corev1.Pod, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, b.startTimeout(session, *last, ctx)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil, nil
			}
			switch ev.Type {
			case watch.Deleted:
				return nil, fmt.Errorf("start session %q: its pod was deleted while it started", session)
			case watch.Error:
				return nil, nil
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			done, why, err := podProgress(p)
			if why != "" {
				*last = why
			}
			if done || err != nil {
				return p, nil
			}
		}
	}
}

func (b *Backend) startTimeout(session, last string, ctx context.Context) error {
	msg := fmt.Sprintf("start session %q: its pod's agent did not run within %s", session, b.start)
	if errors.Is(ctx.Err(), context.Canceled) {
		msg = fmt.Sprintf("start session %q: cancelled before its pod's agent ran", session)
	}
	if last != "" {
		msg += " (last: " + last + ")"
	}
	return errors.New(msg + "; `kubectl describe pod " + PodName(session) + " -n " + b.ns + "` says why")
}

// pullFailures are the waiting reasons of a container whose image the node cannot get.
var pullFailures = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"RegistryUnavailable": true, "ImageInspectError": true,
}

// configFailures are the waiting reasons that retrying does not cure.
var configFailures = map[string]bool{
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true,
	"PreCreateHookError": true, "PreStartHookError": true, "PostStartHookError": true,
}

// podProgress says where a starting pod stands: done when the agent's container runs; an error
// when it will not get there by waiting; else why it waits ("" when nothing is said).
func podProgress(p *corev1.Pod) (done bool, why string, err error) {
	if p.DeletionTimestamp != nil {
		return false, "", fmt.Errorf("pod %s is being deleted", p.Name)
	}
	statuses := append(append([]corev1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil {
			if pullFailures[w.Reason] {
				return false, "", advice.Errorf("%w: the cluster cannot pull image %s (%s: %s); push it to a registry the nodes can pull from and name it with %s (see docs/kubernetes.md)",
					engine.ErrImage, cs.Image, w.Reason, oneLine(w.Message), advice.Words{Lib: "Spec.Image", CLI: "--image"})
			}
			if configFailures[w.Reason] {
				return false, "", fmt.Errorf("container %s of pod %s cannot start (%s: %s)", cs.Name, p.Name, w.Reason, oneLine(w.Message))
			}
		}
		if t := cs.State.Terminated; t != nil && (cs.Name == ContainerName || t.ExitCode != 0) {
			return false, "", fmt.Errorf("container %s of pod %s ended (%s, exit code %d)%s", cs.Name, p.Name, t.Reason, t.ExitCode, suffix(t.Message))
		}
	}
	switch p.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded:
		return false, "", fmt.Errorf("pod %s has ended (%s%s)", p.Name, p.Status.Phase, suffix(p.Status.Reason+" "+p.Status.Message))
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == ContainerName && cs.State.Running != nil {
			return true, "", nil
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return false, "not scheduled: " + oneLine(c.Reason+": "+c.Message), nil
		}
	}
	for _, cs := range statuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			return false, cs.Name + " " + w.Reason + suffix(w.Message), nil
		}
	}
	return false, string(p.Status.Phase), nil
}

func suffix(s string) string {
	s = oneLine(s)
	if s == "" {
		return ""
	}
	return ": " + s
}

// Stop deletes the session's pod, giving its agent timeout to finish after SIGTERM, and waits
// until it is gone; the claims stay, so the next start creates the pod again on them. A missing
// pod is stopped already.
func (b *Backend) Stop(ctx context.Context, session string, timeout time.Duration) error {
	pod, err := b.podName(ctx, session)
	if pod == "" {
		return err
	}
	if err := b.deleteAndWait(ctx, pod, timeout); err != nil {
		return fmt.Errorf("stop session %q: %w", session, err)
	}
	return nil
}

// Remove deletes the session's pod (at once when force) and its NetworkPolicy; the claims stay
// (Volumes.Remove removes them).
func (b *Backend) Remove(ctx context.Context, session string, force bool) error {
	grace := time.Duration(GracePeriod) * time.Second
	if force {
		grace = 0
	}
	pod, err := b.podName(ctx, session)
	if err != nil {
		return err
	}
	if pod != "" {
		if err := b.deleteAndWait(ctx, pod, grace); err != nil {
			return fmt.Errorf("remove session %q: %w", session, err)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	err = b.cs.NetworkingV1().NetworkPolicies(b.ns).Delete(cctx, PolicyName(session), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the network policy of session %q: %w", session, b.classify(err))
	}
	return nil
}

// deleteAndWait deletes a pod with the given grace and waits until the API no longer has it
// (so that a pod of the same name can be created next). A missing pod is deleted.
func (b *Backend) deleteAndWait(ctx context.Context, name string, grace time.Duration) error {
	secs := int64(grace / time.Second)
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	bg := metav1.DeletePropagationBackground
	err := b.cs.CoreV1().Pods(b.ns).Delete(cctx, name, metav1.DeleteOptions{GracePeriodSeconds: &secs, PropagationPolicy: &bg})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete pod %s: %w", name, b.classify(err))
	}
	wctx, wcancel := context.WithTimeout(ctx, grace+2*b.call)
	defer wcancel()
	for delay := 20 * time.Millisecond; ; delay = min(delay*2, 500*time.Millisecond) {
		_, err := b.cs.CoreV1().Pods(b.ns).Get(wctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil && wctx.Err() == nil {
			return fmt.Errorf("wait for pod %s to go: %w", name, b.classify(err))
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("pod %s is still there %s after it was deleted (is its node down? `kubectl get pod %s -n %s -o wide`)", name, grace+2*b.call, name, b.ns)
		case <-time.After(delay):
		}
	}
}

// get returns the session's pod: the one named for it, else (a session claimed from a warm
// pool keeps its member's pod, relabelled) the one labelled and annotated as it.
// engine.ErrNotFound when there is none (a pod of its name that belongs to another session, a
// name that maps to the same key, is not it).
func (b *Backend) get(ctx context.Context, session string) (*corev1.Pod, error) {
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	p, err := b.cs.CoreV1().Pods(b.ns).Get(cctx, PodName(session), metav1.GetOptions{})
	if err == nil && p.Annotations[AnnotationSession] == session {
		return p, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, b.classify(err)
	}
	l, lerr := b.cs.CoreV1().Pods(b.ns).List(cctx, metav1.ListOptions{LabelSelector: contract.LabelSession + "=" + Key(session)})
	if lerr != nil {
		return nil, b.classify(lerr)
	}
	var found *corev1.Pod
	for i := range l.Items {
		q := &l.Items[i]
		if q.Annotations[AnnotationSession] == session && (found == nil || found.DeletionTimestamp != nil) {
			found = q
		}
	}
	switch {
	case found != nil:
		return found, nil
	case err != nil:
		return nil, b.classify(err)
	}
	return nil, fmt.Errorf("%w: pod %s belongs to session %q, not %q", engine.ErrNotFound, p.Name, p.Annotations[AnnotationSession], session)
}

// podName returns the name of the session's pod, "" (and a nil error) when it has none.
func (b *Backend) podName(ctx context.Context, session string) (string, error) {
	p, err := b.get(ctx, session)
	if errors.Is(err, engine.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return p.Name, nil
}

// Inspect returns the session's pod; engine.ErrNotFound when there is none.
func (b *Backend) Inspect(ctx context.Context, session string) (engine.Info, error) {
	p, err := b.get(ctx, session)
	if err != nil {
		return engine.Info{}, err
	}
	return info(p), nil
}

// List returns every pod labelled as a runtimectl session in the namespace.
func (b *Backend) List(ctx context.Context) ([]engine.Info, error) {
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	l, err := b.cs.CoreV1().Pods(b.ns).List(cctx, metav1.ListOptions{LabelSelector: contract.LabelSession})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", b.classify(err))
	}
	out := make([]engine.Info, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, info(&l.Items[i]))
	}
	return out, nil
}

// info maps a pod to what session knows of a runtime. State: pending (scheduling, pulling,
// starting), running, exited (the agent ended, or the pod failed or was evicted), terminating.
func info(p *corev1.Pod) engine.Info {
	in := engine.Info{
		ID: string(p.UID), Name: p.Name, Session: p.Annotations[AnnotationSession], Lang: p.Labels[contract.LabelLang],
		Created: p.CreationTimestamp.Time, Labels: p.Labels, Node: p.Spec.NodeName, State: engine.StatePending,
		StateMounted: true, // every pod mounts the state claim
	}
	for _, c := range p.Spec.Containers {
		if c.Name == ContainerName {
			in.Image = c.Image
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name != ContainerName {
			continue
		}
		switch {
		case cs.State.Running != nil:
			in.Running, in.State = true, engine.StateRunning
			in.StartedAt = cs.State.Running.StartedAt.Time
		case cs.State.Terminated != nil:
			t := cs.State.Terminated
			in.State, in.ExitCode, in.OOMKilled = engine.StateExited, int(t.ExitCode), t.Reason == "OOMKilled"
			in.StartedAt = t.StartedAt.Time
		}
	}
	switch {
	case p.DeletionTimestamp != nil:
		in.State, in.Running = engine.StateTerminating, false
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		in.State, in.Running = engine.StateExited, false
		if strings.EqualFold(p.Status.Reason, "Evicted") {
			in.State = engine.StateEvicted
		}
	}
	return in
}
