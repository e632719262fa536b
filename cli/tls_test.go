package cli_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// A remote engine behind TLS, as `DOCKER_HOST=tcp://... DOCKER_TLS_VERIFY=1
// DOCKER_CERT_PATH=...` names one: the test makes a CA and certificates, puts a TLS-terminating
// proxy that requires a client certificate from that CA on a loopback port in front of the
// local engine's unix socket, and drives a session through it with the CLI. Docker's hijacked
// exec streams are plain bytes once TLS is set up, so a byte-level proxy is enough.
func TestRemoteEngineWithTLS(t *testing.T) {
	testenv.Images(t) // built through the local engine, before DOCKER_HOST points elsewhere
	socket := localSocket(t)

	// Cleanups run last-in first-out: this one, registered before the t.Setenv calls, runs
	// after the environment is back to the local engine.
	name := testenv.Name(t)
	t.Cleanup(func() {
		de, err := docker.New("")
		if err != nil {
			return
		}
		c := session.NewWithEngine(de)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Remove(ctx, name, true)
	})

	dir := t.TempDir()
	ca := newCA(t, "runtimectl test CA")
	other := newCA(t, "some other CA")
	server := ca.issue(t, "engine", x509.ExtKeyUsageServerAuth)
	good := filepath.Join(dir, "good")
	writeCertDir(t, good, ca, ca.issue(t, "client", x509.ExtKeyUsageClientAuth))
	// A client certificate from another CA, with the right ca.pem: the engine refuses it.
	strangerCert := filepath.Join(dir, "stranger")
	writeCertDir(t, strangerCert, ca, other.issue(t, "stranger", x509.ExtKeyUsageClientAuth))
	// Everything from another CA: the client does not trust the engine's certificate.
	wrongCA := filepath.Join(dir, "wrong-ca")
	writeCertDir(t, wrongCA, other, other.issue(t, "client", x509.ExtKeyUsageClientAuth))

	addr := startTLSProxy(t, server, ca, socket)
	host := "tcp://" + addr

	t.Setenv("DOCKER_HOST", host)
	t.Setenv("DOCKER_TLS_VERIFY", "1")
	t.Setenv("DOCKER_CERT_PATH", good)

	code, stdout, stderr := runCLI(t, "", "version")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "at "+host+"\n", "the engine answers through the TLS proxy")

	code, stdout, stderr = runCLI(t, "", "session", "start", name, "--lang", "bash")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, name+"\n", stdout)
	code, stdout, stderr = runCLI(t, "", "session", "exec", name, "X=41; echo $((X+1)); echo to-stderr >&2")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "42\n", stdout)
	assert.Equal(t, "to-stderr\n", stderr)
	code, stdout, stderr = runCLI(t, "", "session", "exec", name, "echo $X")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "41\n", stdout, "the state is the session's, through a new TLS connection")

	// --host names the engine too (DOCKER_HOST pointing elsewhere).
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	code, stdout, stderr = runCLI(t, "", "--host", host, "session", "ls")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, name)
	t.Setenv("DOCKER_HOST", host)

	// Wrong certificates are refused, with one line that says what to check.
	for _, tc := range []struct{ dir, want string }{
		{wrongCA, "certificate signed by unknown authority"},
		{strangerCert, "the engine refused this client's certificate"},
	} {
		t.Setenv("DOCKER_CERT_PATH", tc.dir)
		code, stdout, stderr = runCLI(t, "", "session", "ls")
		assert.Equal(t, 125, code)
		assert.Empty(t, stdout)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
		assert.Contains(t, stderr, "TLS with "+host+": "+tc.want, stderr)
		assert.Contains(t, stderr, "check DOCKER_CERT_PATH")
		t.Logf("refused: %s", strings.TrimSpace(stderr))
	}
	// Plain TCP to the TLS port is told apart too.
	t.Setenv("DOCKER_TLS_VERIFY", "")
	t.Setenv("DOCKER_CERT_PATH", "")
	code, _, stderr = runCLI(t, "", "session", "ls")
	assert.Equal(t, 125, code)
	assert.Contains(t, stderr, "the engine expects TLS on this port")
	t.Logf("plain TCP: %s", strings.TrimSpace(stderr))

	t.Setenv("DOCKER_TLS_VERIFY", "1")
	t.Setenv("DOCKER_CERT_PATH", good)
	code, _, stderr = runCLI(t, "", "session", "rm", name, "--force")
	require.Equal(t, 0, code, stderr)
	code, stdout, _ = runCLI(t, "", "session", "ls")
	require.Equal(t, 0, code)
	assert.NotContains(t, stdout, name)
}

// localSocket is the unix socket of the engine the other tests use.
func localSocket(t *testing.T) string {
	h := os.Getenv("DOCKER_HOST")
	switch {
	case h == "":
		return "/var/run/docker.sock"
	case strings.HasPrefix(h, "unix://"):
		return strings.TrimPrefix(h, "unix://")
	}
	t.Skipf("the TLS proxy forwards to a unix socket; DOCKER_HOST is %s", h)
	return ""
}

type certAuthority struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

type issued struct {
	der []byte
	key *ecdsa.PrivateKey
}

var serial struct {
	sync.Mutex
	n int64
}

func nextSerial() *big.Int {
	serial.Lock()
	defer serial.Unlock()
	serial.n++
	return big.NewInt(time.Now().UnixNano() + serial.n)
}

func newCA(t *testing.T, cn string) *certAuthority {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &certAuthority{cert: cert, der: der, key: key}
}

func (ca *certAuthority) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) issued {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	return issued{der: der, key: key}
}

func pemBytes(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeCertDir lays out a DOCKER_CERT_PATH: ca.pem, cert.pem, key.pem.
func writeCertDir(t *testing.T, dir string, ca *certAuthority, c issued) {
	require.NoError(t, os.MkdirAll(dir, 0o700))
	keyDER, err := x509.MarshalECPrivateKey(c.key)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.pem"), pemBytes("CERTIFICATE", ca.der), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cert.pem"), pemBytes("CERTIFICATE", c.der), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "key.pem"), pemBytes("EC PRIVATE KEY", keyDER), 0o600))
}

// startTLSProxy listens on a loopback port with TLS, requires a client certificate signed by ca,
// and forwards each connection's bytes to the unix socket. It stops with the test.
func startTLSProxy(t *testing.T, server issued, ca *certAuthority, socket string) string {
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	cfg := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{server.der}, PrivateKey: server.key}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				// The handshake first, so that a refused client never reaches the engine.
				tc := c.(*tls.Conn)
				_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
				if err := tc.Handshake(); err != nil {
					// What dockerd (Go's HTTPS server) answers to plain HTTP on its TLS port.
					var rh tls.RecordHeaderError
					if errors.As(err, &rh) && rh.Conn != nil {
						_, _ = io.WriteString(rh.Conn, "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
					}
					return
				}
				_ = tc.SetDeadline(time.Time{})
				up, err := net.Dial("unix", socket)
				if err != nil {
					return
				}
				track(up)
				defer up.Close()
				relay(tc, up)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

type closeWriter interface{ CloseWrite() error }

// relay copies both ways; the end of one direction is passed on as a half-close (an exec's
// stdin ending), and the relay ends when both directions have.
func relay(a, b net.Conn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(closeWriter); ok && (err == nil || errors.Is(err, io.EOF)) {
			_ = cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}
