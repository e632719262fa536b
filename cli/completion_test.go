package cli_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Completion scripts come from the command tree alone: no Docker is asked anything.
func TestCompletionScripts(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	for _, tc := range []struct {
		shell string
		want  []string
	}{
		{"bash", []string{"# bash completion V2 for runtimectl", "__start_runtimectl", "complete -o default -F __start_runtimectl runtimectl"}},
		{"zsh", []string{"#compdef runtimectl", "compdef _runtimectl runtimectl"}},
		{"fish", []string{"# fish completion for runtimectl", "complete -c runtimectl"}},
	} {
		t.Run(tc.shell, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, "", "completion", tc.shell)
			assert.Equal(t, 0, code, stderr)
			assert.Empty(t, stderr)
			for _, w := range tc.want {
				assert.Contains(t, stdout, w)
			}
		})
	}
}

// The scripts complete through the hidden __complete command: it must offer the verbs.
func TestCompletionOffersCommands(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
	code, stdout, _ := runCLI(t, "", "__complete", "")
	assert.Equal(t, 0, code)
	for _, w := range []string{"session", "image", "volume", "doctor", "version", "completion"} {
		assert.Contains(t, stdout, w+"\t")
	}
	code, stdout, _ = runCLI(t, "", "__complete", "completion", "")
	assert.Equal(t, 0, code)
	assert.Equal(t, []string{"bash", "zsh", "fish"}, strings.Fields(strings.Split(stdout, ":")[0]))
}

func TestCompletionCommandIsVisibleAndChecksItsArgument(t *testing.T) {
	code, stdout, _ := runCLI(t, "", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "completion")
	assert.Contains(t, stdout, "doctor")

	code, _, stderr := runCLI(t, "", "completion", "powershell-ish")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "unknown shell")
	code, _, stderr = runCLI(t, "", "completion")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "takes 1 argument")
}
