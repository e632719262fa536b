package containers

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TLS failures become one line that names the engine and what to check, instead of the
// Docker client's "error during connect: Get ...".
func TestClassifyTLS(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	wrap := func(err error) error {
		return fmt.Errorf("error during connect: %w", &url.Error{Op: "Get", URL: "https://10.0.0.1:2376/v1.47/_ping", Err: err})
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"unknown authority", wrap(x509.UnknownAuthorityError{}), "certificate signed by unknown authority"},
		{"hostname", wrap(x509.HostnameError{Certificate: &x509.Certificate{}, Host: "build-box"}), "not valid for this host"},
		{"client refused", wrap(errors.New("remote error: tls: bad certificate")), "the engine refused this client's certificate"},
		{"client refused, TLS 1.3", wrap(errors.New("remote error: tls: certificate required")), "the engine refused this client's certificate"},
		{"plain to TLS", errors.New("Client sent an HTTP request to an HTTPS server."), "the engine expects TLS on this port"},
		{"TLS to plain", wrap(errors.New("http: server gave HTTP response to HTTPS client")), "does not speak TLS on this port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := classifyHost(tc.err, "tcp://10.0.0.1:2376")
			assert.ErrorIs(t, err, ErrUnreachable)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "DOCKER_")
			assert.NotContains(t, err.Error(), "\n")
			assert.True(t, strings.HasPrefix(err.Error(), ErrUnreachable.Error()+": TLS with tcp://10.0.0.1:2376: "), err.Error())
		})
	}
	assert.Empty(t, tlsProblem(errors.New("dial tcp 10.0.0.1:2376: connect: connection refused")))
}

// An engine that does not answer is named as the Manager dials it (--host), not as
// DOCKER_HOST or the default socket would name it. Nothing listens on port 1: no Docker needed.
func TestManagerNamesTheEngineItDials(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	cli, err := Dial("tcp://127.0.0.1:1")
	require.NoError(t, err)
	defer cli.Close()
	_, err = New(cli).List(context.Background())
	require.ErrorIs(t, err, ErrUnreachable)
	assert.Contains(t, err.Error(), "cannot be reached at tcp://127.0.0.1:1:")
	assert.NotContains(t, err.Error(), "docker.sock")
}
