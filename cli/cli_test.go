package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runtimectl/runtimectl/cli"
)

// runCLI runs runtimectl in-process with captured streams.
func runCLI(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = cli.Main(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// Usage errors are exit 2, with one line on stderr, before Docker is asked anything: the
// engine named here does not exist, so any call to it would be exit 125 instead.
func TestUsageErrorsNeedNoDocker(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad name", []string{"session", "start", "Bad Name"}, "invalid session name"},
		{"bad name exec", []string{"session", "exec", "-x", "1"}, "unknown shorthand flag"},
		{"code that begins with -", []string{"session", "exec", "demo", "-(x ** 2)"}, "put -- before it: runtimectl session exec demo -- '-(x ** 2)'"},
		{"name too long", []string{"session", "exec", strings.Repeat("a", 64), "1"}, "invalid session name"},
		{"slash", []string{"session", "stop", "a/b"}, "invalid session name"},
		{"unknown flag", []string{"session", "ls", "--bogus"}, "unknown flag"},
		{"missing name", []string{"session", "exec"}, "takes 1 to 2 argument"},
		{"too many", []string{"session", "stop", "a", "b"}, "takes 1 argument"},
		{"bad timeout", []string{"session", "exec", "a", "1", "--timeout", "soon"}, "not a duration"},
		{"bad memory", []string{"session", "start", "a", "--memory", "lots"}, "not a size"},
		{"code and file", []string{"session", "exec", "a", "1", "-f", "x.py"}, "not both"},
		{"missing file", []string{"session", "exec", "a", "-f", "/nonexistent.py"}, "read -f"},
		{"bad format", []string{"session", "history", "a", "--format", "xml"}, "unknown --format"},
		{"bad image lang", []string{"image", "build", "cobol"}, "unknown language"},
		{"unknown command", []string{"sesion"}, "unknown command"},
		{"bad install index", []string{"--install-index", "ftp://h/simple", "session", "ls"}, "--install-index \"ftp://h/simple\": give the http:// or https:// URL"},
		{"trusted host without index", []string{"session", "ls", "--install-trusted-host", "h"}, "--install-trusted-host goes with --install-index URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", tc.args...)
			assert.Equal(t, 2, code, stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.want)
			assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
		})
	}
}

func TestUnreachableDockerIs125(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	code, _, stderr := runCLI(t, "", "session", "ls")
	assert.Equal(t, 125, code)
	assert.Contains(t, stderr, "Docker engine cannot be reached")
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(stderr), "\n")+1, "one line: %q", stderr)
}

func TestHelpHasExamples(t *testing.T) {
	for _, args := range [][]string{{"session", "start"}, {"session", "exec"}, {"session", "stop"}, {"session", "rm"},
		{"session", "ls"}, {"session", "history"}, {"session", "snapshot"}, {"session", "snapshots"}, {"session", "restore"},
		{"image", "build"}, {"image", "ls"}, {"volume", "ls"}, {"volume", "prune"}} {
		code, stdout, _ := runCLI(t, "", append(args, "--help")...)
		assert.Equal(t, 0, code)
		assert.Contains(t, stdout, "Examples:", strings.Join(args, " "))
	}
}
