package agent

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestThreadReserveKeepsMostOfTheLimitForTheCode(t *testing.T) {
	assert.Equal(t, 16, threadReserve(0), "no limit")
	assert.Equal(t, 16, threadReserve(512))
	assert.Equal(t, 16, threadReserve(64))
	assert.Equal(t, 8, threadReserve(32))
	assert.Equal(t, 2, threadReserve(8))
}

// threads is this process's number of OS threads, from /proc.
func threads(t *testing.T) int {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no Threads: line in /proc/self/status")
	return 0
}

func TestReserveThreadsLeavesThatManyThreadsIdle(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	want := threads(t) + 20
	reserveThreads(want)
	assert.GreaterOrEqual(t, threads(t), want, "the threads outlive the call: the runtime keeps them idle")
}
