package session

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/contract"
	"github.com/runtimectl/runtimectl/engine"
)

// Egress is an ability of the engine (engine.Egress), found by type assertion: on an engine
// that has it, a session with allowed hosts has its proxy started before its runtime is made
// or started again, with the session's allowlist, and stopped and removed with the session; on
// an engine without it, such a session is refused with the engine's name.
func TestEgressIsAnAbilityOfTheEngine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	spec := Spec{Name: "e", Lang: "bash", AllowHosts: []string{"pypi.org"}}

	t.Run("an engine with egress proxies", func(t *testing.T) {
		f := newFakeEngine(t)
		f.egress = true
		c := f.client()
		s, info, err := c.Start(ctx, spec)
		require.NoError(t, err)
		s.Close()
		assert.Equal(t, StartInfo{Created: true}, info)
		// The proxy runs before the runtime is made, and is asked again (a no-op when it runs)
		// before the runtime starts, as for a session that exists.
		assert.Equal(t, []string{"volume-create e", "egress-start e", "create e", "egress-start e", "start e"},
			f.called("volume-create", "egress-start", "create", "start"))
		require.Contains(t, f.proxies, "e")
		assert.Equal(t, []string{"pypi.org"}, f.proxies["e"].Config.Allow)
		assert.Equal(t, "e", f.proxies["e"].Session)
		rt := f.ctrs["e"]
		assert.True(t, rt.spec.Egress, "the runtime reaches nothing but its proxy")
		assert.Equal(t, "1", rt.spec.Labels[contract.LabelAllowHosts])

		require.NoError(t, c.Stop(ctx, "e"))
		assert.Contains(t, f.called("egress-stop"), "egress-stop e")
		f.reset()
		s, info, err = c.Start(ctx, Spec{Name: "e"})
		require.NoError(t, err)
		s.Close()
		assert.Equal(t, StartInfo{Started: true}, info)
		assert.Equal(t, []string{"egress-start e", "start e"}, f.called("egress-start", "start", "create"),
			"a stopped session's proxy is started first, from its recorded settings")

		require.NoError(t, c.Remove(ctx, "e", true))
		assert.Contains(t, f.called("egress-remove"), "egress-remove e")
		assert.NotContains(t, f.proxies, "e")
	})

	t.Run("an engine without them", func(t *testing.T) {
		f := newFakeEngine(t)
		c := f.client()
		_, _, err := c.Start(ctx, spec)
		require.ErrorIs(t, err, ErrInvalid)
		assert.ErrorContains(t, err, "the fake engine runs no egress proxy")
		assert.Empty(t, f.called("create"), "no runtime is made")
		_, err = c.ctr.Inspect(ctx, "e")
		assert.ErrorIs(t, err, engine.ErrNotFound)
	})
}
