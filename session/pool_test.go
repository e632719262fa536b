package session_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// A warm pool of Python sessions on Docker (seamtest.Pools runs the backend-neutral part: two
// starts at once, stop and start, refill, removal): the member's interpreter ran the preload,
// the claimed container is the member's (its pool label), its volumes are binds of the member's
// and removing it leaves none of them; a gc leaves the pool and the sessions taken from it alone;
// removing the pool removes its members and leaves those sessions.
func TestPoolServesStartsWithReadySessions(t *testing.T) {
	testenv.Images(t)
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	// A memory limit no other test asks for: only this test's starts are served by the pool.
	id := testenv.Name(t)
	pool := session.Pool{Name: "tp" + id[len(id)-6:], Lang: "python",
		Memory: 700 << 20, Size: 2, Preload: "import json, decimal"}
	require.NoError(t, c.SetPool(ctx, pool))
	t.Cleanup(func() { _ = c.RemovePool(context.Background(), pool.Name) })
	made, _, err := c.FillPool(ctx, pool.Name)
	require.NoError(t, err)
	assert.Equal(t, 2, made)

	names := []string{testenv.Name(t), testenv.Name(t)}
	sessions := make([]*session.Session, 2)
	for i := range names {
		t.Cleanup(func() { _ = c.Remove(context.Background(), names[i], true) })
		var info session.StartInfo
		sessions[i], info, err = c.Start(ctx, session.Spec{Name: names[i], Memory: 700 << 20, TestRun: session.TestRunID()})
		require.NoError(t, err)
		defer sessions[i].Close()
		assert.Equal(t, pool.Name, info.Pool, "start %d was not served from the pool", i)
	}
	ci, err := docker.From(c).Containers().Inspect(ctx, names[0])
	require.NoError(t, err)
	assert.Equal(t, pool.Name, ci.Labels[contract.LabelPool], "it is a member's container")

	r := run(t, sessions[0], "import sys\n('json' in sys.modules, 'decimal' in sys.modules, 'decimal' in dir())")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "(True, True, False)", *r.Result, "preloaded: modules loaded, no names")
	assert.Equal(t, int64(1), r.Seq, "a claimed session's history starts at 1")

	// Removed, nothing of it stays: its volumes, and the member's whose data they bound.
	member := backingOf(t, c, names[0])
	require.NotEmpty(t, member)
	sessions[0].Close()
	require.NoError(t, c.Remove(ctx, names[0], true))
	for _, name := range append(member, "runtimectl-"+names[0], "runtimectl_state-"+names[0]) {
		_, err := docker.From(c).Volumes().API().VolumeInspect(ctx, name)
		assert.Error(t, err, "volume %s is left", name)
	}

	// A gc leaves the pool's members and the remaining claimed session's data alone.
	c.WaitRefills()
	acts, err := c.GC(ctx, session.GCOptions{Orphans: true})
	require.NoError(t, err)
	for _, a := range acts {
		assert.NotContains(t, a.Session, pool.Name, "gc acted on the pool: %+v", a)
		assert.NotEqual(t, names[1], a.Session, "gc acted on the claimed session: %+v", a)
	}
	r = run(t, sessions[1], "1 + 1")
	assert.Equal(t, "ok", string(r.Status), r.Stderr)

	// Removing the pool removes its members; the session taken from it stays.
	require.NoError(t, c.RemovePool(ctx, pool.Name))
	ctrs, err := docker.From(c).Containers().List(ctx)
	require.NoError(t, err)
	for _, ci := range ctrs {
		assert.False(t, strings.HasPrefix(ci.Session, "_pool."+pool.Name+"."), "member %s is left", ci.Session)
	}
	r = run(t, sessions[1], "2 + 2")
	assert.Equal(t, "ok", string(r.Status), r.Stderr)
}

// A member that waited past its pool's TTL is made again by the next fill.
func TestPoolFillRemakesMembersPastTheirTTL(t *testing.T) {
	testenv.Images(t)
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	id := testenv.Name(t)
	pool := session.Pool{Name: "ttl" + id[len(id)-6:], Lang: "bash", Memory: 320 << 20, Size: 1, TTL: time.Second} // (a memory limit of its own: no other test's start is served by it)
	require.NoError(t, c.SetPool(ctx, pool))
	t.Cleanup(func() { _ = c.RemovePool(context.Background(), pool.Name) })
	made, removed, err := c.FillPool(ctx, pool.Name)
	require.NoError(t, err)
	assert.Equal(t, [2]int{1, 0}, [2]int{made, removed})
	time.Sleep(1500 * time.Millisecond)
	made, removed, err = c.FillPool(ctx, pool.Name)
	require.NoError(t, err)
	assert.Equal(t, [2]int{1, 1}, [2]int{made, removed}, "the member past its TTL was made again")

	err = c.SetPool(ctx, session.Pool{Name: "Bad_Name", Size: 1})
	assert.ErrorIs(t, err, session.ErrInvalid)
	err = c.SetPool(ctx, session.Pool{Name: "ends-", Size: 1})
	assert.ErrorIs(t, err, session.ErrInvalid, "not a valid Kubernetes name")
	err = c.SetPool(ctx, session.Pool{Name: "b", Lang: "bash", Size: 1, Preload: "x=1"})
	assert.ErrorIs(t, err, session.ErrInvalid, "a preload is for Python only")
	_, _, err = c.FillPool(ctx, "no-such-pool")
	assert.ErrorIs(t, err, session.ErrNotFound)
}

// backingOf returns the names of the pool member's volumes that the session's volumes bind.
func backingOf(t *testing.T, c *session.Client, name string) []string {
	t.Helper()
	r, err := docker.From(c).Volumes().API().VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", "runtimectl-"+name))})
	require.NoError(t, err)
	for _, v := range r.Volumes {
		if v.Name == "runtimectl-"+name {
			return strings.Split(v.Labels[contract.LabelBacking], ",")
		}
	}
	return nil
}
