package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runtimectl/runtimectl/contract"
)

// Warm pools on Kubernetes. A pool's settings are a ConfigMap of its own (runtimectl-pool-NAME,
// labelled as a pool); its members are sessions' pods and claims like any other. Nothing can be
// renamed on Kubernetes, so a claim relabels: the member's pod and claims get the session's key
// label and name annotation, which Inspect, Dial and every verb find a session by when no
// object is named for it, and a new pod made for the session (after a stop) mounts the member's
// claims.

// PoolConfigMap returns the name of the ConfigMap that holds a warm pool's settings.
func PoolConfigMap(pool string) string { return contract.NamePrefix + "pool-" + pool }

// poolKey is the ConfigMap's key for the pool's settings (JSON).
const poolKey = "pool.json"

// pools is the Backend as engine.Pools.
type pools Backend

func (p *pools) b() *Backend { return (*Backend)(p) }

func (p *pools) SavePool(ctx context.Context, name, config string) error {
	b := p.b()
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: PoolConfigMap(name), Namespace: b.ns, Labels: map[string]string{
			contract.LabelPool: name, LabelRole: contract.RolePool, contract.LabelSchema: contract.LabelsSchema,
		}},
		Data: map[string]string{poolKey: config},
	}
	_, err := b.cs.CoreV1().ConfigMaps(b.ns).Create(cctx, cm, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = b.cs.CoreV1().ConfigMaps(b.ns).Update(cctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("record pool %s (ConfigMap %s): %w", name, cm.Name, b.classify(err))
	}
	return nil
}

func (p *pools) LoadPools(ctx context.Context) ([]string, error) {
	b := p.b()
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	l, err := b.cs.CoreV1().ConfigMaps(b.ns).List(cctx, metav1.ListOptions{LabelSelector: LabelRole + "=" + contract.RolePool})
	if err != nil {
		return nil, fmt.Errorf("list pools: %w", b.classify(err))
	}
	out := make([]string, 0, len(l.Items))
	for _, cm := range l.Items {
		out = append(out, cm.Data[poolKey])
	}
	sort.Strings(out)
	return out, nil
}

func (p *pools) DeletePool(ctx context.Context, name string) error {
	b := p.b()
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	err := b.cs.CoreV1().ConfigMaps(b.ns).Delete(cctx, PoolConfigMap(name), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove pool %s: %w", name, b.classify(err))
	}
	return nil
}

// Adopt makes the member's pod and claims the session name's: the session's NetworkPolicy made
// first (so that the pod is never outside one), then the pod and both claims relabelled (the
// pool's labels taken off the pod), the workspace claim given the session's settings, the
// member's policy removed. Kubernetes renames nothing, so no name is refused as Docker's rename
// refuses one in use: Adopt checks that no other pod is the session, before and after its
// relabel (two starts of one new name at once, each with a member: the one that sees the other
// gives up, and its start makes the session the usual way, where the pod's name arbitrates).
// When a step fails, the member's pod and claims, its policy and a policy this call made are
// removed: nothing is left half claimed.
func (p *pools) Adopt(ctx context.Context, member, name, settings string) (err error) {
	b := p.b()
	st, err := contract.DecodeSettings(settings)
	if err != nil {
		return err
	}
	pod, err := b.get(ctx, member)
	if err != nil {
		return fmt.Errorf("claim pool member %s: %w", member, err)
	}
	vol, err := (*Volumes)(b).Inspect(ctx, member)
	if err != nil {
		return fmt.Errorf("claim pool member %s: %w", member, err)
	}
	madePolicy := false
	defer func() {
		if err != nil {
			p.undo(context.WithoutCancel(ctx), pod.Name, vol.Name, member, name, madePolicy)
		}
	}()
	if err := p.nameFree(ctx, name, pod.Name); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	if !WantsNetwork(st.Network) {
		_, err := b.cs.NetworkingV1().NetworkPolicies(b.ns).Create(cctx, Policy(b.ns, name, st.Lang), metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the network policy of session %q: %w", name, b.classify(err))
		}
		madePolicy = err == nil
	}
	relabel := func(extraLabels, extraAnnotations map[string]any) []byte {
		labels := map[string]any{contract.LabelSession: Key(name)}
		for k, v := range extraLabels {
			labels[k] = v
		}
		annotations := map[string]any{AnnotationSession: name}
		for k, v := range extraAnnotations {
			annotations[k] = v
		}
		raw, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": annotations}})
		return raw
	}
	// A JSON merge patch: null takes a label off.
	if _, err := b.cs.CoreV1().Pods(b.ns).Patch(cctx, pod.Name, types.MergePatchType,
		relabel(map[string]any{contract.LabelPool: nil, contract.LabelPoolConfig: nil}, nil), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("claim pool member %s: relabel pod %s: %w", member, pod.Name, b.classify(err))
	}
	if err := p.nameFree(ctx, name, pod.Name); err != nil {
		return err
	}
	claims := map[string][]byte{
		vol.Name + "-workspace": relabel(nil, map[string]any{AnnotationSettings: settings}),
		vol.Name + "-state":     relabel(nil, nil),
	}
	for _, c := range []string{vol.Name + "-workspace", vol.Name + "-state"} {
		if _, err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).Patch(cctx, c, types.MergePatchType, claims[c], metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("claim pool member %s: relabel claim %s: %w", member, c, b.classify(err))
		}
	}
	err = b.cs.NetworkingV1().NetworkPolicies(b.ns).Delete(cctx, PolicyName(member), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the network policy of pool member %s: %w", member, b.classify(err))
	}
	return nil
}

// nameFree fails when a pod other than ours is the session name (by its name, or by label and
// annotation), or when claims of the session's own name exist.
func (p *pools) nameFree(ctx context.Context, name, ours string) error {
	b := p.b()
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	l, err := b.cs.CoreV1().Pods(b.ns).List(cctx, metav1.ListOptions{LabelSelector: contract.LabelSession + "=" + Key(name)})
	if err != nil {
		return fmt.Errorf("claim a pool member for session %q: %w", name, b.classify(err))
	}
	for _, q := range l.Items {
		if q.Name != ours && q.Annotations[AnnotationSession] == name {
			return fmt.Errorf("claim a pool member for session %q: pod %s is the session already (another start made it at the same time)", name, q.Name)
		}
	}
	if c, err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).Get(cctx, WorkspaceClaim(name), metav1.GetOptions{}); err == nil && c.Annotations[AnnotationSession] == name {
		return fmt.Errorf("claim a pool member for session %q: its claim %s exists already (another start made it at the same time)", name, c.Name)
	} else if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("claim a pool member for session %q: %w", name, b.classify(err))
	}
	return nil
}

// undo removes what a failed claim leaves, each part even when another could not be: the
// member's pod and claims, the member's policy, and the session's when this claim made it.
func (p *pools) undo(ctx context.Context, pod, volume, member, name string, madePolicy bool) {
	b := p.b()
	ctx, cancel := context.WithTimeout(ctx, 2*b.call)
	defer cancel()
	if err := b.deleteAndWait(ctx, pod, 0); err != nil {
		b.log.Warn("pool: remove a member whose claim failed", "pod", pod, "err", err)
	}
	for _, c := range []string{volume + "-workspace", volume + "-state"} {
		if err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).Delete(ctx, c, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			b.log.Warn("pool: remove a claim of a member whose claim failed", "claim", c, "err", err)
		}
	}
	policies := []string{member}
	if madePolicy {
		policies = append(policies, name)
	}
	for _, s := range policies {
		if err := b.cs.NetworkingV1().NetworkPolicies(b.ns).Delete(ctx, PolicyName(s), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			b.log.Warn("pool: remove a policy of a member whose claim failed", "policy", PolicyName(s), "err", err)
		}
	}
}
