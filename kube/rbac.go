package kube

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Permission is one rule of what runtimectl asks of the API server in the sessions' namespace.
type Permission struct {
	Group    string // "" is the core group
	Resource string
	Verbs    []string
}

// Permissions is exactly what the Backend uses: pods (made, watched, deleted, relabelled by a
// warm pool's claim), pods/exec (the agent's stream, files in and out), the claims (relabelled
// too), the network policies, and the ConfigMaps that hold warm pools' settings.
var Permissions = []Permission{
	{"", "pods", []string{"create", "get", "list", "watch", "delete", "patch"}},
	{"", "pods/exec", []string{"create", "get"}},
	{"", "persistentvolumeclaims", []string{"create", "get", "list", "delete", "patch"}},
	{"networking.k8s.io", "networkpolicies", []string{"create", "delete"}},
	{"", "configmaps", []string{"create", "list", "update", "delete"}},
}

// RoleYAML returns a Role granting Permissions in namespace, and a RoleBinding of it to a
// subject to fill in: `runtimectl kube rbac` prints it for operators.
func RoleYAML(namespace string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: runtimectl\n  namespace: %s\nrules:\n", namespace)
	for _, p := range Permissions {
		fmt.Fprintf(&b, "- apiGroups: [%q]\n  resources: [%q]\n  verbs: [%s]\n", p.Group, p.Resource, quoteAll(p.Verbs))
	}
	fmt.Fprintf(&b, "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: runtimectl\n  namespace: %s\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: runtimectl\nsubjects:\n- kind: ServiceAccount # or User, Group: whoever runs runtimectl\n  name: runtimectl\n  namespace: %s\n", namespace, namespace)
	return b.String()
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}

// Missing returns the permissions (as "verb resource") that the kubeconfig's user lacks in the
// Backend's namespace, asked of the API server with SelfSubjectAccessReviews.
func (b *Backend) Missing(ctx context.Context) ([]string, error) {
	var missing []string
	for _, p := range Permissions {
		resource, sub, _ := strings.Cut(p.Resource, "/")
		for _, v := range p.Verbs {
			r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: b.ns, Verb: v, Group: p.Group, Resource: resource, Subresource: sub},
			}}
			cctx, cancel := context.WithTimeout(ctx, b.call)
			got, err := b.cs.AuthorizationV1().SelfSubjectAccessReviews().Create(cctx, r, metav1.CreateOptions{})
			cancel()
			if err != nil {
				return nil, b.classify(err)
			}
			if !got.Status.Allowed {
				missing = append(missing, v+" "+p.Resource)
			}
		}
	}
	return missing, nil
}

// NamespaceExists reports whether the Backend's namespace exists.
func (b *Backend) NamespaceExists(ctx context.Context) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	_, err := b.cs.CoreV1().Namespaces().Get(cctx, b.ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, b.classify(err)
}

// ImagesOnNodes returns, for each image reference, how many of the cluster's nodes hold it
// (from the nodes' status, as `kubectl get nodes -o yaml` shows it), and the number of nodes.
// Listing nodes is a cluster-wide permission a namespaced user may lack: then an error.
func (b *Backend) ImagesOnNodes(ctx context.Context, refs []string) (map[string]int, int, error) {
	cctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	nodes, err := b.cs.CoreV1().Nodes().List(cctx, metav1.ListOptions{})
	if err != nil {
		return nil, 0, b.classify(err)
	}
	out := map[string]int{}
	for _, n := range nodes.Items {
		have := map[string]bool{}
		for _, img := range n.Status.Images {
			for _, name := range img.Names {
				have[normalizeRef(name)] = true
			}
		}
		for _, r := range refs {
			if have[normalizeRef(r)] {
				out[r]++
			}
		}
	}
	return out, len(nodes.Items), nil
}

// normalizeRef spells an image reference as the nodes report it: docker.io/library/ for a bare
// name, docker.io/ for a name without a registry, :latest without a tag or digest.
func normalizeRef(r string) string {
	name, digest, hasDigest := strings.Cut(r, "@")
	if !hasDigest {
		if i := strings.LastIndexByte(name, ':'); i < 0 || strings.Contains(name[i:], "/") {
			name += ":latest"
		}
	}
	first, _, hasSlash := strings.Cut(name, "/")
	switch {
	case !hasSlash:
		name = "docker.io/library/" + name
	case !strings.ContainsAny(first, ".:") && first != "localhost":
		name = "docker.io/" + name
	}
	if hasDigest {
		return name + "@" + digest
	}
	return name
}
