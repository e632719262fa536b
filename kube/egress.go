package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/egress"
	"github.com/runtimectl/runtimectl/engine"
)

// Egress on Kubernetes (issue 26). A session with allowed hosts gets a proxy pod of its own in
// the session's namespace, EgressName(session): runtime-egress from the session's image,
// listening for the session's relay on egress.RelayPort, its configuration (with the secret
// headers' values and the session's CA) in a Secret of the same name that only the proxy's pod
// reads. The session's pod:
//
//   - has a NetworkPolicy (EgressPolicy) that lets it reach that pod on that port and nothing
//     else: no other pod, no Service, no cluster DNS, no outside address;
//   - is told the proxy's pod address (RUNTIMECTL_EGRESS_PROXY=tcp:IP:PORT, read when the pod
//     is made, which is after its proxy runs), and resolves with its agent's resolver on
//     loopback (dnsPolicy None, nameserver 127.0.0.1), which answers only the allowed names.
//
// The proxy's own policy lets only its session's pod in. A pod per session rather than one
// Deployment per namespace, for the reasons given on Docker (containers/egress.go): nothing of
// one session's allowlist, secrets or CA is in another's proxy, and the log is the session's.
// A sidecar in the session's pod would share its network namespace, so the session's code
// could reach the outside past it; a pod of its own cannot be bypassed once the policy holds.
// NetworkPolicy needs a plugin that enforces it; without one (the local test cluster's
// bridge) the proxy still decides for everything that goes through it, but a session's code
// could connect to other addresses itself.

// EgressName is the name of a session's egress proxy pod, its Secret and its NetworkPolicy.
func EgressName(session string) string { return "rtctl-egress-" + Key(session) }

// egressLabels are the labels of a session's egress objects (no LabelSession: they are not
// the session's runtime).
func egressLabels(session string) map[string]string {
	return map[string]string{contract.LabelEgress: Key(session), contract.LabelSchema: contract.LabelsSchema}
}

// wantsEgress reports whether a session's spec has allowed hosts.
func wantsEgress(s engine.Spec) bool { return s.Labels[contract.LabelAllowHosts] != "" }

// EgressPolicy is the NetworkPolicy of a session with allowed hosts: nothing in, and out only
// to its proxy's pod on the relay port.
func EgressPolicy(namespace, session, lang string) *networkingv1.NetworkPolicy {
	p := Policy(namespace, session, lang)
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(egress.RelayPort)
	p.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
		To:    []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: egressLabels(session)}}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
	}}
	return p
}

// proxyPolicy lets only the session's pod into its proxy; the proxy goes out where it decides.
func proxyPolicy(namespace, session string) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(egress.RelayPort)
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: EgressName(session), Namespace: namespace, Labels: egressLabels(session),
			Annotations: map[string]string{AnnotationSession: session}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: egressLabels(session)},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelSession: Key(session)}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}
}

// EgressPod is a session's proxy pod: hardened as the session's (no capabilities, read-only
// root, no token), its configuration from the Secret.
func EgressPod(namespace, session, image string, o Options) *corev1.Pod {
	no, yes := false, true
	user := int64(65534)
	grace := int64(2)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: EgressName(session), Namespace: namespace, Labels: egressLabels(session),
			Annotations: map[string]string{AnnotationSession: session}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  o.NodeSelector,
			Tolerations:                   o.Tolerations,
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &yes, RunAsUser: &user, RunAsGroup: &user,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "egress", Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: []string{contract.EgressBinary},
				Env: []corev1.EnvVar{{Name: egress.ConfigEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: EgressName(session)}, Key: "config"}}}},
				Ports: []corev1.ContainerPort{{Name: "relay", ContainerPort: egress.RelayPort, Protocol: corev1.ProtocolTCP}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, Privileged: &no,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceEphemeralStorage: resource.MustParse("64Mi")},
					Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi"), corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceEphemeralStorage: resource.MustParse("8Mi")},
				},
			}},
		},
	}
}

// egressPod makes a session's pod one with allowed hosts: its proxy's address, its agent's
// resolver, ports below 1024 on loopback for the agent's relay, and unless policyOnly an init
// container (PinName) that leaves the pod's network one route, to the proxy's pod. That init
// container is the only part of the pod with CAP_NET_ADMIN (a namespace that enforces Pod
// Security's baseline refuses it); the agent and the code have neither it nor CAP_NET_RAW, so
// they cannot route around it.
func egressPod(pod *corev1.Pod, proxyIP string, policyOnly bool) {
	if !policyOnly {
		pinRoutes(pod, proxyIP)
	}
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == ContainerName {
			pod.Spec.Containers[i].Env = append(pod.Spec.Containers[i].Env, corev1.EnvVar{
				Name: contract.EgressProxyEnv, Value: "tcp:" + joinHostPort(proxyIP, egress.RelayPort)})
		}
	}
	trustQ := resource.MustParse("1Mi")
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "egress-trust", VolumeSource: corev1.VolumeSource{
		EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &trustQ}}})
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].VolumeMounts = append(pod.Spec.Containers[i].VolumeMounts, corev1.VolumeMount{Name: "egress-trust", MountPath: contract.EgressTrustDir})
	}
	pod.Spec.DNSPolicy = corev1.DNSNone
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{egress.AnswerAddr}, Searches: []string{}}
	if pod.Spec.SecurityContext == nil {
		pod.Spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	pod.Spec.SecurityContext.Sysctls = append(pod.Spec.SecurityContext.Sysctls, corev1.Sysctl{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"})
}

// pinRoutes adds the init container that runs `runtime-egress pin PROXY-IP` (package
// egress/pin) from the session's image, as root with CAP_NET_ADMIN only.
func pinRoutes(pod *corev1.Pod, proxyIP string) {
	no, yes := false, true
	root := int64(0)
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, corev1.Container{
		Name: PinName, Image: pod.Spec.Containers[0].Image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{contract.EgressBinary, "pin", proxyIP},
		SecurityContext: &corev1.SecurityContext{
			RunAsUser: &root, RunAsGroup: &root, RunAsNonRoot: &no,
			AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, Privileged: &no,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"NET_ADMIN"}},
		},
		Resources: corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi"), corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Mi")},
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi"), corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Mi")},
		},
	})
}

func joinHostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}

// prepareEgress is what Create does for a session with allowed hosts: its pod told where its
// proxy is (which must run: session starts it first), and its policy.
func (b *Backend) prepareEgress(ctx context.Context, s engine.Spec, pod *corev1.Pod) error {
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	p, err := b.cs.CoreV1().Pods(b.ns).Get(cctx, EgressName(s.Session), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("create pod for session %q: its egress proxy: %w", s.Session, b.classify(err))
	}
	if p.Status.PodIP == "" {
		return fmt.Errorf("create pod for session %q: its egress proxy %s has no address yet", s.Session, p.Name)
	}
	egressPod(pod, p.Status.PodIP, b.opts.EgressPolicyOnly)
	pol := EgressPolicy(b.ns, s.Session, s.Lang)
	_, err = b.cs.NetworkingV1().NetworkPolicies(b.ns).Create(cctx, pol, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *networkingv1.NetworkPolicy
		if cur, err = b.cs.NetworkingV1().NetworkPolicies(b.ns).Get(cctx, pol.Name, metav1.GetOptions{}); err == nil {
			cur.Spec = pol.Spec
			_, err = b.cs.NetworkingV1().NetworkPolicies(b.ns).Update(cctx, cur, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("create the network policy of session %q: %w", s.Session, b.classify(err))
	}
	return nil
}

// StartEgress makes the session's proxy (its Secret from spec() when there is none, its policy,
// its pod) and waits until it listens.
func (b *Backend) StartEgress(ctx context.Context, session string, spec func() (engine.EgressSpec, error)) error {
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	name := EgressName(session)
	pods := b.cs.CoreV1().Pods(b.ns)
	p, err := pods.Get(cctx, name, metav1.GetOptions{})
	if err == nil && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("egress proxy of session %q: %w", session, b.classify(err))
	}
	sec, err := b.cs.CoreV1().Secrets(b.ns).Get(cctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s, serr := spec()
		if serr != nil {
			return serr
		}
		cfg := s.Config
		cfg.Session, cfg.Listen = session, "tcp:"+joinHostPort("0.0.0.0", egress.RelayPort)
		sec = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.ns, Labels: egressLabels(session),
				Annotations: map[string]string{AnnotationSession: session, "io.runtimectl.image": s.Image}},
			StringData: map[string]string{"config": cfg.Encode()},
		}
		if sec, err = b.cs.CoreV1().Secrets(b.ns).Create(cctx, sec, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
			sec, err = b.cs.CoreV1().Secrets(b.ns).Get(cctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("egress proxy of session %q: its secret: %w", session, b.classify(err))
	}
	if _, err := b.cs.NetworkingV1().NetworkPolicies(b.ns).Create(cctx, proxyPolicy(b.ns, session), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("egress proxy of session %q: its policy: %w", session, b.classify(err))
	}
	if p == nil || p.Name == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		if p != nil && p.Name != "" {
			if err := b.deleteAndWait(ctx, name, 2*time.Second); err != nil {
				return err
			}
		}
		if _, err := pods.Create(cctx, EgressPod(b.ns, session, sec.Annotations["io.runtimectl.image"], b.opts), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("egress proxy of session %q: %w", session, b.classify(err))
		}
	}
	return b.waitEgress(ctx, session)
}

// waitEgress waits until the proxy's pod runs, has an address and logged that it is ready.
func (b *Backend) waitEgress(ctx context.Context, session string) error {
	ctx, cancel := context.WithTimeout(ctx, b.start)
	defer cancel()
	for {
		p, err := b.cs.CoreV1().Pods(b.ns).Get(ctx, EgressName(session), metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			if logs, err := b.EgressLogs(ctx, session, 1<<20); err == nil && strings.Contains(string(logs), egress.LogReady) {
				return nil
			}
		}
		if err == nil {
			if _, why, perr := podProgress(p); perr != nil {
				return fmt.Errorf("egress proxy of session %q: %w (%s)", session, perr, why)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("egress proxy of session %q did not become ready: %w", session, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// StopEgress deletes the proxy's pod and waits until it is gone (as a stop deletes the
// session's); its Secret stays, so that the next start needs no secret values again.
func (b *Backend) StopEgress(ctx context.Context, session string, timeout time.Duration) error {
	if err := b.deleteAndWait(ctx, EgressName(session), timeout); err != nil {
		return fmt.Errorf("stop the egress proxy of session %q: %w", session, err)
	}
	return nil
}

// RemoveEgress removes the proxy's pod, Secret and policy.
func (b *Backend) RemoveEgress(ctx context.Context, session string) error {
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	name := EgressName(session)
	var errs []error
	if err := b.cs.CoreV1().Pods(b.ns).Delete(cctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if err := b.cs.CoreV1().Secrets(b.ns).Delete(cctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if err := b.cs.NetworkingV1().NetworkPolicies(b.ns).Delete(cctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove the egress proxy of session %q: %w", session, b.classify(err))
	}
	return nil
}

// EgressLogs returns the proxy pod's log; engine.ErrNotFound without a pod.
func (b *Backend) EgressLogs(ctx context.Context, session string, max int64) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	out, err := b.cs.CoreV1().Pods(b.ns).GetLogs(EgressName(session), &corev1.PodLogOptions{LimitBytes: &max}).DoRaw(cctx)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("egress proxy of session %q: %w", session, engine.ErrNotFound)
		}
		return nil, fmt.Errorf("logs of the egress proxy of session %q: %w", session, b.classify(err))
	}
	return out, nil
}
