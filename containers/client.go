package containers

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/internal/advice"
)

// Dial returns a Docker client for host, or for the engine that DOCKER_HOST (with
// DOCKER_TLS_VERIFY and DOCKER_CERT_PATH) or the default socket names, as the docker CLI does.
// The API version is negotiated with the engine, never assumed.
func Dial(host string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	return cli, nil
}

// The engine's errors, as this package returns them.
var (
	// ErrNotFound is returned when a container does not exist.
	ErrNotFound = engine.ErrNotFound
	// ErrConflict is a name another container has.
	ErrConflict = engine.ErrConflict
	// ErrBeingCreated is a container whose name another process took at the same moment and
	// that is not there (yet, or any more): the session is that process's to make.
	ErrBeingCreated = engine.Described(engine.ErrBeingCreated, "the container is being created by another process")
	// ErrUnreachable wraps errors that mean the Docker engine could not be reached.
	ErrUnreachable = engine.Described(engine.ErrUnreachable, "the Docker engine cannot be reached")
)

// classifyHost is classify for a client that dials host ("" for DOCKER_HOST or the default).
func classifyHost(err error, host string) error {
	if err == nil {
		return nil
	}
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		host = client.DefaultDockerHost
	}
	if what := tlsProblem(err); what != "" {
		return fmt.Errorf("%w: %s %s: %s", ErrUnreachable, "TLS with", host, what)
	}
	if client.IsErrConnectionFailed(err) || strings.Contains(err.Error(), "Cannot connect to the Docker daemon") {
		return advice.Errorf("%w at %s: %v (is dockerd running there? is %s right?)", ErrUnreachable, host, err, advice.Words{Lib: "DOCKER_HOST", CLI: "--host or DOCKER_HOST"})
	}
	return err
}

// tlsProblem says, in a few words, why a TLS connection to the engine failed and what to do,
// or "" when err is not about TLS. The Docker client's own words ("error during connect: Get
// ...") bury it.
func tlsProblem(err error) string {
	const certs = "; check DOCKER_CERT_PATH (ca.pem, cert.pem, key.pem) and DOCKER_TLS_VERIFY"
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		return "certificate signed by unknown authority (the engine's certificate is not signed by the CA in ca.pem)" + certs
	case errors.As(err, &hostname):
		return "the engine's certificate is not valid for this host (" + hostname.Error() + ")" + certs
	case errors.As(err, &invalid):
		return "the engine's certificate is not valid (" + invalid.Error() + ")" + certs
	}
	msg := err.Error()
	for _, s := range []string{"tls: bad certificate", "tls: unknown certificate authority", "tls: certificate required", "tls: unknown certificate"} {
		if strings.Contains(msg, s) {
			return "the engine refused this client's certificate (" + s + "): cert.pem and key.pem must be signed by a CA that the engine trusts" + certs
		}
	}
	switch {
	case strings.Contains(msg, "server gave HTTP response to HTTPS client"):
		return "the engine does not speak TLS on this port; unset DOCKER_TLS_VERIFY or use the engine's TLS port"
	case strings.Contains(msg, "malformed HTTP response") || strings.Contains(msg, "TLS-enabled daemon without TLS") ||
		strings.Contains(msg, "Client sent an HTTP request to an HTTPS server"):
		return "the engine expects TLS on this port; set DOCKER_TLS_VERIFY=1 and DOCKER_CERT_PATH (a directory with ca.pem, cert.pem, key.pem)"
	case strings.Contains(msg, "x509: "):
		return oneLine(msg[strings.Index(msg, "x509: "):]) + certs
	case strings.Contains(msg, "remote error: tls: "):
		return "the engine ended the handshake (" + oneLine(msg[strings.Index(msg, "remote error: tls: "):]) + ")" + certs
	case strings.Contains(msg, "tls: "):
		return oneLine(msg[strings.Index(msg, "tls: "):]) + certs
	}
	return ""
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// IsConflict reports whether err is Docker's "already exists / in use" class.
func IsConflict(err error) bool { return errdefs.IsConflict(err) }

// Ping checks that the engine answers and returns its version and API version.
func Ping(ctx context.Context, cli *client.Client) (string, string, error) {
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		return "", "", classifyHost(err, cli.DaemonHost())
	}
	return v.Version, v.APIVersion, nil
}
