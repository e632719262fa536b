package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type keyPair struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

func makeCert(t *testing.T, cn string, ca *keyPair, usage x509.ExtKeyUsage) *keyPair {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	parent, signer := tmpl, key
	if ca == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		tmpl.ExtKeyUsage = nil
	} else {
		parent, signer = ca.cert, ca.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &keyPair{cert: cert, der: der, key: key}
}

func (k *keyPair) write(t *testing.T, dir, name string) (certFile, keyFile string) {
	keyDER, err := x509.MarshalECPrivateKey(k.key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: k.der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// With --tls-ca, only clients with a certificate of that CA get in, and then a token is still
// needed.
func TestServeOverTLSWithClientCertificates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary (skipped under -short)")
	}
	dir := t.TempDir()
	ca := makeCert(t, "test CA", nil, 0)
	caFile, _ := ca.write(t, dir, "ca")
	srvCert, srvKey := makeCert(t, "localhost", ca, x509.ExtKeyUsageServerAuth).write(t, dir, "server")
	client := makeCert(t, "agent", ca, x509.ExtKeyUsageClientAuth)
	p := startServe(t, tokenFile(t), "--tls-cert", srvCert, "--tls-key", srvKey, "--tls-ca", caFile)
	require.True(t, strings.HasPrefix(p.base, "https://"), p.base)

	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	with := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool,
		Certificates: []tls.Certificate{{Certificate: [][]byte{client.der}, PrivateKey: client.key}}}}}
	resp, err := with.Get(p.base + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = with.Get(p.base + "/v1/sessions")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a certificate is not a token")

	// /mcp is behind the same TLS and tokens (issue 24): without a token 401, with one an MCP
	// client over TLS lists the tools; a client without a certificate does not get in.
	initialize := func(c *http.Client, hdr map[string]string) (int, error) {
		req, err := http.NewRequest("POST", p.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	code, err := initialize(with, nil)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, code, "/mcp without a token")
	code, err = initialize(with, map[string]string{"Authorization": "Bearer not-a-token-of-the-file"})
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, code, "/mcp with a wrong token")
	mcpClient := &http.Client{Transport: bearer{tokA, with.Transport}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tls", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.base + "/mcp", HTTPClient: mcpClient}, nil)
	require.NoError(t, err, "MCP over TLS with a token")
	tools, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)
	assert.NotEmpty(t, tools.Tools)
	require.NoError(t, cs.Close())
	_, err = initialize(&http.Client{Transport: bearer{tokA, &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}, nil)
	assert.Error(t, err, "/mcp without a client certificate is refused too")

	without := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err = without.Get(p.base + "/healthz")
	if err == nil {
		resp.Body.Close()
	}
	assert.Error(t, err, "a client without a certificate is refused")
	plain, err := http.Get(strings.Replace(p.base, "https://", "http://", 1) + "/healthz")
	if err == nil {
		assert.NotEqual(t, http.StatusOK, plain.StatusCode, "no plain HTTP on a TLS port")
		plain.Body.Close()
	}
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	assert.NoError(t, p.wait(t, 30*time.Second))
}

func TestServeOnAUnixSocket(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary (skipped under -short)")
	}
	sock := filepath.Join(t.TempDir(), "rt.sock")
	p := startServe(t, tokenFile(t), "--listen", "unix://"+sock)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := hc.Get("http://unix/healthz")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	resp, err = hc.Get("http://unix/v1/sessions")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	st, err := os.Stat(sock)
	require.NoError(t, err)
	assert.Zero(t, st.Mode().Perm()&0o007, "others cannot connect to the socket")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	assert.NoError(t, p.wait(t, 30*time.Second))
	_, err = os.Stat(sock)
	assert.True(t, os.IsNotExist(err), "the socket is removed when the server ends")
}

// bearer adds a token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
