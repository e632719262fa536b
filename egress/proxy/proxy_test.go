package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/dns/dnsmessage"

	"github.com/runtimectl/runtimectl/egress"
)

func get(t *testing.T, c *http.Client, url string) (*http.Response, string, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

func TestAllowedHTTPAndHTTPSReachTheirHost(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	resp, body, err := get(t, h.client(), "http://allowed.test/x")
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, body, `"host":"allowed.test"`)

	resp, body, err = get(t, h.client(), "https://allowed.test/y")
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, body, `"path":"/y"`)
	require.NotNil(t, resp.TLS)
	assert.Equal(t, "runtimectl egress CA for session upstream", resp.TLS.PeerCertificates[0].Issuer.CommonName, "spliced: the session sees the host's own certificate")

	resp, _, err = get(t, h.client(), "https://a.b.wild.test/")
	require.Error(t, err, "a.b.wild.test is allowed but does not resolve")
	assert.Nil(t, resp)
	assert.Contains(t, err.Error(), "does not resolve")

	resp, _, err = get(t, h.client(), "http://other.test:8080/")
	require.NoError(t, err, "an allowed port")
	assert.Equal(t, 200, resp.StatusCode)
	assert.Empty(t, h.refusals())
}

func TestDeniedNamesAreRefusedWithTheHostAndTheFlag(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	resp, body, err := get(t, h.client(), "http://denied.test/")
	require.NoError(t, err)
	assert.Equal(t, 403, resp.StatusCode)
	assert.Equal(t, "refused", resp.Header.Get("X-Runtimectl-Egress"))
	want := "runtimectl egress: denied.test:80 is not allowed in session s1; allow it with --allow-host denied.test"
	assert.Equal(t, want+"\n", body)
	assert.Equal(t, "403 "+want, resp.Status, "the reason phrase carries the message: tools print it")

	_, _, err = get(t, h.client(), "https://denied.test/")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "denied.test:443 is not allowed in session s1; allow it with --allow-host denied.test")

	_, _, err = get(t, h.client(), "https://allowed.test:8443/")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "allowed.test is allowed in session s1 on port 80 and 443 only, not 8443; allow it with --allow-host allowed.test:8443")

	_, _, err = get(t, h.client(), "https://twin.test/")
	require.Error(t, err, "the other name of an allowed host's address is not allowed")
	assert.Contains(t, err.Error(), "twin.test:443 is not allowed")

	lines := h.refusals()
	require.Len(t, lines, 4)
	assert.Equal(t, egress.ViaHTTP, lines[0].Via)
	assert.Equal(t, "denied.test", lines[0].Host)
	assert.Equal(t, 80, lines[0].Port)
	assert.Equal(t, egress.ReasonNotAllowed, lines[0].Reason)
	assert.Equal(t, egress.ViaConnect, lines[1].Via)
	assert.Equal(t, int64(4), lines[3].Refusals[egress.ReasonNotAllowed], "each line carries the counts so far")
	assert.Equal(t, int64(4), h.proxy.Refusals()[egress.ReasonNotAllowed])
	assert.Contains(t, lines[0].String(), "egress refused denied.test:80 (http, not_allowed): runtimectl egress: denied.test:80 is not allowed")
	for _, a := range h.dialed {
		assert.NotContains(t, a, addrDenied, "a refused host is never dialled")
	}
}

func TestDirectAddressesAreRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	resp, body, err := get(t, h.client(), "http://"+addrAllowed+"/")
	require.NoError(t, err)
	assert.Equal(t, 403, resp.StatusCode)
	assert.Contains(t, body, "198.51.100.1 is an address; session s1 reaches hosts by name (allow this address itself with --allow-host 198.51.100.1:80)")
	_, _, err = get(t, h.client(), "https://[2001:db8::1]/")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2001:db8::1 is an address")
	assert.Equal(t, int64(2), h.proxy.Refusals()[egress.ReasonAddress])
}

func TestAnAllowedAddressIsReached(t *testing.T) {
	h := newHarness(t, harnessOpts{allow: []string{addrAllowed + ":8080", addrGateway + ":80"}})
	resp, _, err := get(t, h.client(), "http://"+addrAllowed+":8080/")
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	resp, _, err = get(t, h.client(), "http://"+addrGateway+"/")
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode, "the engine's host is reached when its address itself is allowed")
}

func TestNamesThatResolveToTheHostOrLoopbackAreRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	resp, body, err := get(t, h.client(), "http://gw.test/")
	require.NoError(t, err)
	assert.Equal(t, 403, resp.StatusCode)
	assert.Contains(t, body, "gw.test resolves to 198.51.100.254 (the engine's host), which session s1 may not reach; allow that address itself with --allow-host 198.51.100.254:80")
	_, _, err = get(t, h.client(), "https://loop.test/")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "loop.test resolves to 127.0.0.1 (loopback)")
	for _, a := range h.dialed {
		assert.NotContains(t, a, addrGateway)
	}
	assert.Equal(t, int64(2), h.proxy.Refusals()[egress.ReasonAddress])
}

// connect opens a CONNECT tunnel to target through the session's proxy port.
func (h *harness) connect(target string) (net.Conn, *bufio.Reader) {
	h.t.Helper()
	c, err := net.Dial("tcp", h.relay.Addr(egress.KindProxy, egress.ProxyPort))
	require.NoError(h.t, err)
	h.t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(h.t, err)
	require.Equal(h.t, 200, resp.StatusCode)
	return c, br
}

func TestAServerNameThatIsNotTheConnectTargetIsRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c, br := h.connect("allowed.test:443")
	tc := tls.Client(&bufConn{Conn: c, r: br}, &tls.Config{ServerName: "denied.test", RootCAs: h.roots})
	err := tc.Handshake()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "access denied")
	l := h.lastRefusal()
	assert.Equal(t, egress.ReasonMismatch, l.Reason)
	assert.Contains(t, l.Message, `the TLS server name "denied.test" is not "allowed.test"`)
}

func TestNotTLSInAConnectIsRefusedReadably(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c, br := h.connect("allowed.test:443")
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	assert.Equal(t, 403, resp.StatusCode)
	assert.Contains(t, resp.Status, "neither TLS with a server name nor HTTP")
	assert.Equal(t, int64(1), h.proxy.Refusals()[egress.ReasonProtocol])
}

func TestTransparentTLSGoesByServerName(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	tc := tls.Client(h.dialTransparent(443), &tls.Config{ServerName: "allowed.test", RootCAs: h.roots})
	require.NoError(t, tc.Handshake())
	fmt.Fprintf(tc, "GET /t HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)

	tc = tls.Client(h.dialTransparent(443), &tls.Config{ServerName: "denied.test", RootCAs: h.roots})
	assert.ErrorContains(t, tc.Handshake(), "access denied")
	l := h.lastRefusal()
	assert.Equal(t, "denied.test", l.Host)
	assert.Equal(t, egress.ViaTLS, l.Via)

	tc = tls.Client(h.dialTransparent(443), &tls.Config{InsecureSkipVerify: true}) // no server name
	assert.ErrorContains(t, tc.Handshake(), "access denied")
	assert.Equal(t, int64(1), h.proxy.Refusals()[egress.ReasonProtocol])
}

func TestTransparentHTTPGoesByHost(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c := h.dialTransparent(80)
	fmt.Fprintf(c, "GET /h HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	io.Copy(io.Discard, resp.Body)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: twin.test\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	assert.Equal(t, 403, resp.StatusCode, "the same connection, another Host: checked again")
	assert.Contains(t, resp.Status, "twin.test:80 is not allowed")

	c = h.dialTransparent(8080)
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: other.test:8080\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode, "a port named in the allowlist is relayed too")

	c = h.dialTransparent(80)
	fmt.Fprintf(c, "\x00\x01 not http\r\n\r\n")
	resp, err = http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	assert.Equal(t, 400, resp.StatusCode, "net/http answers what is not HTTP")
}

func TestTheResolverAnswersOnlyAllowedNamesAndAsksNoOne(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	m := h.query("allowed.test", dnsmessage.TypeA)
	assert.Equal(t, dnsmessage.RCodeSuccess, m.RCode)
	require.Len(t, m.Answers, 1)
	assert.Equal(t, [4]byte{127, 0, 0, 1}, m.Answers[0].Body.(*dnsmessage.AResource).A, "the relay's address: the proxy again")

	m = h.query("x.y.wild.test", dnsmessage.TypeA)
	assert.Equal(t, dnsmessage.RCodeSuccess, m.RCode)
	assert.Len(t, m.Answers, 1)

	m = h.query("allowed.test", dnsmessage.TypeAAAA)
	assert.Equal(t, dnsmessage.RCodeSuccess, m.RCode)
	assert.Empty(t, m.Answers, "no IPv6")

	m = h.query("Y2F0IC9ldGMvcGFzc3dk.denied.test", dnsmessage.TypeTXT)
	assert.Equal(t, dnsmessage.RCodeNameError, m.RCode)
	l := h.lastRefusal()
	assert.Equal(t, egress.ViaDNS, l.Via)
	assert.Equal(t, "y2f0ic9ldgmvcgfzc3dk.denied.test", l.Host)
	assert.Contains(t, l.Message, "allow it with --allow-host y2f0ic9ldgmvcgfzc3dk.denied.test")

	m = h.query("1.0.0.127.in-addr.arpa", dnsmessage.TypePTR)
	assert.Equal(t, dnsmessage.RCodeNameError, m.RCode)
	assert.Equal(t, int64(1), h.proxy.Refusals()[egress.ReasonNotAllowed], "a reverse lookup is not a refusal")
	assert.Empty(t, h.dialed, "the resolver never dials")
}

func TestDNSOverTCPThroughTheRelay(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	c, err := net.Dial("tcp", h.relay.Addr(egress.KindDNS, egress.DNSPort))
	require.NoError(t, err)
	defer c.Close()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("api.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	for range 2 { // two queries on one stream
		a, err := exchangeDNS(t, c, q)
		require.NoError(t, err)
		var m dnsmessage.Message
		require.NoError(t, m.Unpack(a))
		assert.Len(t, m.Answers, 1)
	}
}

func TestAnswerDNSRefusesMalformedQueries(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	assert.Nil(t, h.proxy.AnswerDNS([]byte{1, 2, 3}))
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 9})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("a.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("b.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, _ := b.Finish()
	var m dnsmessage.Message
	require.NoError(t, m.Unpack(h.proxy.AnswerDNS(q)))
	assert.Equal(t, dnsmessage.RCodeFormatError, m.RCode)
	b = dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 9})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("allowed.test."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassCHAOS})
	q, _ = b.Finish()
	require.NoError(t, m.Unpack(h.proxy.AnswerDNS(q)))
	assert.Equal(t, dnsmessage.RCodeNotImplemented, m.RCode)
}

func secretHarness(t *testing.T) *harness {
	return newHarness(t, harnessOpts{
		allow:   []string{"allowed.test", "api.test"},
		secrets: []egress.Secret{{Host: "api.test", Header: "X-Key", Value: secretValue}},
	})
}

func TestASecretHeaderReachesItsHostOverHTTPS(t *testing.T) {
	h := secretHarness(t)
	require.NotEmpty(t, h.caPEM)
	req, _ := http.NewRequest("GET", "https://api.test/v1", nil)
	req.Header.Set("X-Key", "what-the-code-says")
	resp, err := h.client().Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode)
	host, headers, _ := h.seen.last()
	assert.Equal(t, "api.test", host)
	assert.Equal(t, secretValue, headers.Get("X-Key"), "the proxy's value replaces the code's")
	assert.NotContains(t, string(body), secretValue, "an echo of the request is redacted")
	assert.Contains(t, string(body), "[redacted by runtimectl egress]")
	assert.Equal(t, "[redacted by runtimectl egress]", resp.Header.Get("X-Echo-Key"))
	require.NotNil(t, resp.TLS)
	assert.Equal(t, "runtimectl egress CA for session s1", resp.TLS.PeerCertificates[0].Issuer.CommonName, "terminated by the proxy with the session's CA")

	_, body2, err := get(t, h.client(), "https://allowed.test/")
	require.NoError(t, err)
	_, headers, _ = h.seen.last()
	assert.Empty(t, headers.Get("X-Key"), "other hosts get no secret")
	assert.NotContains(t, body2, secretValue)
}

func TestASecretHeaderReachesItsHostOverHTTP(t *testing.T) {
	h := secretHarness(t)
	resp, body, err := get(t, h.client(), "http://api.test/")
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	_, headers, _ := h.seen.last()
	assert.Equal(t, secretValue, headers.Get("X-Key"))
	assert.NotContains(t, body, secretValue)
}

func TestASecretHeaderReachesItsHostTransparently(t *testing.T) {
	h := secretHarness(t)
	tc := tls.Client(h.dialTransparent(443), &tls.Config{ServerName: "api.test", RootCAs: h.roots})
	require.NoError(t, tc.Handshake())
	fmt.Fprintf(tc, "GET /t HTTP/1.1\r\nHost: api.test\r\n\r\n")
	br := bufio.NewReader(tc)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	io.Copy(io.Discard, resp.Body)
	assert.Equal(t, 200, resp.StatusCode)
	_, headers, _ := h.seen.last()
	assert.Equal(t, secretValue, headers.Get("X-Key"))

	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	resp, err = http.ReadResponse(br, nil)
	require.NoError(t, err)
	assert.Equal(t, 403, resp.StatusCode, "a Host other than the server name inside terminated TLS")
	assert.Contains(t, resp.Status, `the Host header "allowed.test" is not "api.test"`)
	_, _, n := h.seen.last()
	assert.Equal(t, 1, n, "the mismatched request went nowhere")
}

func TestTheSessionCAIsConstrainedToTheSecretHosts(t *testing.T) {
	h := secretHarness(t)
	block, _ := pem.Decode(h.caPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	assert.Equal(t, []string{"api.test"}, ca.PermittedDNSDomains)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	good, err := h.proxy.ca.Leaf("api.test")
	require.NoError(t, err)
	_, err = good.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "api.test"})
	assert.NoError(t, err)
	bad, err := h.proxy.ca.Leaf("pypi.org")
	require.NoError(t, err)
	_, err = bad.Leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "pypi.org"})
	assert.Error(t, err, "a certificate the CA signs for another name is not valid")
}

func TestTheSessionCAIsKeptAcrossProxyStarts(t *testing.T) {
	dir := t.TempDir()
	cfg := egress.Config{Session: "s1", Allow: []string{"api.test"}, Secrets: []egress.Secret{{Host: "api.test", Header: "X-Key", Value: secretValue}}, StateDir: dir, Listen: "tcp:127.0.0.1:0"}
	p1, err := New(cfg)
	require.NoError(t, err)
	defer p1.Close()
	p2, err := New(cfg)
	require.NoError(t, err)
	defer p2.Close()
	assert.Equal(t, p1.CACertPEM(), p2.CACertPEM())

	cfg.Secrets = append(cfg.Secrets, egress.Secret{Host: "api.test", Header: "X-Other", Value: secretValue})
	p3, err := New(cfg)
	require.NoError(t, err)
	defer p3.Close()
	assert.Equal(t, p1.CACertPEM(), p3.CACertPEM(), "same names, same CA")
	cfg.Allow = append(cfg.Allow, "b.test")
	cfg.Secrets = append(cfg.Secrets, egress.Secret{Host: "b.test", Header: "X-Key", Value: secretValue})
	p4, err := New(cfg)
	require.NoError(t, err)
	defer p4.Close()
	assert.NotEqual(t, p1.CACertPEM(), p4.CACertPEM(), "other names, a new CA")
}

func TestNoSecretsNoCA(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	assert.Empty(t, h.caPEM)
	assert.Nil(t, h.proxy.ca)
}

func TestAnUnreachableHostIsABadGatewayNotARefusal(t *testing.T) {
	h := newHarness(t, harnessOpts{allow: []string{"allowed.test:9999"}})
	resp, body, err := get(t, h.client(), "http://allowed.test:9999/")
	require.NoError(t, err)
	assert.Equal(t, 502, resp.StatusCode)
	assert.Contains(t, body, "cannot reach allowed.test:9999")
	assert.Empty(t, h.proxy.Refusals())
}

func TestTheProxyPortAnswersWhatIsNotAProxyRequest(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	resp, body, err := get(t, &http.Client{}, "http://"+h.relay.Addr(egress.KindProxy, egress.ProxyPort)+"/")
	require.NoError(t, err)
	assert.Equal(t, 400, resp.StatusCode)
	assert.Contains(t, body, "this is the session's HTTP proxy")
}

func TestABadPreambleClosesTheConnection(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for _, pre := range []string{"GET / HTTP/1.1\r\n\r\n", "RUNTIMECTL-EGRESS/1 nope 1\n", "RUNTIMECTL-EGRESS/1 tcp 99999\n", "RUNTIMECTL-EGRESS/2 tcp 80\n"} {
		c, err := net.Dial("unix", strings.TrimPrefix(h.proxyListen(), "unix:"))
		require.NoError(t, err)
		io.WriteString(c, pre)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(make([]byte, 10))
		assert.Equal(t, 0, n, pre)
		assert.ErrorIs(t, err, io.EOF, pre)
		c.Close()
	}
}

func (h *harness) proxyListen() string { return h.listen }

func TestTheRelayEndsAConnectionAtOnceWhenTheProxyIsDown(t *testing.T) {
	dial, err := egress.Dialer("unix:" + t.TempDir() + "/none.sock")
	require.NoError(t, err)
	r, err := egress.ListenRelay(egress.RelayConfig{Addr: "127.0.0.1", Ports: []int{80}, Dial: dial, Bind: func(int) int { return 0 }})
	require.NoError(t, err)
	ctx := t.Context()
	go r.Serve(ctx)
	c, err := net.Dial("tcp", r.Addr(egress.KindProxy, egress.ProxyPort))
	require.NoError(t, err)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF)
}

func TestRefusalsAreCountedAllButLoggedAtARate(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	for range 200 {
		h.proxy.AnswerDNS(dnsQuery(t, "denied.test"))
	}
	assert.Equal(t, int64(200), h.proxy.Refusals()[egress.ReasonNotAllowed])
	lines := h.refusals()
	assert.Less(t, len(lines), 200)
	assert.GreaterOrEqual(t, len(lines), 50)
	time.Sleep(100 * time.Millisecond) // the limiter refills
	h.proxy.AnswerDNS(dnsQuery(t, "denied.test"))
	lines = h.refusals()
	last := lines[len(lines)-1]
	assert.Equal(t, int64(201), last.Refusals[egress.ReasonNotAllowed], "the last line written has every refusal's count")
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(h.logs.lines()[len(h.logs.lines())-1]), &raw))
	assert.NotZero(t, raw["not_logged"], "it says how many were not written")
}

func dnsQuery(t *testing.T, name string) []byte {
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name + "."), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	q, err := b.Finish()
	require.NoError(t, err)
	return q
}

func TestConfigErrorsSayWhatIsWrong(t *testing.T) {
	for _, c := range []struct {
		cfg   egress.Config
		words string
	}{
		{egress.Config{Allow: []string{"a.test"}}, "no session"},
		{egress.Config{Session: "s", Allow: []string{"https://a.test"}}, "not a URL"},
		{egress.Config{Session: "s", Allow: []string{"a.test"}, Secrets: []egress.Secret{{Host: "b.test", Header: "X", Value: "v"}}}, "secret host b.test is not allowed"},
		{egress.Config{Session: "s", Allow: []string{"a.test"}, Secrets: []egress.Secret{{Host: "a.test", Header: "X", Value: "v\r\nEvil: 1"}}}, "line break"},
		{egress.Config{Session: "s", Allow: []string{"a.test"}, Secrets: []egress.Secret{{Host: "a.test", Header: "X", Value: "v"}}}, "need a CA"},
		{egress.Config{Session: "s", Allow: []string{"a.test"}, Hosts: map[string][]string{"a.test": {"nope"}}}, "not an address"},
		{egress.Config{Session: "s", Allow: []string{"a.test"}, Deny: []string{"10.0.0.0/33"}}, "not an address or prefix"},
		{egress.Config{Session: "s", Allow: []string{"a.test"}, Answer: "::1"}, "not an IPv4 address"},
		{egress.Config{Session: "s", Allow: []string{"a.test"}, UpstreamCAs: "junk"}, "no PEM certificate"},
	} {
		_, err := New(c.cfg)
		require.Error(t, err, c.words)
		assert.Contains(t, err.Error(), c.words)
	}
}

func TestConfigRoundTrips(t *testing.T) {
	c := egress.Config{Session: "s", Allow: []string{"a.test"}, Secrets: []egress.Secret{{Host: "a.test", Header: "X", Value: "v"}}, Listen: "unix:/x"}
	back, err := egress.DecodeConfig(c.Encode())
	require.NoError(t, err)
	assert.Equal(t, c, back)
	_, err = egress.DecodeConfig("{")
	assert.Error(t, err)
}

func TestForbiddenAddresses(t *testing.T) {
	d := &dialer{deny: []netip.Prefix{netip.MustParsePrefix("172.17.0.1/32"), netip.MustParsePrefix("10.9.0.0/16")}}
	for addr, want := range map[string]string{
		"127.0.0.1":         "loopback",
		"::1":               "loopback",
		"169.254.169.254":   "link-local",
		"fe80::1":           "link-local",
		"0.0.0.0":           "not a host",
		"0.1.2.3":           "not a host",
		"224.0.0.1":         "link-local",
		"239.1.2.3":         "not a host",
		"255.255.255.255":   "not a host",
		"::":                "not a host",
		"172.17.0.1":        "the engine's host",
		"::ffff:172.17.0.1": "the engine's host",
		"10.9.3.4":          "the engine's host",
		"172.17.0.2":        "",
		"8.8.8.8":           "",
		"2001:db8::1":       "",
	} {
		assert.Equal(t, want, d.forbidden(netip.MustParseAddr(addr)), addr)
	}
}

func TestGatewaysParseTheRouteTables(t *testing.T) {
	// On Linux /proc exists; a gateway, when there is one, is a unicast address.
	for _, g := range gateways() {
		assert.False(t, g.IsUnspecified(), g.String())
	}
}

func exchangeDNS(t *testing.T, c net.Conn, q []byte) ([]byte, error) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(append(binary.BigEndian.AppendUint16(nil, uint16(len(q))), q...)); err != nil {
		return nil, err
	}
	var lenb [2]byte
	if _, err := io.ReadFull(c, lenb[:]); err != nil {
		return nil, err
	}
	a := make([]byte, binary.BigEndian.Uint16(lenb[:]))
	_, err := io.ReadFull(c, a)
	return a, err
}
