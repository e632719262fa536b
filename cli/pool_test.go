package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
)

// `pool set`, `pool ls`, a `session start` served from the pool (its member hidden from
// `session ls`, the pool refilled by the detached `pool fill`), `pool rm`; and the refusals.
func TestPoolCommands(t *testing.T) {
	testenv.Images(t)
	id := testenv.Name(t)
	pool := "tc" + id[len(id)-6:]
	t.Cleanup(func() { rt(t, "", "pool", "rm", pool) })
	r := rt(t, "", "pool", "set", pool, "--lang", "bash", "--memory", "300m", "--size", "1")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stderr, "pool "+pool+": 1 ready")
	ready := func() int {
		r := rt(t, "", "pool", "ls", "--json")
		require.Equal(t, 0, r.code, r.stderr)
		var ps []struct {
			Name  string `json:"name"`
			Ready int    `json:"ready"`
		}
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &ps))
		for _, p := range ps {
			if p.Name == pool {
				return p.Ready
			}
		}
		return -1
	}
	assert.Equal(t, 1, ready())

	name := testenv.Name(t)
	t.Cleanup(func() { rt(t, "", "session", "rm", "-f", name) })
	r = rt(t, "", "session", "start", name, "--lang", "bash", "--memory", "300m")
	require.Equal(t, 0, r.code, r.stderr)
	r = rt(t, "", "session", "exec", name, "x=41; echo $((x+1))")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "42\n", r.stdout)
	r = rt(t, "", "session", "ls", "-q")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, name+"\n")
	assert.NotContains(t, r.stdout, "_pool.")
	r = rt(t, "", "session", "inspect", name)
	require.Equal(t, 0, r.code, r.stderr)

	// The start took the member; the detached fill makes another.
	deadline := time.Now().Add(time.Minute)
	for ready() != 1 {
		require.True(t, time.Now().Before(deadline), "the pool was not refilled")
		time.Sleep(300 * time.Millisecond)
	}

	r = rt(t, "", "pool", "rm", pool)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, -1, ready())
	r = rt(t, "", "session", "exec", name, "echo $x")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "41\n", r.stdout, "a session taken from a pool outlives it")

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pool", "set", "cobol", "--size", "1"}, 2, "--lang"},
		{[]string{"pool", "set", "python"}, 2, "--size"},
		{[]string{"pool", "set", "Bad_Name", "--lang", "python", "--size", "1"}, 2, "pool name"},
		{[]string{"pool", "set", "b", "--lang", "bash", "--size", "1", "--preload", "x=1"}, 2, "Python only"},
		{[]string{"pool", "rm", "no-such-pool-here"}, 125, "`runtimectl pool ls`"},
	} {
		r := rt(t, "", tc.args...)
		assert.Equal(t, tc.code, r.code, "%v: %s", tc.args, r.stderr)
		assert.Contains(t, r.stderr, tc.want, tc.args)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(r.stderr), "\n")+1, "one line: %q", r.stderr)
	}
}
