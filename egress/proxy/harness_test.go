package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/runtimectl/runtimectl/egress"
)

// A fake internet in-process: upstream servers on this machine's loopback, reached by the proxy
// under names that egress.Config.Hosts maps to TEST-NET-2 addresses (198.51.100.0/24), which the
// test's dialer routes to the servers. The proxy is served on a unix socket and the session's
// side is a real egress.Relay on loopback ports chosen by the kernel.

const (
	addrAllowed = "198.51.100.1" // allowed.test and twin.test (one host, two names)
	addrDenied  = "198.51.100.2" // denied.test
	addrAPI     = "198.51.100.3" // api.test: secret headers
	addrGateway = "198.51.100.254"
	secretValue = "s3cret-value-0123456789"
)

// seen is what an upstream server got: the last request's host and headers.
type seen struct {
	mu      sync.Mutex
	host    string
	headers http.Header
	n       int
}

func (s *seen) last() (string, http.Header, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.host, s.headers.Clone(), s.n
}

type harness struct {
	t       *testing.T
	proxy   *Proxy
	relay   *egress.Relay
	logs    *syncBuffer
	seen    *seen
	roots   *x509.CertPool // the upstream CA, and the session's CA once fetched
	caPEM   []byte
	dialed  []string // upstream addresses the proxy dialled
	dialMu  sync.Mutex
	routes  map[string]string
	session string
	listen  string
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSpace(s.b.String()), "\n")
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// echo answers with the request's host and headers as JSON, and puts X-Key's value in a
// response header too (an upstream that echoes what it got).
func echo(s *seen) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.host, s.headers = r.Host, r.Header.Clone()
		s.n++
		s.mu.Unlock()
		w.Header().Set("X-Echo-Key", r.Header.Get("X-Key"))
		json.NewEncoder(w).Encode(map[string]any{"host": r.Host, "path": r.URL.Path, "headers": r.Header})
	})
}

type harnessOpts struct {
	allow   []string
	secrets []egress.Secret
	deny    []string
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	if o.allow == nil {
		o.allow = []string{"allowed.test", "api.test", "*.wild.test", "gw.test", "loop.test", "other.test:8080"}
	}
	h := &harness{t: t, logs: &syncBuffer{}, seen: &seen{}, routes: map[string]string{}, session: "s1"}

	upCertPEM, upKeyPEM, err := NewCA("upstream", []string{"test"})
	require.NoError(t, err)
	upCA, err := LoadCA(upCertPEM, upKeyPEM)
	require.NoError(t, err)
	h.roots = x509.NewCertPool()
	h.roots.AppendCertsFromPEM(upCertPEM)

	plain := httptest.NewServer(echo(h.seen))
	t.Cleanup(plain.Close)
	secure := httptest.NewUnstartedServer(echo(h.seen))
	secure.TLS = &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		name := hi.ServerName
		if name == "" {
			name = "allowed.test"
		}
		return upCA.Leaf(name)
	}}
	secure.Config.ErrorLog = log.New(io.Discard, "", 0) // the proxy closes the upstreams of refused tunnels
	secure.StartTLS()
	t.Cleanup(secure.Close)
	hostPortOf := func(u string) string { pu, _ := url.Parse(u); return pu.Host }
	for _, ip := range []string{addrAllowed, addrDenied, addrAPI, addrGateway} {
		h.routes[ip+":80"] = hostPortOf(plain.URL)
		h.routes[ip+":443"] = hostPortOf(secure.URL)
		h.routes[ip+":8080"] = hostPortOf(plain.URL)
	}

	cfg := egress.Config{
		Session:     h.session,
		Allow:       o.allow,
		Secrets:     o.secrets,
		StateDir:    t.TempDir(),
		UpstreamCAs: string(upCertPEM),
		Hosts: map[string][]string{
			"allowed.test": {addrAllowed}, "twin.test": {addrAllowed}, "denied.test": {addrDenied},
			"api.test": {addrAPI}, "a.wild.test": {addrAllowed}, "gw.test": {addrGateway}, "loop.test": {"127.0.0.1"},
			"other.test": {addrAllowed},
		},
		Deny:   append([]string{addrGateway}, o.deny...),
		Listen: "unix:" + filepath.Join(t.TempDir(), "proxy.sock"),
	}
	log := slog.New(slog.NewJSONHandler(h.logs, nil))
	p, err := New(cfg, WithLogger(log), withoutOwnAddresses(),
		WithLookup(func(ctx context.Context, host string) ([]netip.Addr, error) {
			return nil, fmt.Errorf("no such host %s", host)
		}),
		WithDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			h.dialMu.Lock()
			h.dialed = append(h.dialed, addr)
			h.dialMu.Unlock()
			real, ok := h.routes[addr]
			if !ok {
				return nil, errors.New("connect: no route to host")
			}
			return (&net.Dialer{}).DialContext(ctx, network, real)
		}))
	require.NoError(t, err)
	h.proxy = p
	h.listen = cfg.Listen
	l, err := egress.Listen(cfg.Listen)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	t.Cleanup(func() { p.Close() })
	go p.Serve(ctx, l)

	dial, err := egress.Dialer(cfg.Listen)
	require.NoError(t, err)
	allow, err := egress.ParseAllowHosts(o.allow)
	require.NoError(t, err)
	r, err := egress.ListenRelay(egress.RelayConfig{Addr: "127.0.0.1", Ports: allow.Ports(), Dial: dial, Bind: func(int) int { return 0 }})
	require.NoError(t, err)
	h.relay = r
	go r.Serve(ctx)

	h.caPEM, err = egress.FetchCA(ctx, dial)
	require.NoError(t, err)
	if len(h.caPEM) > 0 {
		require.True(t, h.roots.AppendCertsFromPEM(h.caPEM))
	}
	return h
}

// client is what a session's code uses: HTTP(S)_PROXY set to the relay's proxy port, the
// upstream's CA and the session's trusted.
func (h *harness) client() *http.Client {
	pu := &url.URL{Scheme: "http", Host: h.relay.Addr(egress.KindProxy, egress.ProxyPort)}
	return &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: h.roots}, DisableKeepAlives: true},
		Timeout:   10 * time.Second,
	}
}

// dialTransparent connects to the relay's port (as code that resolved an allowed name to the
// relay's address and ignores HTTP_PROXY does).
func (h *harness) dialTransparent(port int) net.Conn {
	c, err := net.DialTimeout("tcp", h.relay.Addr(egress.KindTCP, port), 5*time.Second)
	require.NoError(h.t, err)
	h.t.Cleanup(func() { c.Close() })
	return c
}

// query asks the relay's resolver over UDP.
func (h *harness) query(name string, typ dnsmessage.Type) dnsmessage.Message {
	h.t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 4242, RecursionDesired: true})
	require.NoError(h.t, b.StartQuestions())
	require.NoError(h.t, b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: typ, Class: dnsmessage.ClassINET}))
	q, err := b.Finish()
	require.NoError(h.t, err)
	c, err := net.Dial("udp", h.relay.Addr("udp", egress.DNSPort))
	require.NoError(h.t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Write(q)
	require.NoError(h.t, err)
	buf := make([]byte, 1500)
	n, err := c.Read(buf)
	require.NoError(h.t, err)
	var m dnsmessage.Message
	require.NoError(h.t, m.Unpack(buf[:n]))
	require.Equal(h.t, uint16(4242), m.ID)
	return m
}

// refusals returns the refusal lines logged so far.
func (h *harness) refusals() []egress.LogLine {
	var out []egress.LogLine
	for _, l := range h.logs.lines() {
		if ll, ok := egress.ParseLogLine(l); ok {
			out = append(out, ll)
		}
	}
	return out
}

// lastRefusal waits briefly for a refusal to be logged (a TLS alert can reach the client
// before the log line is written) and returns it.
func (h *harness) lastRefusal() egress.LogLine {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if r := h.refusals(); len(r) > 0 {
			return r[len(r)-1]
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no refusal logged; log: %s", h.logs.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
