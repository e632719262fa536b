package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
)

// Nothing of one tenant reaches another: /metrics is admin-only, a name held by another token
// answers 409 with nothing of its session, and GET /v1/sessions filters by owner before it
// reads a history (and reads a stopped session's history as a stream, keeping its tail).
func TestNothingCrossesTenants(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, nil)
	alice := api{t: t, base: base, token: tokA}
	bob := api{t: t, base: base, token: tokB}
	name := startSession(t, c, alice, nil)
	// A history of about 48 MB: 12 executions of 4 MiB of output each.
	for i := 0; i < 12; i++ {
		r := alice.exec(name, "import sys\nsys.stdout.write('y' * (4 << 20))")
		require.Equal(t, "ok", r.Status)
	}
	st, _ := alice.do("POST", "/v1/sessions/"+name+"/stop", nil, nil)
	require.Equal(t, http.StatusOK, st)

	for _, who := range []api{alice, bob} {
		st, raw := who.do("GET", "/metrics", nil, nil)
		assert.Equal(t, http.StatusForbidden, st)
		assert.NotContains(t, string(raw), "runtimectl_")
	}

	// bob's list costs nothing of alice's history.
	const bobBudget, aliceBudget = 8 << 20, 24 << 20
	base0 := resetPeak(t)
	var list []map[string]any
	st, raw := bob.do("GET", "/v1/sessions", nil, &list)
	require.Equal(t, http.StatusOK, st, string(raw))
	_, peak := rss(t)
	t.Logf("bob's list: +%d MiB (budget %d MiB)", (peak-base0)>>20, bobBudget>>20)
	assert.Less(t, peak-base0, int64(bobBudget))
	for _, in := range list {
		assert.NotEqual(t, name, in["name"])
	}

	// alice's reads her stopped session's history as a stream: memory for a line, not for
	// the history.
	base0 = resetPeak(t)
	list = nil
	st, raw = alice.do("GET", "/v1/sessions", nil, &list)
	require.Equal(t, http.StatusOK, st, string(raw))
	_, peak = rss(t)
	t.Logf("alice's list with a 48 MB history: +%d MiB (budget %d MiB)", (peak-base0)>>20, aliceBudget>>20)
	assert.Less(t, peak-base0, int64(aliceBudget))
	var mine map[string]any
	for _, in := range list {
		if in["name"] == name {
			mine = in
		}
	}
	require.NotNil(t, mine, "%v", list)
	assert.Equal(t, float64(12), mine["executions"])
	assert.NotEmpty(t, mine["last_exec"])
	assert.Equal(t, "exited", mine["state"])

	// bob asking for alice's name: 409, with nothing of hers.
	st, raw = bob.do("POST", "/v1/sessions", map[string]string{"name": name}, nil)
	assert.Equal(t, http.StatusConflict, st)
	assert.NotContains(t, string(raw), "alice")
	st, _ = bob.do("GET", "/v1/sessions/"+name, nil, nil)
	assert.Equal(t, http.StatusNotFound, st)
}
