package kube

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/seamtest"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

var provisionerOnce sync.Once

// sessionClient returns a session.Client on the local cluster through the seam
// (session.NewWithEngine), in a fresh namespace, with claims of the local storage class that
// the in-process local provisioner binds (as `make kube-up`'s does for the CLI).
func sessionClient(t *testing.T) (*session.Client, *Backend) {
	t.Helper()
	b := cluster(t)
	provisionerOnce.Do(func() {
		go RunLocalProvisioner(context.Background(), b.cs, LocalStorageClass, LocalVolumeDir, nil)
	})
	kb, err := New(Config{Kubeconfig: localKubeconfig, Namespace: b.ns, StartTimeout: 2 * time.Minute,
		Options: Options{StorageClass: LocalStorageClass, WorkspaceSize: "1Gi", StateSize: "100Mi"}})
	require.NoError(t, err)
	c := session.NewWithEngine(kb)
	t.Cleanup(func() { c.Close() })
	return c, kb
}

// kubeEnv is the local cluster for the backend-neutral tests (internal/seamtest), which the
// session package runs on Docker.
func kubeEnv(t *testing.T) (seamtest.Env, *Backend) {
	c, kb := sessionClient(t)
	return seamtest.Env{
		Client: c,
		Name:   func(t *testing.T) string { return "s-" + randHex(3) },
		Kill: func(t *testing.T, name string) {
			ctx := context.Background()
			zero := int64(0)
			require.NoError(t, kb.cs.CoreV1().Pods(kb.ns).Delete(ctx, PodName(name), metav1.DeleteOptions{GracePeriodSeconds: &zero}))
			require.Eventually(t, func() bool {
				_, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName(name), metav1.GetOptions{})
				return apierrors.IsNotFound(err)
			}, time.Minute, 100*time.Millisecond, "pod %s did not go", PodName(name))
		},
	}, kb
}

func TestBackendLifecycleOnKubernetes(t *testing.T) {
	e, _ := kubeEnv(t)
	seamtest.Lifecycle(t, e)
}

func TestBackendVerbsOnKubernetes(t *testing.T) {
	e, _ := kubeEnv(t)
	seamtest.Verbs(t, e)
}

// A warm pool on the cluster: a claim relabels the member's pod and claims, and every verb finds
// the session by its name (seamtest.Pools); here also what only Kubernetes has: the claimed
// session's pod keeps the member's name and no pool label, it is under the session's own
// NetworkPolicy and the member's is gone, and a pod made for it after a stop mounts the member's
// claims.
func TestBackendPoolsOnKubernetes(t *testing.T) {
	e, kb := kubeEnv(t)
	seamtest.Pools(t, e)

	c, ctx := e.Client, context.Background()
	l, _ := lang.Get("bash")
	pool := session.Pool{Name: "kp", Lang: "bash", Image: images.Ref(l), Memory: 200 << 20, Size: 1}
	require.NoError(t, c.SetPool(ctx, pool))
	cm, err := kb.cs.CoreV1().ConfigMaps(kb.ns).Get(ctx, PoolConfigMap("kp"), metav1.GetOptions{})
	require.NoError(t, err, "the pool's settings are a ConfigMap")
	assert.Contains(t, cm.Data["pool.json"], `"size":1`)
	_, _, err = c.FillPool(ctx, "kp")
	require.NoError(t, err)
	s, info, err := c.Start(ctx, session.Spec{Name: "from-pool", Lang: "bash", Image: images.Ref(l), Memory: 200 << 20})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "kp", info.Pool)
	seamtest.ExecOK(t, s, "y=7")
	pods, err := kb.cs.CoreV1().Pods(kb.ns).List(ctx, metav1.ListOptions{LabelSelector: "io.runtimectl.session=from-pool"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	p := pods.Items[0]
	assert.NotEqual(t, PodName("from-pool"), p.Name, "the member's pod, not a new one")
	assert.Equal(t, "from-pool", p.Annotations[AnnotationSession])
	assert.Empty(t, p.Labels["io.runtimectl.pool"], "the claimed pod still has its pool's label")
	_, err = kb.cs.NetworkingV1().NetworkPolicies(kb.ns).Get(ctx, PolicyName("from-pool"), metav1.GetOptions{})
	assert.NoError(t, err, "the claimed session has its own NetworkPolicy")
	member := strings.TrimPrefix(p.Name, "runtimectl-")
	_, err = kb.cs.NetworkingV1().NetworkPolicies(kb.ns).Get(ctx, "runtimectl-"+member, metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the member's NetworkPolicy is left: %v", err)

	s.Close()
	require.NoError(t, c.Stop(ctx, "from-pool"))
	s, _, err = c.Open(ctx, "from-pool")
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "7\n", seamtest.ExecOK(t, s, "echo $y").Stdout)
	np, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName("from-pool"), metav1.GetOptions{})
	require.NoError(t, err, "after a stop the session's pod has its own name")
	for _, v := range np.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			assert.Equal(t, "runtimectl-"+member+"-"+v.Name, v.PersistentVolumeClaim.ClaimName)
		}
	}
	s.Close()
	require.NoError(t, c.Remove(ctx, "from-pool", true))
	for _, claim := range []string{"runtimectl-" + member + "-workspace", "runtimectl-" + member + "-state"} {
		_, err := kb.cs.CoreV1().PersistentVolumeClaims(kb.ns).Get(ctx, claim, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "rm left claim %s", claim)
	}
	require.NoError(t, c.RemovePool(ctx, "kp"))
	_, err = kb.cs.CoreV1().ConfigMaps(kb.ns).Get(ctx, PoolConfigMap("kp"), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "pool rm left its ConfigMap")
}

// What only Kubernetes has, through the library: the workspace claim asks for --disk; stop
// deletes the pod and keeps both claims, and ls says stopped; a pod evicted through the
// Eviction API (what a drain does), and one the kubelet failed as evicted, come back on their
// claims; rm removes the claims.
func TestSessionClaimsAndEvictionOnKubernetes(t *testing.T) {
	c, kb := sessionClient(t)
	ctx := context.Background()
	l, _ := lang.Get("bash")
	s, _, err := c.Start(ctx, session.Spec{Name: "ev", Lang: "bash", Image: images.Ref(l), Memory: 256 << 20, Disk: 512 << 20})
	require.NoError(t, err)
	defer s.Close()
	claim, err := kb.cs.CoreV1().PersistentVolumeClaims(kb.ns).Get(ctx, WorkspaceClaim("ev"), metav1.GetOptions{})
	require.NoError(t, err)
	req := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	assert.Equal(t, int64(512<<20), req.Value(), "the workspace claim asks for the disk cap")
	seamtest.ExecOK(t, s, "x=1")
	s.Close()

	require.NoError(t, c.Stop(ctx, "ev"))
	_, err = kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName("ev"), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "stop deletes the pod")
	for _, claim := range []string{WorkspaceClaim("ev"), StateClaim("ev")} {
		_, err := kb.cs.CoreV1().PersistentVolumeClaims(kb.ns).Get(ctx, claim, metav1.GetOptions{})
		assert.NoError(t, err, "stop keeps claim %s", claim)
	}
	list, err := c.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, session.StateStopped, list[0].State)

	s, _, err = c.Open(ctx, "ev")
	require.NoError(t, err)
	s.Close()
	require.NoError(t, kb.cs.CoreV1().Pods(kb.ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: PodName("ev"), Namespace: kb.ns}}))
	require.Eventually(t, func() bool {
		_, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName("ev"), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "the evicted pod did not go")
	s, info, err := c.Open(ctx, "ev")
	require.NoError(t, err)
	assert.True(t, info.Recreate)
	assert.Equal(t, "1\n", seamtest.ExecOK(t, s, "echo $x").Stdout)
	s.Close()

	p, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName("ev"), metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "the node was low on memory (test)"
	_, err = kb.cs.CoreV1().Pods(kb.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		in, err := kb.Inspect(ctx, "ev")
		return err == nil && !in.Running
	}, time.Minute, 100*time.Millisecond, "the pod is not seen as ended")
	s, _, err = c.Open(ctx, "ev")
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "1\n", seamtest.ExecOK(t, s, "echo $x").Stdout)

	require.NoError(t, c.Remove(ctx, "ev", true))
	for _, claim := range []string{WorkspaceClaim("ev"), StateClaim("ev")} {
		_, err := kb.cs.CoreV1().PersistentVolumeClaims(kb.ns).Get(ctx, claim, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "rm removes claim %s", claim)
	}
}

// The CLI on the cluster, the scenario as an agent types it: --backend kubernetes with
// --kubeconfig and --namespace; a pandas DataFrame; the pod deleted behind runtimectl's back
// (the next exec brings it back and says so on stderr); ls; RUNTIMECTL_BACKEND for stop; rm.
func TestCLIOnKubernetes(t *testing.T) {
	_, kb := sessionClient(t)
	var refs []string // every language's image, for doctor's check of the nodes
	for _, n := range lang.Names() {
		l, _ := lang.Get(n)
		refs = append(refs, images.Ref(l))
	}
	if out, err := exec.Command("bash", append([]string{scriptPath("import.sh")}, refs...)...).CombinedOutput(); err != nil {
		t.Fatalf("import the images: %v\n%s", err, out)
	}
	// The kubelet reports a node's images in its status at its next sync (every 10 s): doctor,
	// below, reads them there.
	require.Eventually(t, func() bool {
		on, nodes, err := kb.ImagesOnNodes(context.Background(), refs)
		if err != nil || nodes == 0 {
			return false
		}
		for _, r := range refs {
			if on[r] < nodes {
				return false
			}
		}
		return true
	}, 2*time.Minute, time.Second, "the node does not report the imported images")
	bin := filepath.Join(t.TempDir(), "runtimectl")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/runtimectl").CombinedOutput()
	require.NoError(t, err, "%s", out)
	run := func(env string, args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"--kubeconfig", localKubeconfig, "--namespace", kb.ns}, args...)...)
		cmd.Env = append(os.Environ(), "RUNTIMECTL_KUBE_STORAGE_CLASS="+LocalStorageClass, env)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "runtimectl %v: %s%s", args, stdout.String(), stderr.String())
		return stdout.String(), stderr.String()
	}
	k := "RUNTIMECTL_BACKEND=kubernetes"
	run("", "--backend", "kubernetes", "session", "start", "s", "--memory", "1g", "--cpus", "1")
	run("", "--backend", "kubernetes", "session", "exec", "s", `import pandas as pd; df = pd.DataFrame({"a": [1, 2]})`)
	zero := int64(0)
	ctx := context.Background()
	require.NoError(t, kb.cs.CoreV1().Pods(kb.ns).Delete(ctx, PodName("s"), metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	require.Eventually(t, func() bool {
		_, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName("s"), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond)
	stdout, stderr := run("", "--backend", "kubernetes", "session", "exec", "s", "df.a.sum()")
	assert.Equal(t, "3\n", stdout)
	assert.Contains(t, stderr, "started it again and restored snapshot", "brought back, and said so")
	stdout, _ = run(k, "session", "ls")
	assert.Contains(t, stdout, "running")
	stdout, _ = run(k, "session", "inspect", "s")
	assert.Contains(t, stdout, `"backend": "kubernetes"`)
	stdout, _ = run(k, "session", "logs", "s")
	assert.NotContains(t, stdout, "DataFrame", "the agent's log, not the code's output")
	run(k, "session", "stop", "s")
	stdout, _ = run(k, "session", "ls")
	assert.Contains(t, stdout, "stopped")
	stdout, _ = run(k, "kube", "rbac")
	assert.Contains(t, stdout, "pods/exec")
	stdout, _ = run(k, "doctor")
	assert.Contains(t, stdout, "OK    permissions")
	py, _ := lang.Get("python")
	assert.Contains(t, stdout, "OK    image "+images.Ref(py)+": on all 1 nodes") // runtimectl/python:latest, or RUNTIMECTL_IMAGE_TAG's
	run(k, "session", "rm", "-f", "s")
	stdout, _ = run(k, "session", "ls", "-q")
	assert.NotContains(t, stdout, "s\n")
	// A warm pool through the CLI: `pool set` fills it, a start with its settings takes the
	// member (its pod keeps the member's name), and the detached refill (`pool fill`, given the
	// command's --kubeconfig and --namespace) makes a new one.
	run(k, "pool", "set", "kp", "--lang", "bash", "--size", "1", "--memory", "200m")
	stdout, _ = run(k, "pool", "ls", "--json")
	assert.Contains(t, stdout, `"ready": 1`)
	run(k, "session", "start", "fp", "--lang", "bash", "--memory", "200m")
	pods, err := kb.cs.CoreV1().Pods(kb.ns).List(ctx, metav1.ListOptions{LabelSelector: "io.runtimectl.session=fp"})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	assert.NotEqual(t, PodName("fp"), pods.Items[0].Name, "the start was not served from the pool")
	stdout, _ = run(k, "session", "exec", "fp", "echo from-pool")
	assert.Equal(t, "from-pool\n", stdout)
	require.Eventually(t, func() bool {
		stdout, _ := run(k, "pool", "ls", "--json")
		return strings.Contains(stdout, `"ready": 1`)
	}, 2*time.Minute, time.Second, "the detached refill did not make a member")
	run(k, "session", "rm", "-f", "fp")
	run(k, "pool", "rm", "kp")
	stdout, _ = run(k, "pool", "ls")
	assert.NotContains(t, stdout, "kp")
}

// An unreachable cluster is exit 125 with the kubeconfig's server named.
func TestCLIUnreachableClusterNamesTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI (skipped under -short)")
	}
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	require.NoError(t, os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: agents}}]
current-context: c
`), 0o600))
	bin := filepath.Join(dir, "runtimectl")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/runtimectl").CombinedOutput()
	require.NoError(t, err, "%s", out)
	cmd := exec.Command(bin, "--backend", "kubernetes", "--kubeconfig", kc, "session", "ls")
	out, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "%s", out)
	assert.Equal(t, 125, ee.ExitCode())
	assert.Contains(t, string(out), "https://127.0.0.1:1")
}

// A session whose image the cluster cannot pull: start fails at once with the image named
// (ErrNoImage, as a missing image on Docker), and leaves no pod or claim behind.
func TestSessionWithAnUnpullableImage(t *testing.T) {
	c, kb := sessionClient(t)
	ctx := context.Background()
	_, _, err := c.Start(ctx, session.Spec{Name: "nopull", Lang: "bash", Image: "runtimectl/no-such-image:nope", Memory: 256 << 20})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "runtimectl/no-such-image:nope")
	assert.NotContains(t, err.Error(), "\n")
	_, err = kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName("nopull"), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no pod left: %v", err)
	_, err = kb.cs.CoreV1().PersistentVolumeClaims(kb.ns).Get(ctx, WorkspaceClaim("nopull"), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "no claim left: %v", err)
}
