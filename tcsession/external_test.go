package tcsession_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/tcsession"
)

// snippet is the test that the README and issue 12 promise a user: nothing but
// `go get github.com/runtimectl/runtimectl` and this file.
const snippet = `package myagent

import (
	"context"
	"testing"

	"github.com/runtimectl/runtimectl/tcsession"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"
)

func TestMyAgent(t *testing.T) {
	ctx := context.Background()
	c, err := tcsession.Run(ctx, "runtimectl/python:latest",
		tcsession.WithLanguage("python"), tcsession.WithMemory("512m"))
	testcontainers.CleanupContainer(t, c)
	require.NoError(t, err)

	res, err := c.RunCode(ctx, "x = 40 + 2\nx")
	require.NoError(t, err)
	require.Equal(t, "42", *res.Result)

	s, err := c.Session(ctx)
	require.NoError(t, err)
	vars, err := s.Vars(ctx)
	require.NoError(t, err)
	var names []string
	for _, v := range vars.Vars {
		names = append(names, v.Name)
	}
	require.Contains(t, names, "x")
}
`

// An external module, with a replace to this checkout, runs the snippet green against the
// images that `make images` builds, and its module graph holds one Docker client.
func TestAnExternalModuleRunsTheSnippet(t *testing.T) {
	testenv.Images(t)
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(self))
	dir := t.TempDir()
	gomod := "module example.com/myagent\n\ngo 1.26.0\n\nreplace github.com/runtimectl/runtimectl => " + root + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))
	// The literal image of the snippet, with this checkout's tag (RUNTIMECTL_IMAGE_TAG).
	code := strings.Replace(snippet, `"runtimectl/python:latest"`, `"`+tcsession.Image("python")+`"`, 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "agent_test.go"), []byte(code), 0o644))

	env := append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "TESTCONTAINERS_RYUK_DISABLED=true")
	gorun := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(testenv.Ctx(t, 10*time.Minute), "go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	gorun("get", "github.com/runtimectl/runtimectl@v0.0.0-00010101000000-000000000000")
	gorun("mod", "tidy")
	var docker []string
	for _, line := range strings.Split(gorun("list", "-m", "all"), "\n") {
		if strings.HasPrefix(line, "github.com/docker/docker ") || strings.HasPrefix(line, "github.com/moby/moby/client ") {
			docker = append(docker, line)
		}
	}
	assert.Equal(t, []string{"github.com/docker/docker v28.5.2+incompatible"}, docker, "one Docker client in the graph")
	out := gorun("test", "-count=1", "-v", "./...")
	assert.Contains(t, out, "--- PASS: TestMyAgent")
}
