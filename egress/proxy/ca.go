package proxy

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// The session's CA. The proxy terminates TLS only for the hosts of secret headers, with leaf
// certificates this CA signs, and the session trusts it (its agent adds it to the session's
// trust bundle). The CA is name-constrained to those hosts: whoever held its key could sign
// for them only, and only a session that trusts it would believe the signature.

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	leafValidity = 7 * 24 * time.Hour
	caCertFile   = "ca.pem"
	caKeyFile    = "ca.key"
)

// egress.NewCA makes a session's CA for the names of its secret hosts (a wildcard's suffix stands
// for its subdomains): certificate and key, PEM.
func NewCA(session string, names []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:                serial,
		Subject:                     pkix.Name{CommonName: "runtimectl egress CA for session " + session, Organization: []string{"runtimectl"}},
		NotBefore:                   now.Add(-time.Hour),
		NotAfter:                    now.Add(caValidity),
		KeyUsage:                    x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid:       true,
		IsCA:                        true,
		MaxPathLenZero:              true,
		PermittedDNSDomainsCritical: true,
		PermittedDNSDomains:         slices.Clone(names),
		// no certificate for an address
		ExcludedIPRanges: []*net.IPNet{{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, {IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// CA signs leaf certificates for the secret hosts, and keeps them.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte

	mu     sync.Mutex
	leaves map[string]*tls.Certificate
}

// LoadCA loads a CA that NewCA made.
func LoadCA(certPEM, keyPEM []byte) (*CA, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("egress CA: %w", err)
	}
	key, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, errors.New("egress CA: not a CA certificate with a signing key")
	}
	return &CA{cert: cert, key: key, certPEM: certPEM, leaves: map[string]*tls.Certificate{}}, nil
}

// loadOrCreateCA loads the CA kept in dir, or makes one there when there is none or the one
// there is for other names.
func loadOrCreateCA(dir, session string, names []string) (*CA, error) {
	certPEM, err1 := os.ReadFile(filepath.Join(dir, caCertFile))
	keyPEM, err2 := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err1 == nil && err2 == nil {
		if a, err := LoadCA(certPEM, keyPEM); err == nil && slices.Equal(a.cert.PermittedDNSDomains, names) && time.Until(a.cert.NotAfter) > leafValidity {
			return a, nil
		}
	} else if !errors.Is(err1, fs.ErrNotExist) && err1 != nil {
		return nil, fmt.Errorf("egress CA: %w", err1)
	}
	certPEM, keyPEM, err := NewCA(session, names)
	if err != nil {
		return nil, err
	}
	// the key first, each written whole then renamed: a crash leaves the old pair or a
	// certificate without its key, which the next start replaces
	if err := writeFileAtomic(filepath.Join(dir, caKeyFile), keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(dir, caCertFile), certPEM, 0o644); err != nil {
		return nil, err
	}
	return LoadCA(certPEM, keyPEM)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return fmt.Errorf("egress CA: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("egress CA: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("egress CA: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("egress CA: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("egress CA: %w", err)
	}
	return nil
}

// Leaf returns a certificate for names, signed by the CA, made once and again near its end.
func (a *CA) Leaf(names ...string) (*tls.Certificate, error) {
	key := strings.Join(names, " ")
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.leaves[key]; ok && time.Until(c.Leaf.NotAfter) > time.Hour {
		return c, nil
	}
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: names[0]},
		DNSNames:     names,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(leafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &priv.PublicKey, a.key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der, a.cert.Raw}, PrivateKey: priv, Leaf: leaf}
	a.leaves[key] = c
	return c, nil
}
