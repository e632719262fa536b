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
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

var provisionerOnce sync.Once

// sessionClient returns a session.Client on the local cluster through the seam
// (session.NewWithBackend), in a fresh namespace, with claims of the local storage class that
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
	c := session.NewWithBackend(kb.Session())
	t.Cleanup(func() { c.Close() })
	return c, kb
}

func execOK(t *testing.T, s *session.Session, code string) *session.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := s.Exec(ctx, code, session.ExecOptions{})
	require.NoError(t, err, code)
	require.Equal(t, "ok", string(r.Status), "%s: %s %s", code, r.Stderr, r.Message)
	return r
}

// The scenario through the session library, on the cluster: start, state, the pod
// deleted behind runtimectl's back (the next exec brings it back on the same claims, with its
// state, and says so), ls, stop (the pod goes, the claims stay), start again, history and
// snapshots, cp in and out, rm (claims gone).
func TestSessionLibraryOnKubernetes(t *testing.T) {
	c, kb := sessionClient(t)
	ctx := context.Background()
	l, _ := lang.Get("bash")
	s, info, err := c.Start(ctx, session.Spec{Name: "life", Lang: "bash", Image: images.Ref(l), Memory: 256 << 20, Disk: 512 << 20})
	require.NoError(t, err)
	defer s.Close()
	assert.True(t, info.Created)
	claim, err := kb.cs.CoreV1().PersistentVolumeClaims(kb.ns).Get(ctx, WorkspaceClaim("life"), metav1.GetOptions{})
	require.NoError(t, err)
	req := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	assert.Equal(t, int64(512<<20), req.Value(), "the workspace claim asks for the disk cap")
	execOK(t, s, "x=41; arr=(a b)")
	s.Close() // as a command's handle ends; the next command opens its own

	// The pod is deleted behind runtimectl's back; its claims stay.
	zero := int64(0)
	require.NoError(t, kb.cs.CoreV1().Pods(kb.ns).Delete(ctx, PodName("life"), metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	require.Eventually(t, func() bool {
		_, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName("life"), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond)
	s, info, err = c.Open(ctx, "life")
	require.NoError(t, err)
	defer s.Close()
	assert.True(t, info.Recreate, "the pod is made again from the claims' settings")
	var notices []string
	r, err := s.Exec(ctx, `echo $((x + 1)) ${arr[1]}`, session.ExecOptions{OnNotice: func(m string) { notices = append(notices, m) }})
	require.NoError(t, err)
	assert.Equal(t, "42 b\n", r.Stdout, "the state came back on a new pod")
	require.NotEmpty(t, notices, "the caller is told the session was brought back")
	assert.Contains(t, notices[0], "restored")

	list, err := c.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "life", list[0].Name)
	assert.Equal(t, "running", list[0].State)

	// cp in and out, with the same code as on Docker.
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.txt"), []byte("from the host\n"), 0o644))
	require.NoError(t, c.CopyTo(ctx, "life", filepath.Join(dir, "in.txt"), "/workspace/in.txt"))
	execOK(t, s, "cat /workspace/in.txt > /workspace/out.txt; echo more >> /workspace/out.txt")
	require.NoError(t, c.CopyFrom(ctx, "life", "/workspace/out.txt", filepath.Join(dir, "out.txt")))
	got, err := os.ReadFile(filepath.Join(dir, "out.txt"))
	require.NoError(t, err)
	assert.Equal(t, "from the host\nmore\n", string(got))

	// stop: a snapshot, the pod deleted, the claims kept.
	require.NoError(t, c.Stop(ctx, "life"))
	_, err = kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName("life"), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "stop deletes the pod")
	for _, claim := range []string{WorkspaceClaim("life"), StateClaim("life")} {
		_, err := kb.cs.CoreV1().PersistentVolumeClaims(kb.ns).Get(ctx, claim, metav1.GetOptions{})
		assert.NoError(t, err, "stop keeps claim %s", claim)
	}
	list, err = c.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "stopped", list[0].State)

	s2, info, err := c.Start(ctx, session.Spec{Name: "life"})
	require.NoError(t, err)
	defer s2.Close()
	assert.True(t, info.Recreate, "the pod is made again from the claims' settings")
	r = execOK(t, s2, `echo $x ${arr[0]}`)
	assert.Equal(t, "41 a\n", r.Stdout)

	h, _, err := c.History(ctx, "life")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(h), 4)
	assert.Equal(t, "x=41; arr=(a b)", h[0].Code)
	snaps, err := c.Snapshots(ctx, "life")
	require.NoError(t, err)
	assert.NotEmpty(t, snaps)

	require.NoError(t, c.Remove(ctx, "life", true))
	for _, claim := range []string{WorkspaceClaim("life"), StateClaim("life")} {
		_, err := kb.cs.CoreV1().PersistentVolumeClaims(kb.ns).Get(ctx, claim, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "rm removes claim %s", claim)
	}
	list, err = c.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
}

// The CLI on the cluster, the scenario as an agent types it: --backend kubernetes with
// --kubeconfig and --namespace; a pandas DataFrame; the pod deleted behind runtimectl's back
// (the next exec brings it back and says so on stderr); ls; RUNTIMECTL_BACKEND for stop; rm.
func TestCLIOnKubernetes(t *testing.T) {
	_, kb := sessionClient(t)
	l, _ := lang.Get("python")
	if out, err := exec.Command("bash", scriptPath("import.sh"), images.Ref(l)).CombinedOutput(); err != nil {
		t.Fatalf("import the python image: %v\n%s", err, out)
	}
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
	run(k, "session", "rm", "-f", "s")
	stdout, _ = run(k, "session", "ls", "-q")
	assert.NotContains(t, stdout, "s\n")
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

// The rest of the verbs through the seam, the same as on Docker: a kernel that dies is brought
// back inside the same pod; timeout; vars and context; snapshots by hand and restore; fork into
// a new session (its own claims); gc --idle stops an idle session (the pod goes, the claims
// stay) and the next exec brings it back; an evicted pod (the Eviction API, and one the kubelet
// failed as evicted) comes back on its claims.
func TestSessionVerbsOnKubernetes(t *testing.T) {
	c, kb := sessionClient(t)
	ctx := context.Background()
	l, _ := lang.Get("bash")
	s, _, err := c.Start(ctx, session.Spec{Name: "verbs", Lang: "bash", Image: images.Ref(l), Memory: 256 << 20})
	require.NoError(t, err)
	defer s.Close()
	execOK(t, s, "x=1")
	pod, err := kb.Inspect(ctx, "verbs")
	require.NoError(t, err)

	// A kernel that dies: restored in the same pod.
	r, err := s.Exec(ctx, "x=2; exit 7", session.ExecOptions{})
	require.NoError(t, err)
	assert.Equal(t, "crashed", string(r.Status))
	assert.Contains(t, r.Message, "exit code 7")
	assert.Equal(t, "1\n", execOK(t, s, "echo $x").Stdout)
	again, err := kb.Inspect(ctx, "verbs")
	require.NoError(t, err)
	assert.Equal(t, pod.ID, again.ID, "the same pod")

	// Timeout.
	r, err = s.Exec(ctx, "sleep 30", session.ExecOptions{Timeout: 500 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, "timeout", string(r.Status))

	// vars, context, a snapshot by hand and a restore.
	vars, err := s.Vars(ctx)
	require.NoError(t, err)
	var names []string
	for _, v := range vars.Vars {
		names = append(names, v.Name)
	}
	assert.Contains(t, names, "x")
	sum, err := c.Context(ctx, "verbs", session.ContextOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, sum.Recent)
	snap, err := s.Snapshot(ctx)
	require.NoError(t, err)
	execOK(t, s, "x=99")
	_, err = s.RestoreSnapshot(ctx, snap.ID)
	require.NoError(t, err)
	assert.Equal(t, "1\n", execOK(t, s, "echo $x").Stdout)

	// fork: a new session on claims of its own, with the state.
	f, err := c.Fork(ctx, "verbs", "verbs-fork", "")
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, "1\n", execOK(t, f, "echo $x").Stdout)
	_, err = kb.cs.CoreV1().PersistentVolumeClaims(kb.ns).Get(ctx, WorkspaceClaim("verbs-fork"), metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Remove(ctx, "verbs-fork", true))

	// gc --idle: the pod goes, the claims stay; the next exec brings it back.
	s.Close()
	time.Sleep(1100 * time.Millisecond)
	acts, err := c.GC(ctx, session.GCOptions{Idle: time.Second})
	require.NoError(t, err)
	var stopped bool
	for _, a := range acts {
		if a.Session == "verbs" && a.Action == "stop" && a.Done {
			stopped = true
		}
	}
	require.True(t, stopped, "gc stopped the idle session: %+v", acts)
	_, err = kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName("verbs"), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err))
	s, _, err = c.Open(ctx, "verbs")
	require.NoError(t, err)
	assert.Equal(t, "1\n", execOK(t, s, "echo $x").Stdout)

	// Evicted through the Eviction API (what a drain does): back on its claims.
	s.Close()
	require.NoError(t, kb.cs.CoreV1().Pods(kb.ns).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: PodName("verbs"), Namespace: kb.ns}}))
	require.Eventually(t, func() bool {
		_, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName("verbs"), metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, time.Minute, 100*time.Millisecond, "the evicted pod did not go")
	s, info, err := c.Open(ctx, "verbs")
	require.NoError(t, err)
	assert.True(t, info.Recreate)
	assert.Equal(t, "1\n", execOK(t, s, "echo $x").Stdout)

	// Failed by the kubelet as evicted (node pressure): the pod stays, Failed; the next start
	// makes it again.
	s.Close()
	p, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName("verbs"), metav1.GetOptions{})
	require.NoError(t, err)
	p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "the node was low on memory (test)"
	_, err = kb.cs.CoreV1().Pods(kb.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		in, err := kb.Inspect(ctx, "verbs")
		return err == nil && !in.Running
	}, time.Minute, 100*time.Millisecond, "the pod is not seen as ended")
	s, _, err = c.Open(ctx, "verbs")
	require.NoError(t, err)
	defer s.Close()
	assert.Equal(t, "1\n", execOK(t, s, "echo $x").Stdout)
	require.NoError(t, c.Remove(ctx, "verbs", true))
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
