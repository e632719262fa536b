package kube

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
)

func spec(name string) engine.Spec {
	return engine.Spec{Session: name, Lang: "bash", Image: "runtimectl/bash:test", Settings: `{"session":"` + name + `"}`}
}

func mustPod(t *testing.T, s engine.Spec, o Options) *corev1.Pod {
	t.Helper()
	p, err := Pod("agents", s, o)
	require.NoError(t, err)
	return p
}

// Every session name that session.ValidateName accepts maps to names Kubernetes accepts, and
// two names never share a key.
func TestKeyIsAValidNameAndLabelForEverySessionName(t *testing.T) {
	names := []string{"a", "demo", "my-session", "A", "a_b", "a-b", "a.b", "a..b", "x_", "x.", "x-", "0",
		strings.Repeat("a", 63), strings.Repeat("b", 52), strings.Repeat("c", 53), strings.Repeat("_", 1) + "z", "Upper_Case.Name"}
	seen := map[string]string{}
	for _, n := range names {
		k := Key(n)
		assert.Empty(t, validation.IsDNS1123Label(k), "key %q of %q", k, n)
		assert.Empty(t, validation.IsValidLabelValue(k), "key %q of %q", k, n)
		for _, obj := range []string{PodName(n), WorkspaceClaim(n), StateClaim(n), PolicyName(n)} {
			assert.Empty(t, validation.IsDNS1123Subdomain(obj), "object name %q of %q", obj, n)
		}
		assert.LessOrEqual(t, len(PodName(n)), 63, "the pod name is its hostname: %q", PodName(n))
		if other, ok := seen[k]; ok {
			t.Errorf("%q and %q share key %q", n, other, k)
		}
		seen[k] = n
	}
	assert.Equal(t, "demo", Key("demo"), "a name that is already a DNS label is kept")
	assert.Equal(t, "runtimectl-demo", PodName("demo"), "as the container is named on Docker")
	assert.Equal(t, "runtimectl-demo-workspace", WorkspaceClaim("demo"))
	assert.Equal(t, "runtimectl-demo-state", StateClaim("demo"))
	assert.Regexp(t, `^a-b-[0-9a-f]{8}$`, Key("a_b"))
	assert.Equal(t, Key("a_b"), Key("a_b"), "stable")
}

// The pod carries the labels of a Docker session container, and the exact name in an
// annotation.
func TestPodLabelsAsOnDocker(t *testing.T) {
	p := mustPod(t, spec("a_b"), Options{})
	assert.Equal(t, "runtimectl-"+Key("a_b"), p.Name)
	assert.Equal(t, "agents", p.Namespace)
	assert.Equal(t, map[string]string{contract.LabelSession: Key("a_b"), contract.LabelLang: "bash", contract.LabelSchema: contract.LabelsSchema}, p.Labels)
	assert.Equal(t, "a_b", p.Annotations[AnnotationSession])
}

// A spec's own labels (a warm pool member's) are added; they cannot replace the session's.
func TestPodAddsTheSpecsLabels(t *testing.T) {
	s := spec("m")
	s.Labels = map[string]string{contract.LabelPool: "py", contract.LabelSession: "other"}
	p := mustPod(t, s, Options{})
	assert.Equal(t, "py", p.Labels[contract.LabelPool])
	assert.Equal(t, Key("m"), p.Labels[contract.LabelSession])
}

// A pod of a session claimed from a warm pool mounts the member's claims.
func TestPodOfAClaimedSessionMountsTheMembersClaims(t *testing.T) {
	p := mustPod(t, spec("s"), Options{})
	useClaims(p, "runtimectl-pool-py-1")
	claims := map[string]string{}
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.Name] = v.PersistentVolumeClaim.ClaimName
		}
	}
	assert.Equal(t, map[string]string{"workspace": "runtimectl-pool-py-1-workspace", "state": "runtimectl-pool-py-1-state"}, claims)
}

// The agent is the main process, with the flags that put its state on the state claim.
func TestPodRunsTheAgentAsItsMainProcess(t *testing.T) {
	p := mustPod(t, spec("s"), Options{})
	require.Len(t, p.Spec.Containers, 1)
	c := p.Spec.Containers[0]
	assert.Equal(t, ContainerName, c.Name)
	assert.Equal(t, []string{"/usr/local/bin/runtime-agent", "serve", "--lang", "bash", "--state", StateDir, "--workdir", "/workspace", "--uid", "1000"}, c.Command)
	assert.Empty(t, c.Args)
	assert.Equal(t, "/workspace", c.WorkingDir)
	assert.Equal(t, "runtimectl/bash:test", c.Image)
	assert.Equal(t, []string{"/usr/local/bin/runtime-agent", "connect"}, ConnectArgs)
	assert.False(t, c.Stdin || c.TTY, "the agent's stdio carries nothing: clients use the exec relay")
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	assert.Equal(t, `{"session":"s"}`, env["RUNTIMECTL_SETTINGS"])
	assert.Equal(t, "cat", env["PAGER"])
	assert.Equal(t, corev1.RestartPolicyNever, p.Spec.RestartPolicy, "runtimectl brings a session back itself, from its snapshot")
	require.NotNil(t, p.Spec.ShareProcessNamespace)
	assert.True(t, *p.Spec.ShareProcessNamespace, "the pause process is PID 1 and reaps orphans, as tini does on Docker")
}

func TestPodPassesTheSessionEnvironment(t *testing.T) {
	s := spec("s")
	s.Env = []string{"A=1", "B=x=y", "C="}
	c := mustPod(t, s, Options{}).Spec.Containers[0]
	got := map[string]string{}
	for _, e := range c.Env {
		got[e.Name] = e.Value
	}
	assert.Equal(t, "1", got["A"])
	assert.Equal(t, "x=y", got["B"])
	v, ok := got["C"]
	assert.True(t, ok)
	assert.Empty(t, v)

	s.Env = []string{"NOEQUALS"}
	_, err := Pod("ns", s, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "use KEY=VALUE")
}

// The hardening the issue lists, read back from the spec.
func TestPodHardening(t *testing.T) {
	p := mustPod(t, spec("s"), Options{})
	ps := p.Spec
	require.NotNil(t, ps.AutomountServiceAccountToken)
	assert.False(t, *ps.AutomountServiceAccountToken, "no service account token in the pod")
	require.NotNil(t, ps.EnableServiceLinks)
	assert.False(t, *ps.EnableServiceLinks)
	assert.False(t, ps.HostNetwork || ps.HostPID || ps.HostIPC)
	require.NotNil(t, ps.SecurityContext)
	require.NotNil(t, ps.SecurityContext.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, ps.SecurityContext.SeccompProfile.Type)
	require.NotNil(t, ps.SecurityContext.RunAsNonRoot)
	assert.True(t, *ps.SecurityContext.RunAsNonRoot, "non-root unless a container says why")
	assert.Equal(t, int64(1000), *ps.SecurityContext.RunAsUser)
	assert.Nil(t, ps.SecurityContext.FSGroup, "an fsGroup would open the state claim to the session user")

	c := ps.Containers[0]
	sc := c.SecurityContext
	require.NotNil(t, sc)
	assert.False(t, *sc.AllowPrivilegeEscalation)
	assert.True(t, *sc.ReadOnlyRootFilesystem)
	assert.False(t, *sc.Privileged)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.ElementsMatch(t, []corev1.Capability{"SETUID", "SETGID", "KILL"}, sc.Capabilities.Add, "only what the agent needs")
	assert.Equal(t, int64(0), *sc.RunAsUser, "the agent is root without root's powers; it runs the kernel as uid 1000")
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)

	require.Len(t, ps.InitContainers, 1)
	ic := ps.InitContainers[0]
	assert.Equal(t, InitName, ic.Name)
	assert.Equal(t, c.Image, ic.Image, "no second image to pull")
	assert.False(t, *ic.SecurityContext.AllowPrivilegeEscalation)
	assert.True(t, *ic.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, []corev1.Capability{"ALL"}, ic.SecurityContext.Capabilities.Drop)
	assert.ElementsMatch(t, []corev1.Capability{"CHOWN", "FOWNER"}, ic.SecurityContext.Capabilities.Add)
	assert.Contains(t, ic.Command[2], "chmod 0700 "+StateDir)
	assert.Contains(t, ic.Command[2], "chmod 1777 /tmp")
	assert.Contains(t, ic.Command[2], "chmod 0700 "+SocketDir)
	assert.NotContains(t, ic.Command[2], "-R", "never walks the workspace")
}

func TestPodVolumes(t *testing.T) {
	s := spec("s")
	s.TmpSize = 64 << 20
	p := mustPod(t, s, Options{})
	vols := map[string]corev1.Volume{}
	for _, v := range p.Spec.Volumes {
		vols[v.Name] = v
	}
	require.NotNil(t, vols["workspace"].PersistentVolumeClaim)
	assert.Equal(t, "runtimectl-s-workspace", vols["workspace"].PersistentVolumeClaim.ClaimName)
	require.NotNil(t, vols["state"].PersistentVolumeClaim)
	assert.Equal(t, "runtimectl-s-state", vols["state"].PersistentVolumeClaim.ClaimName)
	tmp := vols["tmp"].EmptyDir
	require.NotNil(t, tmp)
	assert.Equal(t, corev1.StorageMediumMemory, tmp.Medium)
	assert.Equal(t, int64(64<<20), tmp.SizeLimit.Value(), "/tmp is size-limited")
	run := vols["run"].EmptyDir
	require.NotNil(t, run)
	assert.Equal(t, corev1.StorageMediumMemory, run.Medium)
	assert.Equal(t, int64(1<<20), run.SizeLimit.Value())

	mounts := map[string]string{}
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		mounts[m.MountPath] = m.Name
		assert.False(t, m.ReadOnly && m.Name != "", "session mounts are writable")
	}
	assert.Equal(t, map[string]string{"/workspace": "workspace", StateDir: "state", "/tmp": "tmp", SocketDir: "run"}, mounts)
	assert.Equal(t, p.Spec.Containers[0].VolumeMounts, p.Spec.InitContainers[0].VolumeMounts, "the init container prepares the same mounts")
	assert.False(t, strings.HasPrefix(StateDir, "/workspace/"), "the state is outside anything the session user owns")
}

func TestPodLimits(t *testing.T) {
	s := spec("s")
	s.Memory = 1 << 30
	s.CPUs = 1.5
	c := mustPod(t, s, Options{Ephemeral: "2Gi"}).Spec.Containers[0]
	lim, req := c.Resources.Limits, c.Resources.Requests
	assert.Equal(t, int64(1<<30), lim.Memory().Value())
	assert.Equal(t, int64(1<<30), req.Memory().Value(), "memory requested as limited: sessions are placed by memory")
	assert.Equal(t, int64(1500), lim.Cpu().MilliValue())
	assert.Equal(t, int64(100), req.Cpu().MilliValue())
	assert.Equal(t, resource.MustParse("2Gi"), lim[corev1.ResourceEphemeralStorage])
	assert.Contains(t, req, corev1.ResourceEphemeralStorage)

	c = mustPod(t, spec("d"), Options{}).Spec.Containers[0]
	assert.Equal(t, int64(containers.DefaultMemory), c.Resources.Limits.Memory().Value(), "the Docker default")
	_, hasCPU := c.Resources.Limits[corev1.ResourceCPU]
	assert.False(t, hasCPU, "no --cpus, no CPU limit, as on Docker")
	assert.Equal(t, resource.MustParse(DefaultEphemeral), c.Resources.Limits[corev1.ResourceEphemeralStorage])

	s.CPUs = 0.05
	c = mustPod(t, s, Options{}).Spec.Containers[0]
	assert.Equal(t, int64(50), c.Resources.Requests.Cpu().MilliValue(), "a request never exceeds its limit")
}

func TestPodRefusesBadInput(t *testing.T) {
	s := spec("s")
	s.Memory, s.TmpSize = 64<<20, 64<<20
	_, err := Pod("ns", s, Options{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "smaller than the memory limit")

	s = spec("s")
	s.CPUs = -1
	_, err = Pod("ns", s, Options{})
	require.Error(t, err)

	_, err = Pod("ns", spec("s"), Options{WorkspaceSize: "ten gigs"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `workspace size "ten gigs" is not a Kubernetes quantity`)
	assert.NotContains(t, err.Error(), "\n")
}

func TestPodOptions(t *testing.T) {
	s := spec("s")
	s.Runtime = "gvisor"
	p := mustPod(t, s, Options{PullSecrets: []string{"regcred"}, NodeSelector: map[string]string{"pool": "sessions"},
		Tolerations: []corev1.Toleration{{Key: "sessions", Operator: corev1.TolerationOpExists}}})
	require.NotNil(t, p.Spec.RuntimeClassName)
	assert.Equal(t, "gvisor", *p.Spec.RuntimeClassName)
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "regcred"}}, p.Spec.ImagePullSecrets)
	assert.Equal(t, "sessions", p.Spec.NodeSelector["pool"])
	assert.Len(t, p.Spec.Tolerations, 1)
	assert.Nil(t, mustPod(t, spec("s"), Options{}).Spec.RuntimeClassName)
}

func TestClaims(t *testing.T) {
	cs, err := Claims("agents", "a_b", "python", `{"x":1}`, Options{StorageClass: "fast", WorkspaceSize: "5Gi"})
	require.NoError(t, err)
	require.Len(t, cs, 2)
	ws, st := cs[0], cs[1]
	assert.Equal(t, WorkspaceClaim("a_b"), ws.Name)
	assert.Equal(t, StateClaim("a_b"), st.Name)
	for _, c := range cs {
		assert.Equal(t, "agents", c.Namespace)
		assert.Equal(t, "a_b", c.Annotations[AnnotationSession])
		assert.Equal(t, Key("a_b"), c.Labels[contract.LabelSession])
		assert.Equal(t, "python", c.Labels[contract.LabelLang])
		assert.Equal(t, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, c.Spec.AccessModes)
		require.NotNil(t, c.Spec.StorageClassName)
		assert.Equal(t, "fast", *c.Spec.StorageClassName)
	}
	assert.Equal(t, `{"x":1}`, ws.Annotations[AnnotationSettings], "the settings travel with the workspace claim")
	assert.NotContains(t, st.Annotations, AnnotationSettings)
	assert.Equal(t, RoleWorkspace, ws.Labels[LabelRole])
	assert.Equal(t, RoleState, st.Labels[LabelRole])
	assert.Equal(t, resource.MustParse("5Gi"), ws.Spec.Resources.Requests[corev1.ResourceStorage])
	assert.Equal(t, resource.MustParse(DefaultStateSize), st.Spec.Resources.Requests[corev1.ResourceStorage])

	cs, err = Claims("ns", "s", "bash", "{}", Options{})
	require.NoError(t, err)
	assert.Nil(t, cs[0].Spec.StorageClassName, "no class: the cluster's default")
}

func TestPolicyDeniesAllTraffic(t *testing.T) {
	np := Policy("agents", "a_b", "bash")
	assert.Equal(t, PolicyName("a_b"), np.Name)
	assert.Equal(t, map[string]string{contract.LabelSession: Key("a_b")}, np.Spec.PodSelector.MatchLabels,
		"selects exactly the session's pod")
	assert.ElementsMatch(t, []string{"Ingress", "Egress"}, []string{string(np.Spec.PolicyTypes[0]), string(np.Spec.PolicyTypes[1])})
	assert.Empty(t, np.Spec.Ingress, "no rule: nothing comes in")
	assert.Empty(t, np.Spec.Egress, "no rule: nothing goes out")
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	require.NoError(t, err)
	assert.True(t, sel.Matches(labels.Set(mustPod(t, spec("a_b"), Options{}).Labels)))
	assert.False(t, sel.Matches(labels.Set(mustPod(t, spec("a-b"), Options{}).Labels)))
	assert.True(t, WantsNetwork("bridge"))
	assert.False(t, WantsNetwork("none"))
	assert.False(t, WantsNetwork(""))
}

func waiting(name, reason, msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Image: "img:1", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

func podWith(phase corev1.PodPhase, init []corev1.ContainerStatus, main ...corev1.ContainerStatus) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "runtimectl-s"},
		Status: corev1.PodStatus{Phase: phase, InitContainerStatuses: init, ContainerStatuses: main}}
}

// A pod whose image cannot be pulled is an error at once, not a wait; so is a container that
// cannot be created; a pod that only waits says why.
func TestPodProgress(t *testing.T) {
	running := corev1.ContainerStatus{Name: ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	initDone := corev1.ContainerStatus{Name: InitName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		done    bool
		why     string
		err     string
		isImage bool
	}{
		{name: "running", pod: podWith(corev1.PodRunning, []corev1.ContainerStatus{initDone}, running), done: true},
		{name: "pull failed", pod: podWith(corev1.PodPending, []corev1.ContainerStatus{waiting(InitName, "ErrImagePull", "failed to resolve reference\nmore")}),
			err: "the cluster cannot pull image img:1 (ErrImagePull: failed to resolve reference)", isImage: true},
		{name: "pull back-off", pod: podWith(corev1.PodPending, nil, waiting(ContainerName, "ImagePullBackOff", "Back-off")), err: "ImagePullBackOff", isImage: true},
		{name: "bad name", pod: podWith(corev1.PodPending, nil, waiting(ContainerName, "InvalidImageName", "")), err: "InvalidImageName", isImage: true},
		{name: "config error", pod: podWith(corev1.PodPending, nil, waiting(ContainerName, "CreateContainerConfigError", "secret x not found")), err: "cannot start (CreateContainerConfigError: secret x not found)"},
		{name: "init failed", pod: podWith(corev1.PodPending, []corev1.ContainerStatus{{Name: InitName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}),
			err: "container prepare of pod runtimectl-s ended (Error, exit code 1)"},
		{name: "agent exited", pod: podWith(corev1.PodFailed, nil, corev1.ContainerStatus{Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}),
			err: "OOMKilled, exit code 137"},
		{name: "evicted", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}},
			err: "pod p has ended (Failed: Evicted low on memory)"},
		{name: "unschedulable", pod: &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes: insufficient memory"}}}},
			why: "not scheduled: Unschedulable: 0/3 nodes: insufficient memory"},
		{name: "creating", pod: podWith(corev1.PodPending, []corev1.ContainerStatus{initDone}, waiting(ContainerName, "ContainerCreating", "")), why: "agent ContainerCreating"},
		{name: "nothing yet", pod: podWith(corev1.PodPending, nil), why: "Pending"},
		{name: "deleting", pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", DeletionTimestamp: &metav1.Time{Time: time.Now()}}}, err: "being deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done, why, err := podProgress(tc.pod)
			assert.Equal(t, tc.done, done)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.NotContains(t, err.Error(), "\n")
				assert.Equal(t, tc.isImage, errors.Is(err, engine.ErrImage))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.why, why)
		})
	}
}

func TestInfoFromPod(t *testing.T) {
	p := mustPod(t, spec("a_b"), Options{})
	p.UID = "uid-1"
	p.Spec.NodeName = "node-1"
	started := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}}
	in := info(p)
	assert.Equal(t, engine.Info{ID: "uid-1", Name: PodName("a_b"), Session: "a_b", Lang: "bash", Image: "runtimectl/bash:test",
		State: engine.StateRunning, Running: true, StartedAt: started.Time, Labels: p.Labels, Node: "node-1", StateMounted: true}, in)

	p.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{
		{Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}}}}}
	in = info(p)
	assert.Equal(t, engine.State("exited"), in.State)
	assert.False(t, in.Running)
	assert.True(t, in.OOMKilled)
	assert.Equal(t, 137, in.ExitCode)

	p.Status = corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted"}
	assert.Equal(t, engine.State("evicted"), info(p).State)
	p.Status = corev1.PodStatus{Phase: corev1.PodPending}
	assert.Equal(t, engine.State("pending"), info(p).State)
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
		{Name: ContainerName, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	in = info(p)
	assert.Equal(t, engine.State("terminating"), in.State)
	assert.False(t, in.Running, "a pod being deleted takes no new stream")
}

func TestCopyCommandsRunAsTheSessionUserOutsideTheState(t *testing.T) {
	assert.Equal(t, []string{"setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", "--", "tar", "x"}, asUser("/workspace/a", "tar", "x"))
	assert.Equal(t, []string{"tar", "x"}, asUser(StateDir+"/history.jsonl", "tar", "x"), "the state is root's")
	assert.Equal(t, []string{"tar", "x"}, asUser(StateDir, "tar", "x"))
	assert.Equal(t, "setpriv", asUser(StateDir+"x", "tar")[0], "a sibling of the state folder is not the state")
	assert.Error(t, checkPath("relative"))
	assert.Error(t, checkPath("/workspace/../etc"))
	assert.NoError(t, checkPath("/workspace/a"))
}

func TestParseStat(t *testing.T) {
	pi, err := parseStat("directory|4096\n")
	require.NoError(t, err)
	assert.Equal(t, engine.PathInfo{Exists: true, IsDir: true, Size: 4096}, pi)
	pi, err = parseStat("regular file|12")
	require.NoError(t, err)
	assert.Equal(t, engine.PathInfo{Exists: true, Size: 12}, pi)
	pi, err = parseStat("regular empty file|0")
	require.NoError(t, err)
	assert.Equal(t, engine.PathInfo{Exists: true}, pi)
	_, err = parseStat("garbage")
	assert.Error(t, err)
}

// A cluster that does not answer is engine.ErrUnreachable, naming the kubeconfig's server and
// the kubeconfig. Nothing listens on port 1: no cluster needed.
func TestUnreachableClusterNamesTheServer(t *testing.T) {
	kc := filepath.Join(t.TempDir(), "config")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: agents}}]
current-context: x
`), 0o600))
	b, err := New(Config{Kubeconfig: kc, CallTimeout: 5 * time.Second})
	require.NoError(t, err)
	assert.Equal(t, "agents", b.Namespace(), "the context's namespace")
	assert.Equal(t, "https://127.0.0.1:1 (namespace agents)", b.Host())
	ctx := context.Background()
	_, err = b.Ping(ctx)
	require.ErrorIs(t, err, engine.ErrUnreachable)
	assert.Contains(t, err.Error(), "the Kubernetes API server https://127.0.0.1:1 (from kubeconfig "+kc+") does not answer")
	assert.Contains(t, err.Error(), "connection refused")
	assert.NotContains(t, err.Error(), "\n")
	_, err = b.Inspect(ctx, "s")
	assert.ErrorIs(t, err, engine.ErrUnreachable)
	_, err = b.Storage().List(ctx, false)
	assert.ErrorIs(t, err, engine.ErrUnreachable)

	b, err = New(Config{Kubeconfig: kc, Namespace: "other"})
	require.NoError(t, err)
	assert.Equal(t, "other", b.Namespace(), "--namespace wins over the context's")
}

func TestNoKubeconfigSaysWhatToSet(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	_, err := New(Config{})
	require.ErrorIs(t, err, engine.ErrUnreachable)
	assert.Contains(t, err.Error(), "set KUBECONFIG or Config.Kubeconfig")
	assert.Contains(t, advice.CLI(err), "set KUBECONFIG or --kubeconfig")

	_, err = New(Config{Kubeconfig: filepath.Join(t.TempDir(), "nope")})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nope")
	assert.Regexp(t, regexp.MustCompile(`no such file|does not exist`), err.Error())
}

func TestNormalizeRefAsNodesReportIt(t *testing.T) {
	for in, want := range map[string]string{
		"runtimectl/python:latest":        "docker.io/runtimectl/python:latest",
		"runtimectl/python":               "docker.io/runtimectl/python:latest",
		"python:3":                        "docker.io/library/python:3",
		"registry.example.com:5000/rt/py": "registry.example.com:5000/rt/py:latest",
		"localhost/rt/py:1":               "localhost/rt/py:1",
		"docker.io/runtimectl/bash:v1":    "docker.io/runtimectl/bash:v1",
		"runtimectl/python@sha256:abc":    "docker.io/runtimectl/python@sha256:abc",
	} {
		assert.Equal(t, want, normalizeRef(in), in)
	}
}
