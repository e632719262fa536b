package session_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/containers"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// Sessions with --network bridge are on runtimectl's own bridge, with traffic between its
// containers off: one session's server is reachable from inside it, not from another session.
func TestBridgeSessionsCannotReachEachOther(t *testing.T) {
	c := testenv.Client(t)
	a := testenv.Start(t, c, session.Spec{Network: "bridge"})
	b := testenv.Start(t, c, session.Spec{Network: "bridge"})

	out, err := exec.Command("docker", "network", "inspect", containers.BridgeNetwork, "--format", `{{index .Options "com.docker.network.bridge.enable_icc"}}`).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "false", strings.TrimSpace(string(out)))

	r := execWith(t, a, `import socket, threading
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", 8765)); srv.listen()
def serve():
    while True:
        conn, _ = srv.accept(); conn.sendall(b"hello"); conn.close()
threading.Thread(target=serve, daemon=True).start()
ip = socket.gethostbyname(socket.gethostname())
got = socket.create_connection((ip, 8765), timeout=5).recv(5)
(ip, got)`, session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.NotNil(t, r.Result)
	var ip string
	_, err = fmt.Sscanf(strings.Split(*r.Result, "'")[1], "%s", &ip)
	require.NoError(t, err, *r.Result)
	assert.Contains(t, *r.Result, "b'hello'", "the server answers inside its own session")

	r = execWith(t, b, fmt.Sprintf(`import socket
try:
    socket.create_connection((%q, 8765), timeout=5).recv(5); reached = True
except OSError as e:
    reached = False
reached`, ip), session.ExecOptions{Timeout: time.Minute})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "False", *r.Result, "another session cannot reach it")
}

// `docker network prune` removes runtimectl-bridge while no container runs on it: a stopped
// bridge session still starts, its container made again on a new network, its state kept.
func TestBridgeSessionStartsAfterItsNetworkWasPruned(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{Network: "bridge"})
	name := s.Name()
	cleanupSession(t, c, name) // its container is made again, not by testcontainers
	r := execWith(t, s, "x = 41", session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	ctx := testenv.Ctx(t, 3*time.Minute)
	s.Close()
	require.NoError(t, c.Stop(ctx, name))
	out, err := exec.Command("docker", "network", "rm", containers.BridgeNetwork).CombinedOutput()
	require.NoError(t, err, "%s", out)
	s, _, err = c.Start(ctx, session.Spec{Name: name})
	require.NoError(t, err)
	defer s.Close()
	r = execWith(t, s, "x + 1", session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "42", *r.Result)
}
