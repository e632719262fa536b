package containers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/docker/docker/client"
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

// ErrNotFound is returned when a container does not exist.
var ErrNotFound = errors.New("not found")

// ErrUnreachable wraps errors that mean the Docker engine could not be reached.
var ErrUnreachable = errors.New("the Docker engine cannot be reached")

// classify maps a Docker client error to the project's errors.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if errdefs.IsNotFound(err) {
		return fmt.Errorf("%w: %v", ErrNotFound, err)
	}
	if client.IsErrConnectionFailed(err) || strings.Contains(err.Error(), "Cannot connect to the Docker daemon") {
		host := os.Getenv("DOCKER_HOST")
		if host == "" {
			host = client.DefaultDockerHost
		}
		return fmt.Errorf("%w at %s: %v (is dockerd running? is DOCKER_HOST right?)", ErrUnreachable, host, err)
	}
	return err
}

// IsConflict reports whether err is Docker's "already exists / in use" class.
func IsConflict(err error) bool { return errdefs.IsConflict(err) }

// Ping checks that the engine answers and returns its version and API version.
func Ping(ctx context.Context, cli *client.Client) (string, string, error) {
	v, err := cli.ServerVersion(ctx)
	if err != nil {
		return "", "", classify(err)
	}
	return v.Version, v.APIVersion, nil
}
