package agent

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The bash driver parses the agent's usual exec request with one regex (__rt_re_exec) and
// falls back to a slow pass in bash over the line for any other form: the request as the agent
// encodes it must match, or every execution pays the slow pass.
func TestBashDriverFastPathMatchesTheAgentsExecRequest(t *testing.T) {
	src, err := os.ReadFile("../kernels/bash/kernel.bash")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^__rt_re_exec='([^']*)'$`).FindSubmatch(src)
	require.NotNil(t, m, "__rt_re_exec in kernel.bash")
	re := regexp.MustCompile(string(m[1]))
	for _, code := range []string{"x=1", "", `printf '%s\n' "a\"b" é <&>`} {
		r := execRequest("r17", 7, code, strings.Repeat("ab", 16), strings.Repeat("cd", 16), nil, "")
		r.Session = "my-session_1.x" // as exec.go sets it
		b, err := encodeRequest(r)
		require.NoError(t, err)
		g := re.FindSubmatch(bytes.TrimSuffix(b, []byte("\n")))
		require.NotNil(t, g, "%s", b)
		assert.Equal(t, "r17", string(g[1]))
		assert.Equal(t, "7", string(g[2]))
		assert.Equal(t, strings.Repeat("ab", 16), string(g[5]))
		assert.Equal(t, "my-session_1.x", string(g[8]))
	}
}
