package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/images"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/lang"
)

// An engine that cannot be reached: one FAIL line that says what to do, exit 125, and a
// one-line summary on stderr.
func TestDoctorWithoutAnEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	code, stdout, stderr := runCLI(t, "", "doctor")
	assert.Equal(t, 125, code)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 1, stdout)
	assert.True(t, strings.HasPrefix(lines[0], "FAIL  engine: "), lines[0])
	assert.Contains(t, lines[0], "unix:///nonexistent/docker.sock")
	assert.Contains(t, lines[0], "start dockerd, or point DOCKER_HOST")
	assert.Equal(t, "runtimectl: doctor: 1 of 1 checks failed; each FAIL line says what to do\n", stderr)

	code, stdout, _ = runCLI(t, "", "doctor", "--json")
	assert.Equal(t, 125, code)
	var checks []map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &checks), stdout)
	require.Len(t, checks, 1)
	assert.Equal(t, "engine", checks[0]["check"])
	assert.Equal(t, false, checks[0]["ok"])
	assert.NotEmpty(t, checks[0]["fix"])
}

// version prints the CLI and protocol versions even without an engine, and says why the
// engine's is missing.
func TestVersionWithoutAnEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	code, stdout, stderr := runCLI(t, "", "version")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `^runtimectl \S+ \(agent protocol \d+\)\n$`, stdout)
	assert.Contains(t, stderr, "runtimectl: engine: the Docker engine cannot be reached")

	code, stdout, _ = runCLI(t, "", "version", "--json")
	assert.Equal(t, 0, code)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(stdout), &v))
	assert.Nil(t, v["engine"])
	assert.NotEmpty(t, v["engine_error"])
}

// With the engine and the images built: every line OK, the engine's version in `version`.
func TestDoctorAndVersionWithTheEngine(t *testing.T) {
	testenv.Images(t)
	code, stdout, stderr := runCLI(t, "", "doctor")
	assert.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 2+len(lang.Names()), stdout) // engine, base image, one image per language
	for _, l := range lines {
		assert.True(t, strings.HasPrefix(l, "OK    "), l)
	}
	node, err := lang.Get("node")
	require.NoError(t, err)
	assert.Contains(t, stdout, "image "+images.Ref(node)+": present, carries the agent", "the images of RUNTIMECTL_IMAGE_TAG")

	code, stdout, stderr = runCLI(t, "", "version")
	assert.Equal(t, 0, code, stderr)
	assert.Regexp(t, `(?m)^engine: Docker \S+ \(API [0-9.]+, negotiated [0-9.]+, \S+\) at \S+$`, stdout)
}
