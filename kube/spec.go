package kube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// Paths inside the session's pod.
const (
	// Workspace is where the workspace claim is mounted, as the volume is on Docker.
	Workspace = contract.Workspace
	// StateDir is where the state claim is mounted, as the state volume is on Docker: the
	// agent's --state, root-owned, 0700, outside anything the session user owns.
	StateDir = contract.StateDir
	// SocketDir holds the agent's unix socket (in memory, 0700), as the tmpfs does on Docker.
	SocketDir = "/run/runtimectl"
	// SessionUID is the session user that the agent runs the kernel as.
	SessionUID = 1000
	// AgentBinary is the agent inside the session images.
	AgentBinary = "/usr/local/bin/runtime-agent"
)

// Defaults of the mapping; Options overrides the sizes.
const (
	DefaultWorkspaceSize = "10Gi"
	DefaultStateSize     = "1Gi"
	DefaultEphemeral     = "1Gi" // the container's writable layer and logs (the root filesystem is read-only)
	// DefaultCPURequest is what the scheduler reserves for a session without --cpus: sessions
	// are idle most of the time, so they are packed by memory, not CPU.
	DefaultCPURequest = "100m"
	// GracePeriod is how long a deleted pod's agent has to finish writing after SIGTERM.
	GracePeriod = 10
)

// Options are the cluster's choices that a session's spec does not carry.
type Options struct {
	// StorageClass of the claims; "" is the cluster's default class.
	StorageClass string
	// WorkspaceSize and StateSize are the claims' requests (Kubernetes quantities, "10Gi").
	WorkspaceSize, StateSize string
	// Ephemeral limits the container's ephemeral storage (its logs; the root is read-only).
	Ephemeral string
	// PullSecrets name Secrets (type kubernetes.io/dockerconfigjson) for a private registry.
	PullSecrets []string
	// NodeSelector and Tolerations place session pods on the nodes meant for them.
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// EgressPolicyOnly leaves a session with allowed hosts to its NetworkPolicy alone: its pod
	// gets no init container that pins its routes to its proxy (PinName, which needs
	// CAP_NET_ADMIN, outside Pod Security's baseline). Only where the CNI enforces
	// NetworkPolicy; without it the session's code can reach other addresses itself.
	EgressPolicyOnly bool
}

func (o Options) withDefaults() Options {
	if o.WorkspaceSize == "" {
		o.WorkspaceSize = DefaultWorkspaceSize
	}
	if o.StateSize == "" {
		o.StateSize = DefaultStateSize
	}
	if o.Ephemeral == "" {
		o.Ephemeral = DefaultEphemeral
	}
	return o
}

// Validate checks the options' quantities, so that bad input fails before anything is created.
func (o Options) Validate() error {
	o = o.withDefaults()
	for _, q := range []struct{ name, v string }{{"workspace size", o.WorkspaceSize}, {"state size", o.StateSize}, {"ephemeral storage", o.Ephemeral}} {
		if _, err := resource.ParseQuantity(q.v); err != nil {
			return fmt.Errorf("%s %q is not a Kubernetes quantity (use e.g. 10Gi, 512Mi)", q.name, q.v)
		}
	}
	return nil
}

// AgentArgs is the pod's main process: the agent, serving the session's language, with its
// state on the state claim. On Docker the image's entrypoint runs the same agent under tini; here
// the pod's shared process namespace makes the pause process PID 1, which reaps orphans as tini
// does.
func AgentArgs(lang string) []string {
	return []string{AgentBinary, "serve", "--lang", lang, "--state", StateDir, "--workdir", Workspace, "--uid", fmt.Sprint(SessionUID)}
}

// ConnectArgs is the relay that the controller runs through pods/exec to reach the agent.
var ConnectArgs = []string{AgentBinary, "connect"}

// prepareScript runs in the init container as root with CHOWN and FOWNER only: claims come
// from a provisioner root-owned (Docker copies the image's owners into a new volume; Kubernetes
// does not), and emptyDirs are 0777. It fixes only the top folders, never walks the workspace.
const prepareScript = `set -eu
if [ "$(stat -c %u /workspace)" != 1000 ]; then
  mkdir -p /workspace/outputs 2>/dev/null && chown 1000:1000 /workspace/outputs || true
  chown 1000:1000 /workspace
  chmod 0755 /workspace
fi
chown 0:0 ` + StateDir + `
chmod 0700 ` + StateDir + `
chmod 1777 /tmp
chmod 0700 ` + SocketDir + `
`

// Pod maps a session's spec to its Pod. The hardening lives here, in one place:
//   - the pod's default is runAsNonRoot as uid/gid 1000; only the agent (which must switch to the
//     session user and signal its processes) and the init container are root, the agent with
//     SETUID, SETGID and KILL only, as on Docker;
//   - allowPrivilegeEscalation false (no_new_privs), read-only root filesystem, seccomp
//     RuntimeDefault, no service account token, no service links;
//   - /tmp and the agent's socket folder in memory, size-limited (counted in the memory limit);
//   - CPU, memory and ephemeral-storage limits; memory requested as limited, so the scheduler
//     places sessions by the memory they may use;
//   - imagePullPolicy IfNotPresent, restartPolicy Never (runtimectl brings a session back).
func Pod(namespace string, s engine.Spec, o Options) (*corev1.Pod, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	memory := s.Memory
	if memory <= 0 {
		memory = engine.DefaultMemory
	}
	tmp := s.TmpSize
	if tmp <= 0 {
		tmp = engine.DefaultTmpSize
	}
	if tmp >= memory {
		return nil, fmt.Errorf("session %q: /tmp (%d bytes) must be smaller than the memory limit (%d bytes), since it is held in memory", s.Session, tmp, memory)
	}
	if s.CPUs < 0 {
		return nil, advice.Errorf("session %q: %s must be positive", s.Session, advice.Words{Lib: "CPUs", CLI: "--cpus"})
	}
	eph := resource.MustParse(o.Ephemeral)
	mem := *resource.NewQuantity(memory, resource.BinarySI)
	limits := corev1.ResourceList{corev1.ResourceMemory: mem, corev1.ResourceEphemeralStorage: eph}
	cpuReq := resource.MustParse(DefaultCPURequest)
	if s.CPUs > 0 {
		limits[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(s.CPUs*1000+0.5), resource.DecimalSI)
		if lim := limits[corev1.ResourceCPU]; lim.Cmp(cpuReq) < 0 {
			cpuReq = lim
		}
	}
	requests := corev1.ResourceList{corev1.ResourceMemory: mem, corev1.ResourceCPU: cpuReq, corev1.ResourceEphemeralStorage: resource.MustParse("64Mi")}
	if eph.Cmp(requests[corev1.ResourceEphemeralStorage]) < 0 {
		requests[corev1.ResourceEphemeralStorage] = eph
	}

	env := []corev1.EnvVar{
		{Name: "RUNTIMECTL_SETTINGS", Value: s.Settings},
		{Name: "PAGER", Value: "cat"}, {Name: "GIT_TERMINAL_PROMPT", Value: "0"}, {Name: "DEBIAN_FRONTEND", Value: "noninteractive"},
	}
	for _, kv := range s.Env {
		k, v, ok := cut(kv)
		if !ok {
			return nil, fmt.Errorf("session %q: environment entry %q: use KEY=VALUE", s.Session, kv)
		}
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}

	no, yes := false, true
	root, user := int64(0), int64(SessionUID)
	grace := int64(GracePeriod)
	mounts := []corev1.VolumeMount{
		{Name: "workspace", MountPath: Workspace},
		{Name: "state", MountPath: StateDir},
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "run", MountPath: SocketDir},
	}
	tmpQ := resource.NewQuantity(tmp, resource.BinarySI)
	runQ := resource.MustParse("1Mi")
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: PodName(s.Session), Namespace: namespace,
			Labels:      podLabels(s),
			Annotations: map[string]string{AnnotationSession: s.Session},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			ShareProcessNamespace:         &yes,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  o.NodeSelector,
			Tolerations:                   o.Tolerations,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   &yes,
				RunAsUser:      &user,
				RunAsGroup:     &user,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				// No fsGroup: it would give the session user's group the state claim.
			},
			InitContainers: []corev1.Container{{
				Name:            InitName,
				Image:           s.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         []string{"/bin/sh", "-c", prepareScript},
				SecurityContext: &corev1.SecurityContext{
					RunAsUser: &root, RunAsGroup: &root, RunAsNonRoot: &no,
					AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, Privileged: &no,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN", "FOWNER"}},
				},
				Resources: corev1.ResourceRequirements{
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi"), corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Mi")},
					Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("32Mi"), corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Mi")},
				},
				VolumeMounts: mounts,
			}},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           s.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         AgentArgs(s.Lang),
				WorkingDir:      Workspace,
				Env:             env,
				SecurityContext: &corev1.SecurityContext{
					// The agent: root without the powers of root, to start the kernel as uid 1000.
					RunAsUser: &root, RunAsGroup: &root, RunAsNonRoot: &no,
					AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes, Privileged: &no,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"SETUID", "SETGID", "KILL"}},
				},
				Resources:    corev1.ResourceRequirements{Limits: limits, Requests: requests},
				VolumeMounts: mounts,
			}},
			Volumes: []corev1.Volume{
				{Name: "workspace", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: WorkspaceClaim(s.Session)}}},
				{Name: "state", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: StateClaim(s.Session)}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: tmpQ}}},
				{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &runQ}}},
			},
		},
	}
	if s.Runtime != "" {
		rc := s.Runtime
		pod.Spec.RuntimeClassName = &rc
	}
	for _, name := range o.PullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
	}
	return pod, nil
}

// podLabels are the session's labels and the spec's own (which cannot replace the session's).
func podLabels(s engine.Spec) map[string]string {
	l := sessionLabels(s.Session, s.Lang)
	for k, v := range s.Labels {
		if _, ok := l[k]; !ok {
			l[k] = v
		}
	}
	return l
}

// useClaims makes pod mount the pair of claims named volume (engine.Volume.Name) rather than
// its session's own names: a session claimed from a warm pool keeps its member's claims.
func useClaims(pod *corev1.Pod, volume string) {
	for i := range pod.Spec.Volumes {
		if c := pod.Spec.Volumes[i].PersistentVolumeClaim; c != nil {
			c.ClaimName = volume + "-" + pod.Spec.Volumes[i].Name
		}
	}
}

func cut(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], i > 0
		}
	}
	return "", "", false
}

// Claims maps a session to its two PersistentVolumeClaims: the workspace, and the runtime's own
// state (history, snapshots, session.json). The workspace claim carries the settings, as the
// volume's label does on Docker.
func Claims(namespace, session, lang, settings string, o Options) ([]*corev1.PersistentVolumeClaim, error) {
	o = o.withDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	mk := func(name, size, role string) *corev1.PersistentVolumeClaim {
		l := sessionLabels(session, lang)
		l[LabelRole] = role
		c := &corev1.PersistentVolumeClaim{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: namespace, Labels: l,
				Annotations: map[string]string{AnnotationSession: session},
			},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
			},
		}
		if o.StorageClass != "" {
			sc := o.StorageClass
			c.Spec.StorageClassName = &sc
		}
		return c
	}
	ws := mk(WorkspaceClaim(session), o.WorkspaceSize, RoleWorkspace)
	ws.Annotations[AnnotationSettings] = settings
	return []*corev1.PersistentVolumeClaim{ws, mk(StateClaim(session), o.StateSize, RoleState)}, nil
}

// The role label tells a session's two claims apart.
const (
	LabelRole     = "io.runtimectl.role"
	RoleWorkspace = "workspace"
	RoleState     = "state"
)

// Policy maps a session to the NetworkPolicy that denies all traffic to and from its pod (the
// default, --network none). It needs a network plugin that enforces NetworkPolicy.
func Policy(namespace, session, lang string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: metav1.ObjectMeta{
			Name: PolicyName(session), Namespace: namespace,
			Labels:      sessionLabels(session, lang),
			Annotations: map[string]string{AnnotationSession: session},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{contract.LabelSession: Key(session)}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			// No Ingress and no Egress rules: nothing in, nothing out.
		},
	}
}

// WantsNetwork reports whether a session asked for network ("bridge" on Docker): then no
// policy is made and the pod has the namespace's network.
func WantsNetwork(network string) bool { return network == "bridge" }
