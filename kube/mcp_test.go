package kube

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// `runtimectl --backend kubernetes mcp` (issue 24: "--backend as everywhere"): the MCP server
// over stdio on the cluster, started the way a desktop client starts it, keeps a session's
// state across two calls, a stop_session and a restart of the MCP server process.
func TestMCPOnKubernetes(t *testing.T) {
	_, kb := sessionClient(t)
	bin := filepath.Join(t.TempDir(), "runtimectl")
	out, err := exec.Command("go", "build", "-o", bin, "../cmd/runtimectl").CombinedOutput()
	require.NoError(t, err, "%s", out)
	global := []string{"--backend", "kubernetes", "--kubeconfig", localKubeconfig, "--namespace", kb.ns}
	env := append(os.Environ(), "RUNTIMECTL_KUBE_STORAGE_CLASS="+LocalStorageClass)
	t.Cleanup(func() {
		cmd := exec.Command(bin, append(global, "session", "rm", "-f", "m")...)
		cmd.Env = env
		_ = cmd.Run()
	})

	start := func() (*mcp.ClientSession, *syncBuilder) {
		t.Helper()
		cmd := exec.Command(bin, append(global, "mcp", "--session", "m", "--lang", "bash", "--memory", "256m")...)
		cmd.Env = env
		stderr := &syncBuilder{}
		cmd.Stderr = stderr
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		require.NoError(t, err, "stderr: %s", stderr)
		t.Cleanup(func() { _ = cs.Close() })
		return cs, stderr
	}
	call := func(cs *mcp.ClientSession, tool string, args map[string]any, v any) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		require.NoError(t, err, tool)
		b, _ := json.Marshal(res.Content)
		require.False(t, res.IsError, "%s: %s", tool, b)
		b, err = json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(b, v), string(b))
	}
	type execution struct{ Session, Status, Stdout string }
	runCode := func(cs *mcp.ClientSession, code string) execution {
		t.Helper()
		var e execution
		call(cs, "run_code", map[string]any{"code": code}, &e)
		return e
	}

	cs, stderr := start()
	e := runCode(cs, "X=41; echo $((X + 1))")
	assert.Equal(t, execution{Session: "m", Status: "ok", Stdout: "42\n"}, e)
	assert.Equal(t, "41\n", runCode(cs, "echo $X").Stdout, "state kept across two calls")
	assert.Contains(t, stderr.String(), "created this server's session m")
	_, err = kb.cs.CoreV1().Pods(kb.ns).Get(context.Background(), PodName("m"), metav1.GetOptions{})
	require.NoError(t, err, "the session is a pod of the cluster")

	var info struct{ Name, State string }
	call(cs, "stop_session", nil, &info)
	assert.Equal(t, "stopped", info.State)
	assert.Equal(t, "41\n", runCode(cs, "echo $X").Stdout, "state kept across stop_session")
	require.NoError(t, cs.Close())

	cs, stderr = start()
	assert.Equal(t, "41\n", runCode(cs, "echo $X").Stdout, "state kept across a restart of the MCP server")
	assert.Contains(t, stderr.String(), "reconnected to this server's session m")
}

// syncBuilder is a strings.Builder for a process's stderr, read while the process writes it.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
