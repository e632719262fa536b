package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/kube"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

// KubeNamespace is where the kube phase makes its sessions.
const KubeNamespace = "runtimectl-bench"

// Kube measures sessions on a Kubernetes cluster through the same library, beside Docker's in
// the same run: a bash session's start to its first result, and the round trip of one small
// execution over pods/exec against the same on Docker. It needs a cluster whose default storage
// class binds claims and that has the bash image (make kube-up); kubeconfig "" is KUBECONFIG.
func (r *Runner) Kube(ctx context.Context, kubeconfig string) error {
	kb, err := kube.New(kube.Config{Kubeconfig: kubeconfig, Namespace: KubeNamespace, StartTimeout: 2 * time.Minute,
		Options: kube.Options{StorageClass: os.Getenv("RUNTIMECTL_KUBE_STORAGE_CLASS"), WorkspaceSize: "1Gi", StateSize: "100Mi"}})
	if err != nil {
		return err
	}
	if _, err := kb.Ping(ctx); err != nil {
		return fmt.Errorf("no cluster (start one with `sudo make kube-up`): %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: KubeNamespace}}
	if _, err := kb.Clientset().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", KubeNamespace, err)
	}
	for i := 0; i < 300; i++ { // a new namespace's default ServiceAccount comes from the controller-manager
		if _, err := kb.Clientset().CoreV1().ServiceAccounts(KubeNamespace).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	kc := session.NewWithEngine(kb)
	defer kc.Close()
	l, _ := lang.Get("bash")
	spec := func(name string) session.Spec {
		return session.Spec{Name: name, Lang: "bash", Image: images.Ref(l), Memory: 256 << 20}
	}
	startFirst := func(c *session.Client, name string) (float64, error) {
		t := time.Now()
		s, _, err := c.Start(ctx, spec(name))
		if err != nil {
			return 0, err
		}
		defer func() {
			s.Close()
			_ = c.Remove(context.WithoutCancel(ctx), name, true)
		}()
		if _, err := execOK(ctx, s, "x=1", session.ExecOptions{}); err != nil {
			return 0, err
		}
		return secs(time.Since(t)), nil
	}
	for i, n := 0, r.n(5, 2); i <= n; i++ {
		name := fmt.Sprintf("kb-start-%d-%s", i, NewRunID())
		v, err := startFirst(kc, name)
		if err != nil {
			return err
		}
		dname := r.sessionName(fmt.Sprintf("kd-start-%d", i))
		r.mu.Lock()
		r.sessions[dname] = true
		r.mu.Unlock()
		dv, err := startFirst(r.C, dname)
		if err != nil {
			return err
		}
		if i == 0 {
			continue // the first of each warms caches
		}
		r.R.Add("kube.start_to_first_result", S, "lower", "Kubernetes (local cluster): Client.Start of a new bash session (claims made and bound, pod created, image present) to the result of Exec(`x=1`)", v)
		r.R.Add("kube.docker_start_to_first_result", S, "lower", "the same on Docker, in the same run", dv)
	}
	r.R.Compare("kube.start_to_first_result", "kube.docker_start_to_first_result", Target{})

	kname := "kb-rtt-" + NewRunID()
	ks, _, err := kc.Start(ctx, spec(kname))
	if err != nil {
		return err
	}
	defer func() {
		ks.Close()
		_ = kc.Remove(context.WithoutCancel(ctx), kname, true)
	}()
	ds, err := r.start(ctx, spec(r.sessionName("kd-rtt")))
	if err != nil {
		return err
	}
	defer ds.Close()
	rtt := func(s *session.Session) (float64, error) {
		t := time.Now()
		if _, err := execOK(ctx, s, "x=1", session.ExecOptions{}); err != nil {
			return 0, err
		}
		return ms(time.Since(t)), nil
	}
	for i := 0; i < 20; i++ { // warm up
		if _, err := rtt(ks); err != nil {
			return err
		}
		if _, err := rtt(ds); err != nil {
			return err
		}
	}
	for i, n := 0, r.n(10, 3); i < n; i++ {
		for k := 0; k < 20; k++ {
			v, err := rtt(ks)
			if err != nil {
				return err
			}
			r.R.Add("kube.exec_rtt", Ms, "lower", "Kubernetes: Exec(`x=1`) round trip on a warm bash session over its pods/exec stream (through the API server and the kubelet)", v)
		}
		for k := 0; k < 20; k++ {
			v, err := rtt(ds)
			if err != nil {
				return err
			}
			r.R.Add("kube.docker_exec_rtt", Ms, "lower", "the same on a Docker bash session, in the same run", v)
		}
	}
	r.R.Compare("kube.exec_rtt", "kube.docker_exec_rtt", Target{})
	return nil
}
