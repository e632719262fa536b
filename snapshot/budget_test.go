package snapshot

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A byte bound keeps the newest snapshots that fit in it, and the newest alone when it is
// larger than the bound.
func TestPruneKeepsTheNewestWithinTheByteBound(t *testing.T) {
	s, err := OpenStore(t.TempDir(), 10, WithMaxBytes(2500))
	require.NoError(t, err)
	for seq := int64(1); seq <= 5; seq++ {
		commit(t, s, seq, strings.Repeat("x", 1000))
	}
	ms, _ := s.List()
	require.Len(t, ms, 2)
	assert.Equal(t, []int64{4, 5}, []int64{ms[0].Seq, ms[1].Seq})
	commit(t, s, 6, strings.Repeat("y", 5000))
	ms, _ = s.List()
	require.Len(t, ms, 1)
	assert.Equal(t, int64(6), ms[0].Seq)
}
