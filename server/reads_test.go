package server_test

import (
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/internal/testenv"
)

// GET files/st/history.jsonl through a link to the runtime's state reads nothing of it; the
// rich outputs of a result are read the same way.
func TestFilesRouteDoesNotReadThroughALinkOutOfTheWorkspace(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, nil)
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, nil)
	r := a.exec(name, "import os\nos.symlink('/var/lib/runtimectl', 'st')\nos.makedirs('ok')\nopen('ok/a.txt','w').write('fine')\nos.symlink('ok', 'in')")
	require.Equal(t, "ok", r.Status, r.Stderr)
	for _, p := range []string{"st/history.jsonl", "st/session.json", "st/snapshots"} {
		st, raw := a.do("GET", "/v1/sessions/"+name+"/files/"+p, nil, nil)
		assert.Equal(t, http.StatusBadRequest, st, "%s: %s", p, raw)
		assert.NotContains(t, string(raw), `"seq"`)
		assert.Contains(t, string(raw), "through a link")
	}
	st, raw := a.do("GET", "/v1/sessions/"+name+"/files/in/a.txt", nil, nil)
	assert.Equal(t, http.StatusOK, st)
	assert.Equal(t, "fine", string(raw))
}

// The server answers on time: an execution with a 2 s timeout in a paused container is
// answered within the timeout plus 10 s, as the library's, with 504 and what to do.
func TestExecInAPausedContainerIsAnsweredOnTime(t *testing.T) {
	c := testenv.Client(t)
	base := newServer(t, c, nil)
	a := api{t: t, base: base, token: tokA}
	name := startSession(t, c, a, nil)
	a.exec(name, "x = 1")
	out, err := exec.Command("docker", "pause", containers.Name(name)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Cleanup(func() { _ = exec.Command("docker", "unpause", containers.Name(name)).Run() })
	start := time.Now()
	st, raw := a.do("POST", "/v1/sessions/"+name+"/exec", map[string]any{"code": "x", "timeout": 2}, nil)
	took := time.Since(start)
	assert.Equal(t, http.StatusGatewayTimeout, st, string(raw))
	assert.Contains(t, string(raw), "no_answer")
	assert.Less(t, took, 14*time.Second, "within the timeout plus 10 s (and a little)")
}
