//go:build !lean

package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/kube"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

// kubeClient is the library's client on the Kubernetes backend of --kubeconfig and --namespace.
func (f *Factory) kubeClient(logger *slog.Logger, opts []session.Option) (*session.Client, error) {
	b, err := kube.New(kube.Config{Kubeconfig: f.Kubeconfig, Namespace: f.Namespace, Options: kubeOptions(), Logger: logger})
	if err != nil {
		return nil, err
	}
	return session.NewWithEngine(b, opts...), nil
}

// kubeOptions are the cluster's choices for sessions, from the environment:
// RUNTIMECTL_KUBE_STORAGE_CLASS (default: the cluster's default class).
func kubeOptions() kube.Options {
	return kube.Options{StorageClass: os.Getenv("RUNTIMECTL_KUBE_STORAGE_CLASS")}
}

// kubeBackend returns the Kubernetes backend of --kubeconfig and --namespace.
func (f *Factory) kubeBackend() (*kube.Backend, error) {
	return kube.New(kube.Config{Kubeconfig: f.Kubeconfig, Namespace: f.Namespace, Options: kubeOptions()})
}

func newCmdKube(f *Factory) *cobra.Command {
	c := &cobra.Command{Use: "kube", Short: "Kubernetes: the RBAC Role runtimectl needs, and the local cluster's storage"}
	rbac := &cobra.Command{
		Use:     "rbac",
		Short:   "Print the Role (and a RoleBinding to fill in) that grants exactly what runtimectl needs in a namespace",
		Example: "  runtimectl kube rbac --namespace agents | kubectl apply -f -",
		Args:    args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			n := f.Namespace
			if n == "" {
				n = "default"
			}
			fmt.Fprint(f.IO.Out, kube.RoleYAML(n))
			return nil
		},
	}
	local := &cobra.Command{
		Use:    "provision-local",
		Short:  "Give claims of the local cluster's storage class hostPath volumes until stopped (make kube-up runs it)",
		Hidden: true,
		Args:   args(0, 0),
		RunE: func(c *cobra.Command, _ []string) error {
			b, err := f.kubeBackend()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			kube.RunLocalProvisioner(ctx, b.Clientset(), kube.LocalStorageClass, kube.LocalVolumeDir, nil)
			return nil
		},
	}
	c.AddCommand(rbac, local)
	return group(c)
}

// runKubeDoctor checks the cluster: it answers, the namespace exists, the user has every
// permission runtimectl needs there, and the session images are known.
func runKubeDoctor(ctx context.Context, f *Factory) []doctorCheck {
	b, err := f.kubeBackend()
	if err != nil {
		return []doctorCheck{{Check: "cluster", Detail: errLine(err), Fix: "set KUBECONFIG or --kubeconfig to the cluster's kubeconfig"}}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	v, err := b.Ping(ctx)
	if err != nil {
		return []doctorCheck{{Check: "cluster", Detail: errLine(err), Fix: "start the cluster (make kube-up for the local one), or point KUBECONFIG at a running one"}}
	}
	checks := []doctorCheck{{Check: "cluster", OK: true, Detail: fmt.Sprintf("Kubernetes %s at %s", v, b.Host())}}
	ok, err := b.NamespaceExists(ctx)
	switch {
	case err != nil:
		checks = append(checks, doctorCheck{Check: "namespace " + b.Namespace(), Detail: errLine(err)})
	case !ok:
		checks = append(checks, doctorCheck{Check: "namespace " + b.Namespace(), Detail: "does not exist", Fix: "kubectl create namespace " + b.Namespace()})
	default:
		checks = append(checks, doctorCheck{Check: "namespace " + b.Namespace(), OK: true, Detail: "exists"})
	}
	missing, err := b.Missing(ctx)
	switch {
	case err != nil:
		checks = append(checks, doctorCheck{Check: "permissions", Detail: errLine(err)})
	case len(missing) > 0:
		checks = append(checks, doctorCheck{Check: "permissions", Detail: "missing in namespace " + b.Namespace() + ": " + strings.Join(missing, ", "),
			Fix: "grant the Role of `runtimectl kube rbac --namespace " + b.Namespace() + "`"})
	default:
		checks = append(checks, doctorCheck{Check: "permissions", OK: true, Detail: "every permission runtimectl needs in namespace " + b.Namespace()})
	}
	var refs []string
	for _, n := range lang.Names() {
		l, _ := lang.Get(n)
		refs = append(refs, images.Ref(l))
	}
	on, nodes, err := b.ImagesOnNodes(ctx, refs)
	for _, ref := range refs {
		ch := doctorCheck{Check: "image " + ref}
		switch {
		case err != nil:
			ch.OK, ch.Detail = true, "cannot tell whether the nodes hold it ("+errLine(err)+"); a node pulls it when a session starts there (imagePullPolicy IfNotPresent), and one it cannot pull fails the start with the kubelet's reason"
		case on[ref] == nodes:
			ch.OK, ch.Detail = true, fmt.Sprintf("on all %d nodes", nodes)
		case on[ref] > 0:
			ch.OK, ch.Detail = true, fmt.Sprintf("on %d of %d nodes; the others pull it on a session's first start there", on[ref], nodes)
		default:
			ch.Detail = fmt.Sprintf("on none of the %d nodes: a session's start pulls it, and fails unless it is in a registry the nodes reach", nodes)
			ch.Fix = "push it to the cluster's registry and start sessions with --image REGISTRY/...; or import it into the nodes (make kube-up does for the local cluster)"
		}
		checks = append(checks, ch)
	}
	return checks
}
