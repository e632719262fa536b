package server_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/server"
)

// The token file's policy holds on real sessions: a token gets its ceilings (a default over
// one becomes it), its networks and images, its number of sessions and of executions at once;
// past them 403 naming the limit; an admin is unlimited.
func TestTheTokenFilesPolicyHoldsOnRealSessions(t *testing.T) {
	c := testenv.Client(t)
	p := filepath.Join(t.TempDir(), "tokens.txt")
	tenant := "carol-" + testenv.Name(t)[len(testenv.Name(t))-6:] // a name no other test's sessions have
	require.NoError(t, os.WriteFile(p, []byte("role small memory=512m cpus=0.5 pids=200 sessions=2 execs=1\n"+
		tokA+" "+tenant+" role=small\n"+tokB+" bob\n"+tokAdmin+" ops admin\n"), 0o600))
	toks, err := server.LoadTokens(p)
	require.NoError(t, err)
	base := newServer(t, c, func(cfg *server.Config) { cfg.Tokens = toks })
	alice := api{t: t, base: base, token: tokA}
	admin := api{t: t, base: base, token: tokAdmin}

	for body, want := range map[string]string{
		`{"memory": "100g"}`:          "memory 100GiB is over this token's limit of 512MiB (memory= in the token file, from role small)",
		`{"cpus": 2}`:                 "cpus 2 is over this token's limit of 0.5 (cpus= in the token file, from role small)",
		`{"pids": 100000}`:            "pids 100000 is over this token's limit of 200",
		`{"disk": "10t"}`:             "disk 10TiB is over this token's limit of 20GiB (disk= in the token file, from the built-in default)",
		`{"network": "bridge"}`:       "network bridge is not allowed for this token",
		`{"image": "busybox:latest"}`: "image busybox:latest is not allowed for this token",
	} {
		st, raw := alice.do("POST", "/v1/sessions", []byte(body), nil)
		assert.Equal(t, http.StatusForbidden, st, body)
		assert.Contains(t, string(raw), want, body)
	}

	one := startSession(t, c, alice, nil)
	ci, err := docker.From(c).Containers().Inspect(context.Background(), one)
	require.NoError(t, err)
	st, err := c.RecordedSettings(context.Background(), one)
	require.NoError(t, err)
	assert.Equal(t, int64(512<<20), st.Memory, "the default (2g) over the ceiling became the ceiling")
	assert.Equal(t, 0.5, st.CPUs)
	assert.Equal(t, int64(200), st.Pids)
	assert.Equal(t, tenant, ci.Labels["io.runtimectl.owner"])
	startSession(t, c, alice, nil)
	third := testenv.Name(t) + "-3"
	t.Cleanup(func() { _ = c.Remove(context.Background(), third, true) })
	code, raw := alice.do("POST", "/v1/sessions", map[string]any{"name": third}, nil)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, string(raw), "this token has 2 sessions, its limit (sessions= in the token file, from role small)")
	code, _ = alice.do("POST", "/v1/sessions", map[string]any{"name": one}, nil)
	assert.Equal(t, http.StatusOK, code, "starting one's own session again is not a new one")

	// execs=1: a second execution at once is 429 naming the limit.
	resp := alice.req("POST", "/v1/sessions/"+one+"/exec", map[string]any{"code": "import time\nprint('go', flush=True)\ntime.sleep(3)"}, map[string]string{"Accept": server.NDJSON})
	defer resp.Body.Close()
	_, err = bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	code, raw = alice.do("POST", "/v1/sessions/"+one+"/exec", map[string]any{"code": "1"}, nil)
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Contains(t, string(raw), "1 executions of this token run already (the cap, execs= in the token file, from role small)")

	// An admin is unlimited.
	big := testenv.Name(t) + "-admin"
	t.Cleanup(func() { _ = c.Remove(context.Background(), big, true) })
	code, raw = admin.do("POST", "/v1/sessions", map[string]any{"name": big, "memory": "8g", "cpus": 2, "pids": 4096, "network": "bridge"}, nil)
	require.Equal(t, http.StatusCreated, code, string(raw))
	_ = time.Second
}
