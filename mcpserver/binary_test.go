package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// runtimectl builds the binary once per test process.
func runtimectl(t *testing.T) string {
	t.Helper()
	testenv.Images(t)
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "runtimectl-mcp-test")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "runtimectl")
		if out, err := exec.Command("go", "build", "-o", binary, "../cmd/runtimectl").CombinedOutput(); err != nil {
			buildErr = &exec.ExitError{Stderr: out}
		}
	})
	require.NoError(t, buildErr)
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

// lockedBuffer is a bytes.Buffer for a process's stderr, read while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// mcpProcess starts `runtimectl mcp ARGS` the way a desktop client does, and connects to it
// over its stdin and stdout (the SDK's CommandTransport).
func mcpProcess(t *testing.T, args ...string) (*mcp.ClientSession, *exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(runtimectl(t), append([]string{"mcp"}, args...)...)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "stderr: %s", stderr)
	t.Cleanup(func() {
		_ = cs.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return cs, cmd, stderr
}

func result(t *testing.T, cs *mcp.ClientSession, args map[string]any) string {
	t.Helper()
	_, e := run(t, cs, args)
	require.NotNil(t, e.Result, "status %s, stderr %q", e.Status, e.Stderr)
	return *e.Result
}

func TestStdioServerKeepsStateAcrossCallsStopsAndRestarts(t *testing.T) {
	c := testenv.Client(t)
	name := testenv.Name(t)
	t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })

	cs, cmd, stderr := mcpProcess(t, "--session", name, "--memory", "1g")
	assert.Equal(t, "runtimectl", cs.InitializeResult().ServerInfo.Name)
	assert.Equal(t, "1", result(t, cs, map[string]any{"code": "x = 1\nx"}))
	assert.Equal(t, "2", result(t, cs, map[string]any{"code": "x + 1"}), "state kept across two calls")
	assert.Contains(t, stderr.String(), "created this server's session "+name)
	assert.NotContains(t, stderr.String(), "reconnected", "said once")

	var info struct{ Name, State string }
	structured(t, call(t, cs, "stop_session", nil), &info)
	assert.Equal(t, name, info.Name)
	assert.Equal(t, "stopped", info.State)
	in, err := c.Inspect(context.Background(), name)
	require.NoError(t, err)
	assert.False(t, in.Runtime != nil && in.Runtime.Running, "stopped")
	assert.Equal(t, int64(1<<30), in.Settings.Memory, "made with the server's flags")
	assert.Equal(t, "24h0m0s", in.Settings.TTL, "with the default TTL")
	assert.Equal(t, "3", result(t, cs, map[string]any{"code": "x + 2"}), "state kept across stop_session")

	require.NoError(t, cs.Close(), "the server ends when its client does: %s", stderr)
	require.True(t, cmd.ProcessState.Success(), "%s: %s", cmd.ProcessState, stderr)
	assert.NotContains(t, stderr.String(), "level=ERROR")

	// The client restarts the server: it reconnects by name.
	cs, _, stderr = mcpProcess(t, "--session", name)
	assert.Equal(t, "4", result(t, cs, map[string]any{"code": "x + 3"}), "state kept across a restart of the server")
	assert.Contains(t, stderr.String(), "reconnected to this server's session "+name)
	res := call(t, cs, "list_sessions", nil)
	assert.Contains(t, text(res), name)

	// Settings given that differ from the session's are refused, as `session start` does.
	cs, _, _ = mcpProcess(t, "--session", name, "--memory", "3g")
	res = call(t, cs, "run_code", map[string]any{"code": "x"})
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), "--memory 3GiB (the session has 1GiB)")
}

// A client that goes away while code runs (Claude Desktop quits): the server ends at once, and
// the execution goes on in the session and lands in its history.
func TestStdioServerEndsWithItsClientAndTheCodeGoesOn(t *testing.T) {
	c := testenv.Client(t)
	name := testenv.Name(t)
	t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })
	// The client's own pipes, so that the test closes the server's stdin as a client that quits.
	cmd := exec.Command(runtimectl(t), "mcp", "--session", name)
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).Connect(context.Background(),
		&mcp.IOTransport{Reader: stdout, Writer: stdin}, nil)
	require.NoError(t, err, stderr.String())
	require.Equal(t, "1", result(t, cs, map[string]any{"code": "x = 1\nx"}))
	go func() {
		_, _ = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"code": "import time\ntime.sleep(20)\nx = 2"}})
	}()
	require.Eventually(t, func() bool {
		execs, _, err := c.History(context.Background(), name)
		return err == nil && len(execs) == 2 && execs[1].Status == "running"
	}, time.Minute, 100*time.Millisecond, "the second execution starts")
	require.NoError(t, stdin.Close())
	require.NoError(t, cmd.Wait(), "the server ends when its stdin does: %s", stderr)
	execs, _, err := c.History(context.Background(), name)
	require.NoError(t, err)
	assert.Equal(t, "running", string(execs[1].Status), "before the code did: it did not wait for it")
	require.Eventually(t, func() bool {
		execs, _, err := c.History(context.Background(), name)
		return err == nil && len(execs) == 2 && execs[1].Status == "ok"
	}, 2*time.Minute, 250*time.Millisecond, "the code goes on in the session and lands in its history")
	cs2, _, _ := mcpProcess(t, "--session", name)
	assert.Equal(t, "2", result(t, cs2, map[string]any{"code": "x"}))
}

func TestStdioServerMakesUpANameAndServesOnlyTheAllowedTools(t *testing.T) {
	c := testenv.Client(t)
	cs, _, stderr := mcpProcess(t, "--allow-tools", "run_code,list_sessions", "--lang", "bash",
		"--cpus", "0.5", "--ttl", "90m", "--disk", "1g", "--network", "none")
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		require.NoError(t, err)
		names = append(names, tool.Name)
	}
	assert.ElementsMatch(t, []string{"run_code", "list_sessions"}, names)
	_, e := run(t, cs, map[string]any{"code": "echo $0"})
	t.Cleanup(func() { _ = c.Remove(context.Background(), e.Session, true) })
	assert.Regexp(t, `^mcp-[0-9a-f]{6}$`, e.Session)
	assert.Contains(t, e.Stdout, "bash")
	assert.Contains(t, stderr.String(), "`runtimectl mcp --session "+e.Session+"` reconnects to it")
	in, err := c.Inspect(context.Background(), e.Session)
	require.NoError(t, err)
	assert.Equal(t, 0.5, in.Settings.CPUs, "made with the server's session flags")
	assert.Equal(t, "1h30m0s", in.Settings.TTL)
	assert.Equal(t, int64(1<<30), in.Settings.Disk)
	assert.Equal(t, "none", in.Settings.Network)

	out, err := exec.Command(runtimectl(t), "mcp", "--allow-tools", "run_code,format_disk").CombinedOutput()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 2, ee.ExitCode())
	assert.Contains(t, string(out), "--allow-tools format_disk: no such tool")
}

// serve runs `runtimectl serve ARGS` with three tokens and returns its base URL.
func serve(t *testing.T, args ...string) (string, *exec.Cmd) {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens.txt")
	require.NoError(t, os.WriteFile(tokens, []byte(tokAlice+" alice\n"+tokBob+" bob\n"+tokAdmin+" ops admin\n"), 0o600))
	cmd := exec.Command(runtimectl(t), append([]string{"serve", "--listen", "127.0.0.1:0", "--token-file", tokens}, args...)...)
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		re := regexp.MustCompile(`serving on (http://\S+)`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case base := <-addr:
		return base, cmd
	case <-time.After(time.Minute):
		t.Fatal("runtimectl serve did not say where it serves")
	}
	return "", nil
}

const (
	tokAlice = "alice-token-0123456789abcdef"
	tokBob   = "bob-token-0123456789abcdef00"
	tokAdmin = "admin-token-0123456789abcdef"
)

// headers adds headers to every request of a client.
type headers struct {
	h    map[string]string
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

// httpClient connects an MCP client to endpoint with token and extra headers.
func httpClient(t *testing.T, endpoint, token string, extra map[string]string) *mcp.ClientSession {
	t.Helper()
	h := map[string]string{"Authorization": "Bearer " + token}
	for k, v := range extra {
		h[k] = v
	}
	tr := &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: headers{h, http.DefaultTransport}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx, tr, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// post sends one JSON-RPC message to /mcp and returns the status.
func post(t *testing.T, url string, hdr map[string]string, body string) int {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode == http.StatusUnauthorized {
		assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
	}
	return resp.StatusCode
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`

func TestHTTPServerServesMCPBehindTheTokens(t *testing.T) {
	c := testenv.Client(t)
	nameA, nameB := testenv.Name(t)+"-a", testenv.Name(t)+"-b"
	t.Cleanup(func() {
		for _, n := range []string{nameA, nameB} {
			_ = c.Remove(context.Background(), n, true)
		}
	})
	base, cmd := serve(t, "--grace", "1h")
	endpoint := base + "/mcp"

	assert.Equal(t, http.StatusUnauthorized, post(t, endpoint, nil, initialize), "no token")
	assert.Equal(t, http.StatusUnauthorized, post(t, endpoint, map[string]string{"Authorization": "Bearer not-a-token-of-the-file"}, initialize), "a wrong token")
	assert.Equal(t, http.StatusOK, post(t, endpoint, map[string]string{"Authorization": "Bearer " + tokAlice}, initialize))

	alice := httpClient(t, endpoint, tokAlice, map[string]string{"Runtimectl-Session": nameA})
	assert.Equal(t, "2025-11-25", alice.InitializeResult().ProtocolVersion, "over HTTP, the newest revision with sessions")
	_, e := run(t, alice, map[string]any{"code": "secret = 'alice'\nsecret"})
	assert.Equal(t, nameA, e.Session, "the header names the connection's session")
	assert.Equal(t, "'alice'", *e.Result)
	st, err := c.RecordedSettings(context.Background(), nameA)
	require.NoError(t, err)
	assert.Equal(t, "alice", st.Owner, "a session made through MCP is the token's")

	bob := httpClient(t, endpoint+"?session="+nameB, tokBob, nil)
	_, e = run(t, bob, map[string]any{"code": "'bob'"})
	assert.Equal(t, nameB, e.Session, "?session= names it too")

	// A token that may not reach a session cannot through MCP either.
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"run_code", map[string]any{"code": "secret", "session": nameA}},
		{"read_file", map[string]any{"path": "x", "session": nameA}},
		{"write_file", map[string]any{"path": "x", "content": "y", "session": nameA}},
		{"list_variables", map[string]any{"session": nameA}},
		{"stop_session", map[string]any{"session": nameA}},
		{"remove_session", map[string]any{"session": nameA}},
		{"fork_session", map[string]any{"session": nameA, "name": nameB + "-x"}},
		{"list_snapshots", map[string]any{"session": nameA}},
	} {
		res := call(t, bob, tc.tool, tc.args)
		assert.True(t, res.IsError, tc.tool)
		assert.Contains(t, text(res), `no such session "`+nameA+`"`, tc.tool)
	}
	res := call(t, bob, "start_session", map[string]any{"name": nameA})
	assert.True(t, res.IsError)
	assert.Contains(t, text(res), "is taken")
	assert.NotContains(t, text(call(t, bob, "list_sessions", nil)), nameA)
	_, err = bob.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "runtimectl://sessions/" + nameA + "/history.ipynb"})
	assert.Error(t, err)
	for r, err := range bob.Resources(context.Background(), nil) {
		require.NoError(t, err)
		assert.NotContains(t, r.URI, nameA)
	}
	// Nor with alice's MCP session id.
	assert.Equal(t, http.StatusNotFound, post(t, endpoint, map[string]string{"Authorization": "Bearer " + tokBob, "Mcp-Session-Id": alice.ID(), "Mcp-Protocol-Version": "2025-11-25"},
		`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"run_code","arguments":{"code":"secret"}}}`))
	_, e = run(t, alice, map[string]any{"code": "secret"})
	assert.Equal(t, "'alice'", *e.Result, "alice's session is untouched")

	// The REST API agrees: the session is alice's.
	for tok, want := range map[string]int{tokAlice: 200, tokBob: 404, tokAdmin: 200} {
		req, _ := http.NewRequest("GET", base+"/v1/sessions/"+nameA, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, want, resp.StatusCode)
	}
	admin := httpClient(t, endpoint, tokAdmin, nil)
	listed := text(call(t, admin, "list_sessions", nil))
	assert.Contains(t, listed, nameA)
	assert.Contains(t, listed, nameB)

	// Clients connected (each with its stream of notifications open) do not hold up a stop:
	// the shutdown waits for running calls only, not the hour of --grace.
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("runtimectl serve did not stop with MCP clients connected")
	}
	_, err = c.RecordedSettings(context.Background(), nameB)
	assert.NoError(t, err, "the sessions outlive the server")
}
