package docker

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/backend"
	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/volumes"
)

// The packages' errors keep their own class and gain backend's.
func TestMarkKeepsBothErrorClasses(t *testing.T) {
	err := mark(errors.Join(containers.ErrNotFound))
	assert.ErrorIs(t, err, backend.ErrNotFound)
	assert.ErrorIs(t, err, containers.ErrNotFound)
	assert.ErrorIs(t, mark(volumes.ErrNotFound), backend.ErrNotFound)
	assert.ErrorIs(t, mark(volumes.ErrInUse), backend.ErrInUse)
	assert.ErrorIs(t, mark(containers.ErrUnreachable), backend.ErrUnreachable)
	other := errors.New("other")
	assert.Equal(t, other, mark(other))
	assert.NoError(t, mark(nil))
}

// An engine that does not answer is backend.ErrUnreachable through the seam, named as dialled.
// Nothing listens on port 1: no Docker needed.
func TestUnreachableEngineThroughTheSeam(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	b, err := New("tcp://127.0.0.1:1")
	require.NoError(t, err)
	defer b.Close()
	assert.Equal(t, backend.Docker, b.Name())
	_, err = b.Runtime().List(context.Background())
	require.ErrorIs(t, err, backend.ErrUnreachable)
	assert.Contains(t, err.Error(), "tcp://127.0.0.1:1")
}
