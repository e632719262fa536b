package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/internal/seamtest"
	"github.com/runtimectl/runtimectl/internal/testenv"
)

// The backend-neutral tests (internal/seamtest) on Docker; kube runs the same on Kubernetes.
func dockerEnv(t *testing.T) seamtest.Env {
	c := testenv.Client(t)
	return seamtest.Env{
		Client: c,
		Name:   func(t *testing.T) string { return testenv.Name(t) },
		Kill: func(t *testing.T, name string) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			require.NoError(t, docker.From(c).Containers().Remove(ctx, name, true))
		},
	}
}

func TestBackendLifecycleOnDocker(t *testing.T) { seamtest.Lifecycle(t, dockerEnv(t)) }

func TestBackendVerbsOnDocker(t *testing.T) { seamtest.Verbs(t, dockerEnv(t)) }

func TestBackendPoolsOnDocker(t *testing.T) { seamtest.Pools(t, dockerEnv(t)) }
