package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/server"
)

// toolText is the text of a tool result's content.
func toolText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// /mcp holds a token to its token file's policy as the other routes do: a new session's
// ceilings (a default over one becomes it), its number of sessions and its executions at once.
func TestTheTokenFilesPolicyHoldsThroughMCP(t *testing.T) {
	c := testenv.Client(t)
	p := filepath.Join(t.TempDir(), "tokens.txt")
	tenant := "dave-" + testenv.Name(t)[len(testenv.Name(t))-6:]
	require.NoError(t, os.WriteFile(p, []byte("role small memory=512m pids=200 sessions=1 execs=1\n"+
		tokA+" "+tenant+" role=small\n"+tokAdmin+" ops admin\n"), 0o600))
	toks, err := server.LoadTokens(p)
	require.NoError(t, err)
	base := newServer(t, c, func(cfg *server.Config) { cfg.Tokens = toks })

	ctx := testenv.Ctx(t, 4*time.Minute)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "policy", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{tokA, http.DefaultTransport}}}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })

	one, two := testenv.Name(t)+"-1", testenv.Name(t)+"-2"
	for _, n := range []string{one, two} {
		t.Cleanup(func() { _ = c.Remove(context.Background(), n, true) })
	}
	call := func(tool string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		require.NoError(t, err)
		return r
	}
	r := call("start_session", map[string]any{"name": one})
	require.False(t, r.IsError, toolText(r))
	st, err := c.RecordedSettings(ctx, one)
	require.NoError(t, err)
	assert.Equal(t, int64(512<<20), st.Memory, "the default (2g) over the ceiling became the ceiling")
	assert.Equal(t, int64(200), st.Pids)
	assert.Equal(t, tenant, st.Owner)

	r = call("start_session", map[string]any{"name": two})
	require.True(t, r.IsError, "a second session past sessions=1")
	assert.Contains(t, toolText(r), "this token has 1 sessions, its limit (sessions= in the token file, from role small)")
	r = call("fork_session", map[string]any{"session": one, "name": two})
	require.True(t, r.IsError, "a fork is a new session too")
	assert.Contains(t, toolText(r), "this token has 1 sessions, its limit")

	// execs=1: while one run_code runs, another is refused naming the limit.
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		r, _ := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"session": one, "code": "import time\ntime.sleep(30)\n'slept'"}})
		done <- r
	}()
	refused := ""
	for deadline := time.Now().Add(25 * time.Second); time.Now().Before(deadline) && refused == ""; {
		select {
		case r := <-done: // refused itself: a call below took the one slot first
			require.FailNow(t, "the long execution ended first", toolText(r))
		case <-time.After(2 * time.Second):
		}
		if r := call("run_code", map[string]any{"session": one, "code": "1"}); r.IsError {
			refused = toolText(r)
		}
	}
	assert.Contains(t, refused, "1 executions of this token run already (the cap, execs= in the token file, from role small)")
	long := <-done
	require.NotNil(t, long)
	assert.False(t, long.IsError, toolText(long))
}
