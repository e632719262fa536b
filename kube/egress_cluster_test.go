package kube

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/egress"
	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/fakenet"
	"github.com/runtimectl/runtimectl/lang"
	"github.com/runtimectl/runtimectl/session"
)

// Egress by name on the cluster: the session's proxy is a pod of the namespace, the session's
// pod resolves through its agent and may reach only the proxy (its NetworkPolicy, checked here
// as written: the local cluster's bridge does not enforce it; its one route, which
// TestEgressOnKubernetesReachesOnlyTheAllowedHosts checks from inside), an allowed
// host is reached by name with its secret header added, and everything else is refused at once
// with the host and the flag. The upstream "host" is a server of this test on the node's
// address (the local cluster's pods have no way out), named web.test through the proxy's hosts.
func TestEgressOnKubernetes(t *testing.T) {
	_, kb := sessionClient(t)
	nodeIP := localAddr(t)
	var mu sync.Mutex
	var seen []http.Header
	l, err := net.Listen("tcp", "0.0.0.0:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		fmt.Fprintf(w, "web %s\n", r.URL.Path)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	const secret = "kube-secret-5e1f0c2a9d"
	c := session.NewWithEngine(kb, session.WithEgress(session.EgressOptions{
		Hosts:  map[string][]string{"web.test": {nodeIP}, "other.test": {nodeIP}},
		Lookup: func(k string) (string, bool) { return secret, k == "KUBE_SECRET" },
	}))
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bash, _ := lang.Get("bash")
	name := "eg-" + randHex(3)
	web := fmt.Sprintf("web.test:%d", port)
	s, _, err := c.Start(ctx, session.Spec{Name: name, Lang: "bash", Image: images.Ref(bash), Memory: 256 << 20,
		AllowHosts: []string{web}, SecretHeaders: []string{web + "=X-Api-Key:KUBE_SECRET"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })
	defer s.Close()
	t.Cleanup(func() {
		if t.Failed() {
			dumpEgress(t, c, kb, name)
		}
	})

	// The objects: the proxy's pod in the namespace, the session's policy open to it only.
	proxy, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, EgressName(name), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, Key(name), proxy.Labels[contract.LabelEgress])
	pol, err := kb.cs.NetworkingV1().NetworkPolicies(kb.ns).Get(ctx, PolicyName(name), metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, pol.Spec.Egress, 1)
	assert.Equal(t, Key(name), pol.Spec.Egress[0].To[0].PodSelector.MatchLabels[contract.LabelEgress])
	pod, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName(name), metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1"}, pod.Spec.DNSConfig.Nameservers)

	exec := func(code string) string {
		r, err := s.Exec(ctx, code, session.ExecOptions{})
		require.NoError(t, err)
		return r.Stdout + r.Stderr
	}
	// By name, on the allowed port: the relay, the proxy, the host, with the secret header.
	out := exec(fmt.Sprintf(`exec 3<>/dev/tcp/web.test/%d; printf 'GET /by-name HTTP/1.0\r\nHost: %s\r\n\r\n' >&3; cat <&3; exec 3<&-`, port, web))
	assert.Contains(t, out, "web /by-name", out)
	// Through HTTP_PROXY.
	out = exec(fmt.Sprintf(`echo "$HTTP_PROXY"; exec 3<>/dev/tcp/127.0.0.1/3128; printf 'GET http://%s/via-proxy HTTP/1.0\r\nHost: %s\r\n\r\n' >&3; cat <&3; exec 3<&-`, web, web))
	assert.Contains(t, out, contract.EgressProxyURL)
	assert.Contains(t, out, "web /via-proxy", out)
	// Refused at once, naming the host and the flag: another name, another port, an address.
	for host, want := range map[string]string{
		fmt.Sprintf("other.test:%d", port): "other.test",
		"web.test:1":                       "web.test",
		fmt.Sprintf("%s:%d", nodeIP, port): nodeIP,
	} {
		start := time.Now()
		out = exec(fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/3128; printf 'GET http://%s/ HTTP/1.0\r\nHost: %s\r\n\r\n' >&3; cat <&3; exec 3<&-`, host, host))
		assert.Less(t, time.Since(start), 3*time.Second)
		assert.Contains(t, out, " 403 ", host)
		assert.Contains(t, out, want, host)
		assert.Contains(t, out, "--allow-host", host)
	}
	out = exec(`getent hosts other.test || echo nxdomain`)
	assert.Contains(t, out, "nxdomain")

	mu.Lock()
	require.Len(t, seen, 2, "the host got the two allowed requests only")
	for _, h := range seen {
		assert.Equal(t, secret, h.Get("X-Api-Key"))
	}
	mu.Unlock()
	// The secret is nowhere in the session: its environment, any process's, its pod.
	out = exec(`cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c ` + secret[:10] + ` || true; env | grep -c ` + secret[:10] + ` || true`)
	assert.Equal(t, "0\n0\n", out)
	b, _ := pod.Marshal()
	assert.NotContains(t, string(b), secret)
	r, err := c.EgressRefusals(ctx, name)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, r.Total, int64(4), "%+v", r.ByReason)
	logs, err := c.Logs(ctx, name, 1<<20)
	require.NoError(t, err)
	assert.Contains(t, string(logs), "egress refused other.test")

	// Stop and start: the proxy goes and comes back with the session.
	require.NoError(t, c.Stop(ctx, name))
	_, err = kb.cs.CoreV1().Pods(kb.ns).Get(ctx, EgressName(name), metav1.GetOptions{})
	assert.Error(t, err, "the proxy's pod is deleted with the session's")
	s2, _, err := c.Open(ctx, name)
	require.NoError(t, err)
	defer s2.Close()
	r2, err := s2.Exec(ctx, fmt.Sprintf(`exec 3<>/dev/tcp/web.test/%d; printf 'GET /again HTTP/1.0\r\nHost: %s\r\n\r\n' >&3; cat <&3`, port, web), session.ExecOptions{})
	require.NoError(t, err)
	assert.Contains(t, r2.Stdout, "web /again")
	require.NoError(t, c.Remove(ctx, name, true))
	_, err = kb.cs.CoreV1().Secrets(kb.ns).Get(ctx, EgressName(name), metav1.GetOptions{})
	assert.Error(t, err, "the proxy's Secret goes with the session")
}

// dumpEgress logs what a failed run needs: the session's log (the agent's and its proxy's) and
// both pods' states.
func dumpEgress(t *testing.T, c *session.Client, kb *Backend, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs, err := c.Logs(ctx, name, 1<<20)
	t.Logf("session logs (err %v):\n%s", err, logs)
	for _, pn := range []string{PodName(name), EgressName(name)} {
		if p, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, pn, metav1.GetOptions{}); err == nil {
			t.Logf("pod %s: phase %s ip %s conditions %+v containers %+v", pn, p.Status.Phase, p.Status.PodIP, p.Status.Conditions, p.Status.ContainerStatuses)
		}
	}
}

// localAddr is this machine's address on its default route: the node's, which pods reach.
func localAddr(t *testing.T) string {
	conn, err := net.Dial("udp", "192.0.2.1:9")
	require.NoError(t, err)
	defer conn.Close()
	return strings.Split(conn.LocalAddr().String(), ":")[0]
}

// The Docker egress tests (session/egress_test.go) on the cluster, against the same fake
// internet, its ports published on the node (which the proxies' pods reach; the Docker network
// they do not): by name over HTTP and HTTPS (CONNECT, the SNI checked), pip from an allowed
// index and not from a denied name, and everything else refused at once. The session's pod has
// one route, to its proxy's pod (runtime-egress pin), so what its code tries straight fails
// with no route: the node's address, its gateway, another session's pod and proxy, an outside
// address, UDP (a DNS query to an outside resolver gets nothing), IPv6. Two sessions with
// different allowlists each reach only theirs.
func TestEgressOnKubernetesReachesOnlyTheAllowedHosts(t *testing.T) {
	_, kb := sessionClient(t)
	nodeIP := localAddr(t)
	py, _ := lang.Get("python")
	bash, _ := lang.Get("bash")
	if out, err := exec.Command("bash", scriptPath("import.sh"), images.Ref(py)).CombinedOutput(); err != nil {
		t.Fatalf("import the python image: %v\n%s", err, out)
	}
	in := fakenet.Start(t, images.Ref(py), fakenet.Published(nodeIP))
	gw := podGateway(t)
	hosts := in.Hosts()
	hosts[fakenet.EngineHost] = []string{gw}
	c := session.NewWithEngine(kb, session.WithEgress(session.EgressOptions{Hosts: hosts, UpstreamCAs: in.CAPEM}))
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	at := func(name string, port int) string { return fmt.Sprintf("%s:%d", name, in.Port(name, port)) }
	start := func(spec session.Spec) *session.Session {
		spec.Name = "eg-" + randHex(3)
		s, _, err := c.Start(ctx, spec)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Remove(context.Background(), spec.Name, true) })
		t.Cleanup(func() { s.Close() })
		t.Cleanup(func() {
			if t.Failed() {
				dumpEgress(t, c, kb, spec.Name)
			}
		})
		return s
	}
	run := func(s *session.Session, code string) string {
		r, err := s.Exec(ctx, code, session.ExecOptions{})
		require.NoError(t, err)
		require.Equal(t, contract.StatusOK, r.Status, "stdout %s\nstderr %s", r.Stdout, r.Stderr)
		return r.Stdout
	}
	a := start(session.Spec{Lang: "python", Image: images.Ref(py), Memory: 1 << 30, AllowHosts: []string{
		at(fakenet.Allowed, 80), at(fakenet.Allowed, 443), at(fakenet.Index, 80), fakenet.EngineHost}})
	b := start(session.Spec{Lang: "bash", Image: images.Ref(bash), Memory: 256 << 20, AllowHosts: []string{at(fakenet.Denied, 80)}})
	podIP := func(name string) string {
		p, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, p.Status.PodIP, name)
		return p.Status.PodIP
	}
	for _, s := range []*session.Session{a, b} {
		p, err := kb.cs.CoreV1().Pods(kb.ns).Get(ctx, PodName(s.Name()), metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, p.Status.InitContainerStatuses, 2)
		pin := p.Status.InitContainerStatuses[1]
		require.NotNil(t, pin.State.Terminated, "%+v", pin.State)
		assert.Zero(t, pin.State.Terminated.ExitCode, "%s: %+v", PinName, pin.State.Terminated)
	}

	require.NoError(t, a.WriteFile(ctx, "fakenet-ca.pem", strings.NewReader(in.CAPEM)))
	got := in.CheckProbes(t, run(a, in.Probes(map[string]fakenet.DirectProbe{
		"direct_node_kubelet":  {Host: nodeIP, Port: 10250},
		"direct_gateway":       {Host: gw, Port: in.Port(fakenet.Allowed, 80)},
		"direct_other_pod":     {Host: podIP(PodName(b.Name())), Port: 80},
		"direct_other_proxy":   {Host: podIP(EgressName(b.Name())), Port: egress.RelayPort},
		"direct_outside":       {Host: "192.0.2.1", Port: 443},
		"direct_allowed_by_ip": {Host: nodeIP, Port: in.Port(fakenet.Allowed, 80)},
	})))
	// Straight out there is no route at all: not a timeout, not a reset.
	for _, name := range []string{"ipv4_direct", "ipv6_direct", "udp", "direct_node_kubelet", "direct_gateway", "direct_other_pod", "direct_other_proxy", "direct_outside", "direct_allowed_by_ip"} {
		assert.Contains(t, got[name].Res, "Network is unreachable", name)
	}
	seen, err := in.Seen(ctx, fakenet.Denied)
	require.NoError(t, err)
	assert.Empty(t, seen, "denied.test got no request from the session that does not allow it")

	// pip from the allowed index; the same index by a name not allowed fails at once.
	pip := run(a, fakenet.PipDownload(at(fakenet.Index, 80)))
	assert.True(t, strings.HasPrefix(pip, "0 "), pip)
	assert.Contains(t, pip, "Saved")
	pip = run(a, fakenet.PipDownload(at(fakenet.DeniedIndex, 80)))
	assert.False(t, strings.HasPrefix(pip, "0 "), pip)
	assert.Contains(t, pip, "denied-index.test")

	// The other session reaches its host and not the first one's.
	port := in.Port(fakenet.Denied, 80)
	out := run(b, fmt.Sprintf(`(exec 3<>/dev/tcp/denied.test/%d && printf 'GET /from-b HTTP/1.0\r\nHost: %s\r\n\r\n' >&3 && head -1 <&3); (exec 3<>/dev/tcp/allowed.test/%d) 2>/dev/null || echo no-allowed`,
		port, at(fakenet.Denied, 80), in.Port(fakenet.Allowed, 80)))
	assert.Contains(t, out, "200", out)
	assert.Contains(t, out, "no-allowed", out)
	seen, err = in.Seen(ctx, fakenet.Denied)
	require.NoError(t, err)
	require.Len(t, seen, 1)
	assert.Equal(t, "/from-b", seen[0].Path)

	ref, err := c.EgressRefusals(ctx, a.Name())
	require.NoError(t, err)
	assert.Positive(t, ref.ByReason["not_allowed"], "%+v", ref.ByReason)
	assert.Positive(t, ref.ByReason["address"], "%+v", ref.ByReason)
	assert.Positive(t, ref.ByReason["mismatch"], "%+v", ref.ByReason)
	logs, err := c.Logs(ctx, a.Name(), 1<<20)
	require.NoError(t, err)
	assert.Contains(t, string(logs), "egress refused denied.test:")
}

// podGateway is the local cluster's pods' gateway, this machine's address on their bridge: the
// first address of the bridge's subnet (host-local's default), read from up.sh's CNI
// configuration, since the bridge itself comes with the first pod.
func podGateway(t *testing.T) string {
	b, err := os.ReadFile("/run/kube-local/cni/net.d/10-kube-local.conflist")
	require.NoError(t, err, "the local cluster's CNI configuration (scripts/kube/up.sh)")
	m := regexp.MustCompile(`"subnet":"([^"]+)"`).FindSubmatch(b)
	require.NotNil(t, m, "no subnet in %s", b)
	p, err := netip.ParsePrefix(string(m[1]))
	require.NoError(t, err)
	return p.Masked().Addr().Next().String()
}
