package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// stopStart stops the session (which must snapshot what is not saved yet) and starts it again.
func stopStart(t *testing.T, c *session.Client, name string) *session.Session {
	t.Helper()
	require.NoError(t, c.Stop(testenv.Ctx(t, 2*time.Minute), name))
	return reopen(t, c, name)
}

// The scenario, as a new user types it: a lookup that inserts a key, and a call that
// mutates a list and then raises. Both changed the state; neither may be lost by a stop and a
// start (nor by an upgrade, which stops the same way).
func TestPythonMutationsByExpressionsAndFailedCallsSurviveStop(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	r := run(t, s, "from collections import defaultdict\ncounts = defaultdict(int)\nlst = []\ndef f():\n    lst.append(1)\n    raise ValueError(\"after the mutation\")")
	require.Equal(t, "ok", string(r.Status), r.Stderr)

	r = run(t, s, "counts['k']")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.NotNil(t, r.State)
	assert.NotEqual(t, "unchanged", string(r.State.Status), "a subscript may change the state")
	s = stopStart(t, c, name)
	r = run(t, s, "print(dict(counts))")
	assert.Equal(t, "{'k': 0}\n", r.Stdout, r.Stderr)

	r = run(t, s, "f()")
	require.Equal(t, "error", string(r.Status))
	assert.NotEqual(t, "unchanged", string(r.State.Status), "a call that raised may have changed the state")
	_, err := c.Upgrade(testenv.Ctx(t, 3*time.Minute), name)
	require.NoError(t, err)
	s = reopen(t, c, name)
	r = run(t, s, "print(lst)")
	assert.Equal(t, "[1]\n", r.Stdout, r.Stderr)

	// An attribute access can run code too (a property that counts its reads).
	r = run(t, s, "class C:\n    n = 0\n    @property\n    def p(self):\n        C.n += 1\n        return C.n\nc = C()")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	r = run(t, s, "c.p")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	s = stopStart(t, c, name)
	r = run(t, s, "C.n")
	require.NotNil(t, r.Result, r.Stderr)
	assert.Equal(t, "1", *r.Result)

	// What is provably inert takes no snapshot: a literal, a name, a comment. (Once the state
	// is saved: until then every result says the state is pending.)
	_, err = s.Snapshot(testenv.Ctx(t, time.Minute))
	require.NoError(t, err)
	for _, code := range []string{"42", "f", "# a comment", ""} {
		r = run(t, s, code)
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		require.NotNil(t, r.State, code)
		assert.Equal(t, "unchanged", string(r.State.Status), "%q cannot change the state", code)
	}
}

// Bash: a command that fails may have changed variables and functions before it failed.
func TestBashChangesByFailedCommandsSurviveStop(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{Lang: "bash"})
	name := s.Name()
	r := run(t, s, "arr=(a); f() { arr+=(b); COUNT=$((COUNT+1)); return 3; }")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	r = run(t, s, "f")
	require.Equal(t, "error", string(r.Status))
	r = run(t, s, "X=set; cd /tmp; false")
	require.Equal(t, "error", string(r.Status))
	s = stopStart(t, c, name)
	r = run(t, s, `echo "${arr[*]} $COUNT $X $PWD"`)
	assert.Equal(t, "a b 1 set /tmp\n", r.Stdout, r.Stderr)
}

// Node: a function that mutates an array and then throws; a getter that counts its reads.
func TestNodeMutationsByFailedCallsSurviveStop(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{Lang: "node"})
	name := s.Name()
	r := run(t, s, "var lst = []; var counts = {}; function f() { lst.push(1); throw new Error('after the mutation'); }")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	r = run(t, s, "f()")
	require.Equal(t, "error", string(r.Status))
	r = run(t, s, "counts.k = (counts.k || 0) + 1")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	s = stopStart(t, c, name)
	r = run(t, s, "JSON.stringify([lst, counts])")
	require.NotNil(t, r.Result, r.Stderr)
	assert.Equal(t, `'[[1],{"k":1}]'`, *r.Result)
}
