package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
)

func TestCustomImageAndRefusals(t *testing.T) {
	testenv.Images(t)
	dir := t.TempDir()
	df := filepath.Join(dir, "Dockerfile.ml")
	require.NoError(t, os.WriteFile(df, []byte("FROM runtimectl/python:latest\n"+
		"RUN apt-get update && apt-get install -y --no-install-recommends jq && rm -rf /var/lib/apt/lists/*\n"), 0o644))
	tag := "runtimectl-test/python-jq:" + strings.TrimPrefix(testenv.Name(t), "t-")
	t.Cleanup(func() { rt(t, "", "image", "rm", tag, "--force") })
	r := rt(t, "", "image", "build", "--file", df, "--tag", tag)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, tag+"\n", r.stdout)

	name := startSession(t, "--image", tag)
	r = rt(t, "", "session", "exec", name, "import subprocess\nprint(subprocess.run(['jq', '-n', '1+1'], capture_output=True, text=True).stdout)")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "2\n\n", r.stdout)

	r = rt(t, "", "image", "ls", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var imgs []struct {
		Refs     []string `json:"refs"`
		Sessions []string `json:"sessions"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &imgs))
	found := false
	for _, im := range imgs {
		for _, ref := range im.Refs {
			if ref == tag {
				found = true
				assert.Contains(t, im.Sessions, name)
			}
		}
	}
	assert.True(t, found, "image ls lists the custom image")

	r = rt(t, "", "image", "rm", tag)
	assert.Equal(t, 125, r.code, "image rm refuses an image in use")
	assert.Contains(t, r.stderr, name)

	r = rt(t, "", "volume", "rm", "runtimectl-"+name)
	assert.Equal(t, 125, r.code, "volume rm refuses a volume in use")
	assert.Contains(t, r.stderr, "in use")

	// An image without the agent is refused at once, with what to do.
	other := testenv.Name(t) + "-x"
	r = rt(t, "", "session", "start", other, "--image", "debian:bookworm-slim")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, "does not carry the runtimectl agent")
	rt(t, "", "session", "rm", other, "--force")
}

func TestVolumePruneListsExactlyTheOrphans(t *testing.T) {
	kept := startSession(t)
	orphan := startSession(t)
	out, err := testenvDocker("rm", "-f", "runtimectl-"+orphan)
	require.NoError(t, err, out)
	r := rt(t, "", "volume", "prune", "--dry-run")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "runtimectl-"+orphan+"\n")
	assert.NotContains(t, r.stdout, "runtimectl-"+kept+"\n")
	r = rt(t, "", "volume", "ls")
	assert.Contains(t, r.stdout, "runtimectl-"+orphan, "dry run removed nothing")
}

func TestGCIdleStopsAndExecWakes(t *testing.T) {
	name := startSession(t)
	r := rt(t, "", "session", "exec", name, "kept = 'here'")
	require.Equal(t, 0, r.code, r.stderr)
	r = rt(t, "", "session", "gc", "--idle", "1ms", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var acts []struct {
		Session, Action string
		Done            bool
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &acts))
	stopped := false
	for _, a := range acts {
		if a.Session == name && a.Action == "stop" && a.Done {
			stopped = true
		}
	}
	require.True(t, stopped, "gc stopped the idle session: %s", r.stdout)
	r = rt(t, "", "session", "ls", "--json")
	assert.Contains(t, r.stdout, `"state": "exited"`)
	r = rt(t, "", "session", "exec", name, "kept")
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "'here'\n", r.stdout)
}

func TestUpgradeKeepsState(t *testing.T) {
	name := startSession(t)
	r := rt(t, "", "session", "exec", name, "import numpy as np\nkept = np.arange(3)")
	require.Equal(t, 0, r.code, r.stderr)
	r = rt(t, "", "session", "start", name, "--upgrade")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "current image")
	r = rt(t, "", "session", "exec", name, "kept.tolist()")
	assert.Equal(t, "[0, 1, 2]\n", r.stdout)
}
