package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/execproto"
)

// members returns the names of the fake world's runtimes of pool.
func (f *fakeEngine) members(pool string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name := range f.ctrs {
		if strings.HasPrefix(name, poolPrefix+pool+".") {
			out = append(out, name)
		}
	}
	return out
}

// Every branch of a pool claim on the fake engine: a start takes a ready member (its agent says
// yes once, the engine adopts it) or makes the session itself.
func TestPoolClaimBranchesOnAFakeEngine(t *testing.T) {
	tests := []struct {
		name  string
		setup func(f *fakeEngine)
		spec  Spec
		// claimed says the start took the member; else it made the session itself.
		claimed bool
		// membersLeft is how many members the pool has after the start.
		membersLeft int
		// other starts from another client than the one that made the member (which keeps a
		// stream to it): it finds the member among the engine's runtimes.
		other bool
	}{
		{name: "a start of the pool's settings takes the ready member its client made", spec: Spec{Name: "s", Lang: "bash"}, claimed: true},
		{name: "a start by another client takes the member it finds in the engine", spec: Spec{Name: "s", Lang: "bash"}, claimed: true, other: true},
		{name: "a start of other settings makes its own session", spec: Spec{Name: "s", Lang: "bash", Memory: 1 << 30}, membersLeft: 1},
		{name: "a start with volume options makes its own session", spec: Spec{Name: "s", Lang: "bash", VolumeOpts: map[string]string{"type": "tmpfs"}}, membersLeft: 1},
		{
			name: "a member whose agent says it is taken is left to the start that took it",
			setup: func(f *fakeEngine) {
				f.agent = func(_ string, srv *execproto.ServerConn, id uint32, req execproto.Request) bool {
					if req.Op != execproto.OpClaim {
						return false
					}
					_ = srv.SendError(id, "claimed", "taken by another start")
					return true
				}
			},
			spec: Spec{Name: "s", Lang: "bash"}, membersLeft: 1,
		},
		{
			name: "a member the engine cannot adopt is removed, and the start makes the session",
			setup: func(f *fakeEngine) {
				f.adopt = func(context.Context, string, string, string) error { return errors.New("rename refused") }
			},
			spec: Spec{Name: "s", Lang: "bash"},
		},
		{
			name: "a member past the pool's ttl is not taken",
			setup: func(f *fakeEngine) {
				for _, m := range f.members("p") {
					f.ctrs[m].info.Created = time.Now().Add(-2 * DefaultPoolTTL)
				}
			},
			spec: Spec{Name: "s", Lang: "bash"}, membersLeft: 1, other: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine(t)
			c := f.client()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, c.SetPool(ctx, Pool{Name: "p", Lang: "bash", Size: 1}))
			made, _, err := c.FillPool(ctx, "p")
			require.NoError(t, err)
			require.Equal(t, 1, made)
			require.Len(t, f.members("p"), 1)
			if tc.setup != nil {
				tc.setup(f)
			}
			f.reset()
			if tc.other {
				c = f.client()
			}
			s, info, err := c.Start(ctx, tc.spec)
			require.NoError(t, err)
			defer s.Close()
			assert.True(t, info.Created)
			if tc.claimed {
				assert.Equal(t, "p", info.Pool)
				assert.Empty(t, f.called("create", "volume-create"), "nothing is made: the member is the session")
				assert.Len(t, f.called("adopt"), 1)
			} else {
				assert.Empty(t, info.Pool)
				assert.Equal(t, []string{"volume-create s", "create s"}, f.called("create", "volume-create"))
			}
			assert.Equal(t, "s", s.Name())
			in, err := c.ctr.Inspect(ctx, "s")
			require.NoError(t, err)
			assert.True(t, in.Running)
			assert.Len(t, f.members("p"), tc.membersLeft)
			st, err := c.RecordedSettings(ctx, "s")
			require.NoError(t, err)
			assert.Equal(t, "s", st.Session, "the session's settings are its own, under its name")
		})
	}
}

// An engine without warm pools says so for every pool verb; a start there makes the session.
func TestPoolsOnAnEngineWithoutThem(t *testing.T) {
	f := newFakeEngine(t)
	f.noPools = true
	c := f.client()
	ctx := context.Background()
	require.ErrorIs(t, c.SetPool(ctx, Pool{Name: "p", Lang: "bash", Size: 1}), ErrInvalid)
	_, err := c.Pools(ctx)
	require.ErrorIs(t, err, ErrInvalid)
	require.ErrorIs(t, c.RemovePool(ctx, "p"), ErrInvalid)
	s, info, err := c.Start(ctx, Spec{Name: "s", Lang: "bash"})
	require.NoError(t, err)
	s.Close()
	assert.Equal(t, StartInfo{Created: true}, info)
}

// FillPool makes members up to the pool's size, RemovePool removes them, and GC removes the
// members of a pool that is gone.
func TestPoolFillRemoveAndGCOnAFakeEngine(t *testing.T) {
	f := newFakeEngine(t)
	c := f.client()
	ctx := context.Background()
	require.NoError(t, c.SetPool(ctx, Pool{Name: "p", Lang: "bash", Size: 2}))
	made, removed, err := c.FillPool(ctx, "p")
	require.NoError(t, err)
	assert.Equal(t, [2]int{2, 0}, [2]int{made, removed})
	made, _, err = c.FillPool(ctx, "p")
	require.NoError(t, err)
	assert.Zero(t, made, "a full pool is left as it is")
	ps, err := c.Pools(ctx)
	require.NoError(t, err)
	require.Len(t, ps, 1)
	assert.Equal(t, 2, ps[0].Ready)

	// A pool whose record is gone leaves its members to gc.
	require.NoError(t, f.Pools().DeletePool(ctx, "p"))
	acts, err := c.GC(ctx, GCOptions{Orphans: true})
	require.NoError(t, err)
	var removedMembers int
	for _, a := range acts {
		if a.Action == "remove pool member" && a.Done {
			removedMembers++
		}
	}
	assert.Equal(t, 2, removedMembers)
	assert.Empty(t, f.members("p"))

	require.NoError(t, c.SetPool(ctx, Pool{Name: "q", Lang: "bash", Size: 1}))
	_, _, err = c.FillPool(ctx, "q")
	require.NoError(t, err)
	require.NoError(t, c.RemovePool(ctx, "q"))
	assert.Empty(t, f.members("q"))
	require.ErrorIs(t, c.RemovePool(ctx, "q"), ErrNotFound)
}
