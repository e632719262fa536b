package session_test

import (
	"context"
	"encoding/json"
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

// The third attack's warm pool: a claimed session saw the member's name, the preload in
// /proc/self/environ, and what the preload did to os.environ and /tmp. From the claim on the
// session is its own: its name in the kernel's environment and its processes', the preload in
// no environment, the preload's environment changes and /tmp files gone; after a stop and
// start its container's RUNTIMECTL_SETTINGS names the session, not the member.
func TestAClaimedSessionCarriesNothingOfItsMaking(t *testing.T) {
	testenv.Images(t)
	c := testenv.Client(t)
	ctx := testenv.Ctx(t, 5*time.Minute)
	id := testenv.Name(t)
	pool := session.Pool{Name: "cm" + id[len(id)-6:], Lang: "python", Memory: 710 << 20, Size: 1,
		Preload: "import os, json\nos.environ['PRELOAD_WAS_HERE'] = '1'\nopen('/tmp/preload-left', 'w').write('x')\nos.makedirs('/tmp/preload-dir/sub')"}
	require.NoError(t, c.SetPool(ctx, pool))
	t.Cleanup(func() { _ = c.RemovePool(context.Background(), pool.Name) })
	_, _, err := c.FillPool(ctx, pool.Name)
	require.NoError(t, err)

	name := testenv.Name(t)
	t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })
	s, info, err := c.Start(ctx, session.Spec{Name: name, Memory: 710 << 20, TestRun: session.TestRunID()})
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, pool.Name, info.Pool, "served from the pool")

	probe := `import os, subprocess, sys, json
json.dumps({
  "env": os.environ.get("RUNTIMECTL_SESSION"),
  "child": subprocess.run(["sh", "-c", "echo $RUNTIMECTL_SESSION"], capture_output=True, text=True).stdout.strip(),
  "proc_preload": b"PRELOAD_WAS_HERE" in open("/proc/self/environ", "rb").read(),
  "env_preload": [k for k in os.environ if "PRELOAD" in k],
  "tmp": sorted(n for n in os.listdir("/tmp") if n.startswith("preload")),
  "json": "json" in sys.modules,
})`
	r := run(t, s, probe)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.NotNil(t, r.Result)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.Trim(*r.Result, "'")), &got), *r.Result)
	assert.Equal(t, name, got["env"], "the kernel's RUNTIMECTL_SESSION")
	assert.Equal(t, name, got["child"], "a child's RUNTIMECTL_SESSION")
	assert.Equal(t, false, got["proc_preload"], "the preload is not in /proc/self/environ")
	assert.Empty(t, got["env_preload"], "neither the preload nor its os.environ changes")
	assert.Empty(t, got["tmp"], "the preload's /tmp files are gone")
	assert.Equal(t, true, got["json"], "the preload's modules stay loaded")
	assert.Equal(t, name, r.Session)

	// After a stop and start, the container is the session's own: its settings name it.
	require.NoError(t, c.Stop(ctx, name))
	s2, _, err := c.Start(ctx, session.Spec{Name: name})
	require.NoError(t, err)
	defer s2.Close()
	out, err := exec.Command("docker", "inspect", "-f", "{{range .Config.Env}}{{println .}}{{end}}", containers.Name(name)).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "RUNTIMECTL_SETTINGS="); ok {
			var st map[string]any
			require.NoError(t, json.Unmarshal([]byte(v), &st))
			assert.Equal(t, name, st["session"], "RUNTIMECTL_SETTINGS names the session")
		}
	}
	r = run(t, s2, "import os\nos.environ.get('RUNTIMECTL_SESSION')")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "'"+name+"'", *r.Result)
}
