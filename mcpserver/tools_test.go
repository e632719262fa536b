package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/mcpserver"
	"github.com/runtimectl/runtimectl/session"
)

// connect serves cfg to an in-memory client; both end with the test.
func connect(t *testing.T, cfg mcpserver.Config, copts *mcp.ClientOptions) (*mcpserver.Server, *mcp.ClientSession) {
	t.Helper()
	srv, err := mcpserver.New(cfg)
	require.NoError(t, err)
	t.Cleanup(srv.Close)
	return srv, connectTo(t, srv, copts, "")
}

// connectTo connects another in-memory client to srv, asking for protocol version (""
// the latest).
func connectTo(t *testing.T, srv *mcpserver.Server, copts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.MCP().Connect(ctx, st, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, copts).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// offline is a client whose engine cannot be reached: what needs no engine still works.
func offline(t *testing.T) *session.Client {
	de, err := docker.New("unix:///nonexistent/runtimectl-test.sock")
	require.NoError(t, err)
	c := session.NewWithEngine(de)
	t.Cleanup(func() { c.Close() })
	return c
}

// call calls a tool and returns its result; a protocol failure fails the test.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, "%s: a tool's failure is a tool error, never a protocol one", tool)
	return res
}

// text joins the text content of a result.
func text(res *mcp.CallToolResult) string {
	var s string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			s += tc.Text + "\n"
		}
	}
	return s
}

// structured decodes a result's structured content into v.
func structured(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	require.False(t, res.IsError, text(res))
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v), string(b))
}

func TestEveryToolIsListedWithItsSchemaADescriptionAndHints(t *testing.T) {
	_, cs := connect(t, mcpserver.Config{Client: offline(t)}, nil)
	ctx := context.Background()
	var names []string
	byName := map[string]*mcp.Tool{}
	for tool, err := range cs.Tools(ctx, nil) {
		require.NoError(t, err)
		names = append(names, tool.Name)
		byName[tool.Name] = tool
	}
	assert.ElementsMatch(t, mcpserver.ToolNames(), names, "the SDK lists them by name")
	assert.ElementsMatch(t, []string{"run_code", "start_session", "list_sessions", "stop_session", "remove_session", "write_file", "read_file",
		"list_files", "install_packages", "list_variables", "session_context", "list_snapshots", "restore_snapshot", "fork_session"}, names)
	for _, tool := range byName {
		assert.GreaterOrEqual(t, len(tool.Description), 80, "%s: a description written for a model", tool.Name)
		in := tool.InputSchema.(map[string]any)
		assert.Equal(t, "object", in["type"], tool.Name)
		require.NotNil(t, tool.OutputSchema, "%s: structured content has a schema", tool.Name)
		require.NotNil(t, tool.Annotations, tool.Name)
		require.NotNil(t, tool.Annotations.DestructiveHint, tool.Name)
	}
	props := func(name string) map[string]any {
		return byName[name].InputSchema.(map[string]any)["properties"].(map[string]any)
	}
	assert.Equal(t, []any{"code"}, byName["run_code"].InputSchema.(map[string]any)["required"])
	for _, p := range []string{"code", "language", "session", "timeout"} {
		assert.Contains(t, props("run_code"), p)
	}
	assert.ElementsMatch(t, []any{"bash", "node", "python"}, props("run_code")["language"].(map[string]any)["enum"])
	assert.ElementsMatch(t, []any{"utf-8", "base64"}, props("write_file")["encoding"].(map[string]any)["enum"])
	assert.Equal(t, []any{"session"}, byName["remove_session"].InputSchema.(map[string]any)["required"], "remove_session names its session")

	hint := func(name string) (readOnly, destructive, idempotent bool) {
		a := byName[name].Annotations
		return a.ReadOnlyHint, *a.DestructiveHint, a.IdempotentHint
	}
	for _, name := range []string{"list_sessions", "read_file", "list_files", "list_variables", "session_context", "list_snapshots"} {
		ro, _, _ := hint(name)
		assert.True(t, ro, "%s is read-only", name)
	}
	for _, name := range []string{"remove_session", "restore_snapshot", "write_file"} {
		ro, d, _ := hint(name)
		assert.True(t, d && !ro, "%s is destructive", name)
	}
	for _, name := range []string{"run_code", "start_session", "stop_session", "install_packages", "fork_session"} {
		ro, d, _ := hint(name)
		assert.False(t, d || ro, "%s only adds", name)
	}
	_, _, idem := hint("run_code")
	assert.False(t, idem, "running code twice is two executions")
	_, _, idem = hint("stop_session")
	assert.True(t, idem)
	assert.True(t, *byName["install_packages"].Annotations.OpenWorldHint, "pip reaches a package index")
	assert.False(t, *byName["run_code"].Annotations.OpenWorldHint, "sessions have no network by default")
}

func TestAllowToolsServesOnlyThoseNamed(t *testing.T) {
	_, cs := connect(t, mcpserver.Config{Client: offline(t), Tools: []string{"run_code", "read_file"}}, nil)
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		require.NoError(t, err)
		names = append(names, tool.Name)
	}
	assert.ElementsMatch(t, []string{"run_code", "read_file"}, names)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "remove_session", Arguments: map[string]any{"session": "x"}})
	if err == nil {
		assert.True(t, res.IsError, "a tool not served cannot be called")
	}

	_, err = mcpserver.New(mcpserver.Config{Client: offline(t), Tools: []string{"run_code", "format_disk"}})
	assert.ErrorIs(t, err, session.ErrInvalid)
	assert.Contains(t, err.Error(), `"format_disk"`)
}

// Bad arguments, and an engine that cannot be reached, are tool errors with one-line messages.
func TestFailuresAreToolErrorsWithOneLine(t *testing.T) {
	_, cs := connect(t, mcpserver.Config{Client: offline(t), Spec: session.Spec{Name: "offline-demo"}}, nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"run_code", map[string]any{"code": "1", "session": "Bad Name!"}, `invalid session name "Bad Name!"`},
		{"run_code", map[string]any{"code": "1", "timeout": -1}, "timeout -1: give a number of seconds"},
		{"run_code", map[string]any{}, "code"},
		{"write_file", map[string]any{"path": "/etc/passwd", "content": "x"}, "session paths are under /workspace"},
		{"write_file", map[string]any{"path": "a.bin", "content": "%%%", "encoding": "base64"}, "not base64"},
		{"read_file", map[string]any{"path": "../x"}, "session paths are under /workspace"},
		{"read_file", map[string]any{"path": "x", "max_bytes": 1 << 30}, "at most 4 MiB"},
		{"restore_snapshot", map[string]any{"snapshot": ""}, "name the snapshot"},
		{"fork_session", map[string]any{"name": "UPPER"}, `invalid session name "UPPER"`},
		{"session_context", map[string]any{"max_chars": -5}, "max_chars -5"},
		{"list_sessions", nil, "runtimectl-test.sock"},
		{"run_code", map[string]any{"code": "1"}, "runtimectl-test.sock"},
	} {
		res := call(t, cs, tc.tool, tc.args)
		assert.True(t, res.IsError, "%s %v", tc.tool, tc.args)
		msg := text(res)
		assert.Contains(t, msg, tc.want, "%s %v", tc.tool, tc.args)
		assert.Equal(t, 1, len(res.Content), "%s: one message", tc.tool)
		assert.NotContains(t, msg[:len(msg)-1], "\n", "%s: one line", tc.tool)
	}
}
