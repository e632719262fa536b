package kube

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/lang"
)

// The integration tests run on the local cluster of scripts/kube (make kube-up). When it is
// not running, the first test starts it (building Kubernetes first when the binaries are
// missing: ~8 min cold on 2 cores) and TestMain stops it at the end, leaving the host as it
// was. They need root on Linux; elsewhere they are skipped with the reason.

const localKubeconfig = "/var/lib/kube-local/pki/admin.kubeconfig"

var (
	clusterOnce    sync.Once
	clusterErr     error
	clusterStarted bool
	clusterSkip    string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if clusterStarted {
		out, err := exec.Command("bash", scriptPath("down.sh")).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "kube tests: stopping the local cluster: %v\n%s", err, out)
			code = 1
		}
	}
	os.Exit(code)
}

func scriptPath(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "scripts", "kube", name)
}

// cluster returns a Backend on the local cluster in a fresh namespace (removed at the end),
// with the bash session image imported.
func cluster(t testing.TB) *Backend {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the local Kubernetes cluster (skipped under -short)")
	}
	clusterOnce.Do(func() {
		if runtime.GOOS != "linux" || os.Geteuid() != 0 {
			clusterSkip = "the local Kubernetes cluster needs root on Linux (it runs containerd and the kubelet); run `make kube-up` as root, or use -short"
			return
		}
		testenv.Images(t)
		if _, err := os.Stat("/run/kube-local/kube-apiserver.pid"); err != nil {
			clusterStarted = true
		}
		if out, err := exec.Command("bash", scriptPath("up.sh")).CombinedOutput(); err != nil {
			clusterErr = fmt.Errorf("start the local cluster (scripts/kube/up.sh): %v\n%s", err, out)
			return
		}
		l, _ := lang.Get("bash")
		if out, err := exec.Command("bash", scriptPath("import.sh"), images.Ref(l)).CombinedOutput(); err != nil {
			clusterErr = fmt.Errorf("import the bash image: %v\n%s", err, out)
		}
	})
	if clusterSkip != "" {
		t.Skip(clusterSkip)
	}
	require.NoError(t, clusterErr)

	ns := "rtk-" + randHex(4)
	b, err := New(Config{Kubeconfig: localKubeconfig, Namespace: ns, StartTimeout: 2 * time.Minute,
		Options: Options{StorageClass: "runtimectl-test", WorkspaceSize: "1Gi", StateSize: "100Mi"}})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = b.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		zero := int64(0)
		_ = b.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = b.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	})
	// The default ServiceAccount of a new namespace comes from the controller-manager; pods are
	// refused until it exists.
	require.Eventually(t, func() bool {
		_, err := b.cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, time.Minute, 100*time.Millisecond, "no default ServiceAccount in namespace %s", ns)
	return b
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// provision does what a storage class's provisioner does on a real cluster: a hostPath
// PersistentVolume for each of the session's claims, bound to it, its folder root-owned 0755 as
// a provisioner makes it (the init container gives it its owner). Removed at the end.
func provision(t testing.TB, b *Backend, session string) {
	t.Helper()
	ctx := context.Background()
	for _, claim := range []string{WorkspaceClaim(session), StateClaim(session)} {
		name := b.ns + "-" + claim
		dir := filepath.Join("/var/lib/kube-local/volumes", name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		hp := corev1.HostPathDirectory
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              "runtimectl-test",
				ClaimRef:                      &corev1.ObjectReference{Namespace: b.ns, Name: claim},
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hp}},
			},
		}
		_, err := b.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() {
			_ = b.cs.CoreV1().PersistentVolumes().Delete(context.Background(), name, metav1.DeleteOptions{})
			_ = os.RemoveAll(dir)
		})
	}
}

// newSession creates a session's claims (provisioned) and pod and waits until its agent runs.
func newSession(t testing.TB, b *Backend, name string, s engine.Spec) {
	t.Helper()
	ctx := context.Background()
	provision(t, b, name)
	_, err := b.Storage().Create(ctx, name, s.Lang, s.Settings, engine.VolumeOptions{})
	require.NoError(t, err)
	_, err = b.Create(ctx, s)
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx, name))
}

func bashSpec(name string) engine.Spec {
	l, _ := lang.Get("bash")
	return engine.Spec{Session: name, Lang: "bash", Image: images.Ref(l), Memory: 256 << 20, TmpSize: 16 << 20,
		Settings: fmt.Sprintf(`{"schema":1,"session":%q,"lang":"bash","image":%q,"snapshot":"every"}`, name, images.Ref(l))}
}

// connect opens the private stream and reads the agent's hello through execproto's client.
func connect(t testing.TB, b *Backend, name string) *execproto.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rwc, err := b.Dial(ctx, name)
	require.NoError(t, err)
	c, err := execproto.NewClient(ctx, rwc)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func run(t testing.TB, c *execproto.Client, code string) *execproto.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := c.Exec(ctx, execproto.Request{Code: code}, execproto.Handlers{Stdout: func(p []byte) { out.Write(p) }}, nil)
	require.NoError(t, err)
	res.Stdout = out.String()
	return res
}

func tarFile(t *testing.T, name, content string) io.Reader {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Uid: SessionUID, Gid: SessionUID, Typeflag: tar.TypeReg}))
	_, err := tw.Write([]byte(content))
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	return &buf
}

func readTar(t *testing.T, rc io.ReadCloser) map[string]string {
	t.Helper()
	defer rc.Close()
	out := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		b, err := io.ReadAll(tr)
		require.NoError(t, err)
		out[h.Name] = string(b)
	}
}

// A session's whole life on the cluster: pod and claims, the agent's hello over pods/exec, an
// execution as the session user, copy in and out, the pod deleted and brought back on the same
// claims with the workspace and the history still there.
func TestSessionPodLifecycle(t *testing.T) {
	b := cluster(t)
	ctx := context.Background()
	name := "life_1" // not a DNS label: the key maps it
	newSession(t, b, name, bashSpec(name))

	in, err := b.Inspect(ctx, name)
	require.NoError(t, err)
	assert.True(t, in.Running)
	assert.Equal(t, engine.StateRunning, in.State)
	assert.Equal(t, name, in.Session)
	assert.Equal(t, "bash", in.Lang)
	assert.NotEmpty(t, in.Node)

	c := connect(t, b, name)
	assert.Equal(t, "bash", c.Hello().Lang)
	assert.Equal(t, execproto.Version, c.Hello().Protocol)
	res := run(t, c, `echo kept > /workspace/f.txt; id -u; grep CapEff /proc/self/status | cut -f2; touch /rootfs-test 2>/dev/null && echo rw || echo ro; stat -c %a /tmp`)
	assert.Equal(t, "ok", string(res.Status), "stderr: %s", res.Stderr)
	assert.Equal(t, "1000\n0000000000000000\nro\n1777\n", res.Stdout, "the kernel is uid 1000 with no capabilities on a read-only root, /tmp sticky")

	// Copy out and in, as the session user; the state is root's, outside the workspace.
	got := func() map[string]string {
		rc, err := b.CopyFrom(ctx, name, "/workspace/f.txt")
		require.NoError(t, err)
		return readTar(t, rc)
	}()
	assert.Equal(t, map[string]string{"f.txt": "kept\n"}, got)
	require.NoError(t, b.CopyTo(ctx, name, "/workspace", tarFile(t, "in.txt", "from the host")))
	res = run(t, c, `cat in.txt; stat -c %u in.txt; stat -c '%u %a' `+StateDir)
	assert.Equal(t, "from the host1000\n0 700\n", res.Stdout)
	st, err := b.Stat(ctx, name, "/workspace/in.txt")
	require.NoError(t, err)
	assert.Equal(t, engine.PathInfo{Exists: true, Size: 13}, st)
	st, err = b.Stat(ctx, name, "/workspace/missing")
	require.NoError(t, err)
	assert.False(t, st.Exists)
	_, err = b.CopyFrom(ctx, name, "/workspace/missing")
	assert.ErrorIs(t, err, engine.ErrNotFound)
	rc, err := b.CopyFrom(ctx, name, StateDir+"/history.jsonl")
	require.NoError(t, err)
	hist := readTar(t, rc)
	assert.Contains(t, hist["history.jsonl"], "kept", "the history is on the state claim")

	// Stop: the pod goes, the claims stay; the pod comes back on them.
	c.Close()
	require.NoError(t, b.Stop(ctx, name, 5*time.Second))
	_, err = b.Inspect(ctx, name)
	require.ErrorIs(t, err, engine.ErrNotFound)
	vol, err := b.Storage().Inspect(ctx, name)
	require.NoError(t, err)
	assert.Equal(t, name, vol.Session)
	assert.Contains(t, vol.Settings, `"session":"life_1"`)
	_, err = b.Create(ctx, bashSpec(name))
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx, name))
	c = connect(t, b, name)
	res = run(t, c, `cat /workspace/f.txt`)
	assert.Equal(t, "kept\n", res.Stdout, "the workspace claim kept the file")

	// A pod deleted behind runtimectl's back (kubectl delete pod) is created again by the next
	// create + start, as session does when the runtime is missing.
	zero := int64(0)
	require.NoError(t, b.cs.CoreV1().Pods(b.ns).Delete(ctx, PodName(name), metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	require.Eventually(t, func() bool { _, err := b.Inspect(ctx, name); return errors.Is(err, engine.ErrNotFound) }, time.Minute, 100*time.Millisecond)
	_, err = b.Create(ctx, bashSpec(name))
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx, name))
	c = connect(t, b, name)
	assert.Equal(t, "kept\n", run(t, c, `cat /workspace/f.txt`).Stdout)

	list, err := b.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, name, list[0].Session)

	// Remove: the pod and the policy go; the claims go with Volumes.Remove, refused while the pod is there.
	assert.ErrorIs(t, b.Storage().Remove(ctx, vol.Name), engine.ErrInUse)
	require.NoError(t, b.Remove(ctx, name, true))
	require.NoError(t, b.Storage().Remove(ctx, vol.Name))
	_, err = b.Storage().Inspect(ctx, name)
	assert.ErrorIs(t, err, engine.ErrNotFound)
	_, err = b.cs.NetworkingV1().NetworkPolicies(b.ns).Get(ctx, PolicyName(name), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the policy goes with the session")
}

// The hardening, read back from the pod the API server stored.
func TestSessionPodHardeningAsStored(t *testing.T) {
	b := cluster(t)
	ctx := context.Background()
	newSession(t, b, "hard", bashSpec("hard"))
	p, err := b.cs.CoreV1().Pods(b.ns).Get(ctx, PodName("hard"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.False(t, *p.Spec.AutomountServiceAccountToken)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, p.Spec.SecurityContext.SeccompProfile.Type)
	assert.True(t, *p.Spec.SecurityContext.RunAsNonRoot)
	c := p.Spec.Containers[0]
	assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
	assert.ElementsMatch(t, []corev1.Capability{"SETUID", "SETGID", "KILL"}, c.SecurityContext.Capabilities.Add)
	assert.Equal(t, corev1.PullIfNotPresent, c.ImagePullPolicy)
	assert.Equal(t, int64(256<<20), c.Resources.Limits.Memory().Value())
	assert.Contains(t, c.Resources.Limits, corev1.ResourceEphemeralStorage)
	np, err := b.cs.NetworkingV1().NetworkPolicies(b.ns).Get(ctx, PolicyName("hard"), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, np.Spec.Ingress)
	assert.Empty(t, np.Spec.Egress)
	assert.Len(t, np.Spec.PolicyTypes, 2)

	// The agent itself: root, with only SETUID, SETGID and KILL, no_new_privs.
	var out bytes.Buffer
	require.NoError(t, b.run(ctx, "hard", []string{"sh", "-c", "grep -E '^(CapEff|NoNewPrivs)' /proc/1/status /proc/$(pgrep -o runtime-agent)/status"}, nil, &out))
	assert.Contains(t, out.String(), "CapEff:\t00000000000000e0", "the agent has SETUID, SETGID and KILL only: %s", out.String())
	assert.Contains(t, out.String(), "NoNewPrivs:\t1")
}

// Two sessions at once, each with its own pod, claims and stream.
func TestTwoSessionsAtOnce(t *testing.T) {
	b := cluster(t)
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i, name := range []string{"one", "two"} {
		provision(t, b, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			s := bashSpec(name)
			if _, err := b.Storage().Create(ctx, name, "bash", s.Settings, engine.VolumeOptions{}); err != nil {
				outs[i] = err.Error()
				return
			}
			if _, err := b.Create(ctx, s); err != nil {
				outs[i] = err.Error()
				return
			}
			if err := b.Start(ctx, name); err != nil {
				outs[i] = err.Error()
				return
			}
			rwc, err := b.Dial(ctx, name)
			if err != nil {
				outs[i] = err.Error()
				return
			}
			c, err := execproto.NewClient(ctx, rwc)
			if err != nil {
				outs[i] = err.Error()
				return
			}
			defer c.Close()
			var out strings.Builder
			_, err = c.Exec(ctx, execproto.Request{Code: "echo " + name + "; echo " + name + " > /workspace/who"}, execproto.Handlers{Stdout: func(p []byte) { out.Write(p) }}, nil)
			if err != nil {
				outs[i] = err.Error()
				return
			}
			outs[i] = out.String()
		}()
	}
	wg.Wait()
	assert.Equal(t, []string{"one\n", "two\n"}, outs)
	list, err := b.List(context.Background())
	require.NoError(t, err)
	assert.Len(t, list, 2)
	vols, err := b.Storage().List(context.Background(), false)
	require.NoError(t, err)
	require.Len(t, vols, 2)
	assert.Equal(t, []string{"one", "two"}, []string{vols[0].Session, vols[1].Session})
}

// An image the cluster cannot pull is a clear error, not a hang.
func TestUnpullableImageIsAClearError(t *testing.T) {
	b := cluster(t)
	ctx := context.Background()
	s := bashSpec("nopull")
	s.Image = "runtimectl/no-such-image:nope"
	provision(t, b, "nopull")
	_, err := b.Storage().Create(ctx, "nopull", "bash", s.Settings, engine.VolumeOptions{})
	require.NoError(t, err)
	_, err = b.Create(ctx, s)
	require.NoError(t, err)
	err = b.Start(ctx, "nopull")
	require.ErrorIs(t, err, engine.ErrImage)
	assert.Contains(t, err.Error(), "the cluster cannot pull image runtimectl/no-such-image:nope")
	assert.NotContains(t, err.Error(), "\n")
	_, err = b.Dial(ctx, "nopull")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not running")
}

// The scenario at this level: a Python session's DataFrame survives its pod being
// deleted, restored from the snapshot on the state claim into a new pod.
func TestPythonStateComesBackOnANewPod(t *testing.T) {
	b := cluster(t)
	l, _ := lang.Get("python")
	if out, err := exec.Command("bash", scriptPath("import.sh"), images.Ref(l)).CombinedOutput(); err != nil {
		t.Fatalf("import the python image: %v\n%s", err, out)
	}
	ctx := context.Background()
	s := engine.Spec{Session: "py", Lang: "python", Image: images.Ref(l), Memory: 1 << 30, TmpSize: 64 << 20,
		Settings: fmt.Sprintf(`{"schema":1,"session":"py","lang":"python","image":%q,"snapshot":"every"}`, images.Ref(l))}
	newSession(t, b, "py", s)
	c := connect(t, b, "py")
	r := run(t, c, "import pandas as pd; df = pd.DataFrame({'a': [1, 2]}); print(df.a.sum())")
	require.Equal(t, "3\n", r.Stdout, r.Stderr)
	// As session's Stop does: drain (the pending snapshot is saved), then stop.
	require.NoError(t, c.Call(ctx, execproto.Request{Op: execproto.OpDrain}, nil))
	c.Close()
	require.NoError(t, b.Stop(ctx, "py", 10*time.Second))
	_, err := b.Create(ctx, s)
	require.NoError(t, err)
	require.NoError(t, b.Start(ctx, "py"))
	c = connect(t, b, "py")
	require.NotNil(t, c.Hello().Restore, "the agent says what it restored")
	assert.Contains(t, c.Hello().Restore.Restored, "df")
	r = run(t, c, "print(df.a.sum())")
	assert.Equal(t, "3\n", r.Stdout, r.Stderr)
}
