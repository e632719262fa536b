package volumes

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/volume"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
)

// busyAPI refuses the first busy measurements as Docker 20.10 does while another runs.
type busyAPI struct {
	API
	busy  int
	calls int
	err   error
}

func (b *busyAPI) DiskUsage(context.Context, types.DiskUsageOptions) (types.DiskUsage, error) {
	b.calls++
	if b.calls <= b.busy {
		return types.DiskUsage{}, errors.New("Error response from daemon: a disk usage operation is already running")
	}
	if b.err != nil {
		return types.DiskUsage{}, b.err
	}
	return types.DiskUsage{Volumes: []*volume.Volume{{Name: "w", Labels: map[string]string{contract.LabelSession: "s"},
		UsageData: &volume.UsageData{Size: 7}}}}, nil
}

func TestListWaitsForAnotherClientsMeasurement(t *testing.T) {
	api := &busyAPI{busy: 3}
	vols, err := (&Manager{api: api}).List(context.Background(), true)
	require.NoError(t, err)
	assert.Equal(t, 4, api.calls, "asked again after each refusal")
	require.Len(t, vols, 1)
	assert.Equal(t, "s", vols[0].Session)
}

func TestListGivesUpOnABusyEngineWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := (&Manager{api: &busyAPI{busy: 1 << 30}}).List(ctx, true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "still measuring for another client")
}

func TestListDoesNotRetryOtherErrors(t *testing.T) {
	api := &busyAPI{err: errors.New("boom")}
	_, err := (&Manager{api: api}).List(context.Background(), true)
	require.ErrorContains(t, err, "measure volumes: boom")
	assert.Equal(t, 1, api.calls)
}
