package kube

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// Config says which cluster and namespace a Backend works in.
type Config struct {
	// Kubeconfig is a kubeconfig file; "" reads KUBECONFIG, then ~/.kube/config, then the
	// in-cluster service account (runtimectl running in a pod).
	Kubeconfig string
	// Context is the kubeconfig context; "" is its current context.
	Context string
	// Namespace is where sessions live; "" is the context's namespace, else "default".
	Namespace string
	// Options are the cluster's choices for sessions' pods and claims.
	Options Options
	// StartTimeout bounds the wait for a pod's agent to run (pull, schedule, start); 0 is
	// DefaultStartTimeout. The caller's context can end it sooner.
	StartTimeout time.Duration
	// CallTimeout bounds each short API call; 0 is 30 s.
	CallTimeout time.Duration
	Logger      *slog.Logger
}

// quietKlog silences client-go's own logging (klog, on stderr by default), which reports a
// stream closed by its client as an "UnhandledError": runtimectl says what matters itself.
var quietKlog sync.Once

// DefaultStartTimeout bounds a pod's start: a large image pulled from a registry takes minutes.
const DefaultStartTimeout = 5 * time.Minute

// Backend runs sessions in one namespace of one cluster. It implements engine.Engine,
// engine.Runtimes and engine.Storage.
type Backend struct {
	cs         kubernetes.Interface
	rest       *rest.Config
	ns         string
	server     string
	kubeconfig string
	opts       Options
	start      time.Duration
	call       time.Duration
	log        *slog.Logger
}

// New reads the kubeconfig and returns a Backend; nothing is asked of the cluster until a call
// needs it.
func New(c Config) (*Backend, error) {
	quietKlog.Do(func() { klog.SetLogger(logr.Discard()) })
	if err := c.Options.Validate(); err != nil {
		return nil, err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if c.Kubeconfig != "" {
		rules.ExplicitPath = c.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	rc, err := cc.ClientConfig()
	if err != nil {
		where := c.Kubeconfig
		if where == "" {
			where = strings.Join(rules.Precedence, ", ")
		}
		if clientcmd.IsEmptyConfig(err) {
			return nil, advice.Errorf("%w: no kubeconfig (looked in %s); set %s to the cluster's kubeconfig", engine.ErrUnreachable, where, advice.Words{Lib: "KUBECONFIG or Config.Kubeconfig", CLI: "KUBECONFIG or --kubeconfig"})
		}
		return nil, fmt.Errorf("%w: kubeconfig %s: %v", engine.ErrUnreachable, where, oneLine(err.Error()))
	}
	ns := c.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil || ns == "" {
			ns = "default"
		}
	}
	rc = rest.CopyConfig(rc)
	rc.UserAgent = "runtimectl"
	// The default QPS (5) and burst (10) throttle a controller that starts many sessions.
	rc.QPS, rc.Burst = 50, 100
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	b := &Backend{
		cs: cs, rest: rc, ns: ns, server: rc.Host, kubeconfig: c.Kubeconfig, opts: c.Options,
		start: c.StartTimeout, call: c.CallTimeout, log: c.Logger,
	}
	if b.kubeconfig == "" && len(rules.Precedence) > 0 {
		b.kubeconfig = strings.Join(rules.Precedence, ":")
	}
	if b.start <= 0 {
		b.start = DefaultStartTimeout
	}
	if b.call <= 0 {
		b.call = 30 * time.Second
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	return b, nil
}

// Name is engine.Kubernetes.
func (b *Backend) Name() string { return engine.Kubernetes }

// Close releases nothing: client-go's connections are pooled by its transport.
func (b *Backend) Close() error { return nil }

// Namespace returns the namespace the backend works in.
func (b *Backend) Namespace() string { return b.ns }

// Host names the cluster as the backend reaches it: the API server and the namespace.
func (b *Backend) Host() string { return b.server + " (namespace " + b.ns + ")" }

// Clientset returns the client-go clientset, for tests and `doctor`.
func (b *Backend) Clientset() kubernetes.Interface { return b.cs }

// Ping asks the API server for its version: an unreachable cluster is engine.ErrUnreachable
// with the kubeconfig's server named.
func (b *Backend) Ping(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, b.call)
	defer cancel()
	raw, err := b.cs.CoreV1().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return "", b.classify(err)
	}
	var v struct {
		GitVersion string `json:"gitVersion"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("the Kubernetes API server %s: its /version: %w", b.server, err)
	}
	return v.GitVersion, nil
}

// classify maps a client-go error to the project's errors: NotFound to engine.ErrNotFound,
// a server that does not answer to engine.ErrUnreachable naming the server and the kubeconfig.
func (b *Backend) classify(err error) error {
	if err == nil {
		return nil
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %v", engine.ErrNotFound, err)
	}
	if isUnreachable(err) {
		return advice.Errorf("%w: the Kubernetes API server %s (from kubeconfig %s) does not answer: %s; is the cluster running, and are %s right?",
			engine.ErrUnreachable, b.server, b.kubeconfig, oneLine(rootCause(err)), advice.Words{Lib: "KUBECONFIG or Config.Kubeconfig", CLI: "KUBECONFIG or --kubeconfig"})
	}
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return fmt.Errorf("%v (the kubeconfig's user lacks a permission runtimectl needs in namespace %s: see docs/kubernetes.md for the Role)", oneLine(err.Error()), b.ns)
	}
	return err
}

// isUnreachable reports whether err means the API server could not be reached or spoken to
// (connection refused, no route, DNS, TLS), as opposed to an answer from it.
func isUnreachable(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	var ue *url.Error
	var ne net.Error
	var oe *net.OpError
	var de *net.DNSError
	var ua x509.UnknownAuthorityError
	var he x509.HostnameError
	var ci x509.CertificateInvalidError
	return errors.As(err, &ue) || errors.As(err, &oe) || errors.As(err, &de) || errors.As(err, &ne) ||
		errors.As(err, &ua) || errors.As(err, &he) || errors.As(err, &ci)
}

// rootCause returns the innermost message of a url.Error chain ("dial tcp 127.0.0.1:6443:
// connect: connection refused"), which says more than client-go's wrapping.
func rootCause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err.Error()
	}
	return err.Error()
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
