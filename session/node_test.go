package session_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// The third language: JavaScript on Debian's Node.js, registered in package lang and built from
// Dockerfile.node like the others (testenv builds every registered language).

func TestNodeStateAcrossExecutionsAndStopStart(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{Lang: "node"})
	name := s.Name()
	assert.Equal(t, "node", s.Lang())

	r := run(t, s, `let a = 1; const obj = {k: [1, 2, 3]}; var greeting = "hi"
function f(x) { return x + a }
class Point { constructor(x, y) { this.x = x; this.y = y } norm1() { return Math.abs(this.x) + Math.abs(this.y) } }
const path = require("path")
const m = new Map([["k", 1]])
console.log("defined")`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "defined\n", r.Stdout)
	assert.Nil(t, r.Result, "a final console.log has no value")

	// The final expression's value, as util.inspect shows it.
	r = run(t, s, `[f(obj.k.length), new Point(3, -4).norm1(), m.get("k")]`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.NotNil(t, r.Result)
	assert.Equal(t, "[ 4, 7, 1 ]", *r.Result)

	// let and const can be declared again by a later execution, as in a notebook.
	r = run(t, s, "let a = 2\nf(0)")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "2", *r.Result)

	// An error: its name, message and stack, pointing at the user's line, also on stderr.
	r = run(t, s, "const before = 1\nfunction boom() { return obj.missing.deeper }\nboom()")
	assert.Equal(t, "error", string(r.Status))
	require.NotNil(t, r.Error)
	assert.Equal(t, "TypeError", r.Error.Name)
	assert.Contains(t, r.Error.Value, "Cannot read properties of undefined")
	assert.Contains(t, r.Error.Traceback, "function boom() { return obj.missing.deeper }", "the traceback shows the user's line")
	assert.Contains(t, r.Error.Traceback, "at boom (<exec-4>:2:")
	assert.NotContains(t, r.Error.Traceback, "kernel.js", "the traceback hides the driver")
	assert.Contains(t, r.Stderr, "TypeError: Cannot read properties of undefined")

	// Top-level await.
	r = run(t, s, "const later = await new Promise((ok) => setTimeout(() => ok(before + 40), 10))\nlater + 1")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "42", *r.Result)

	// What a snapshot keeps and skips: the Map is not JSON, so it is reported and left out.
	snap, err := s.Snapshot(testenv.Ctx(t, time.Minute))
	require.NoError(t, err)
	for _, n := range []string{"a", "obj", "greeting", "f", "Point", "path", "before", "later"} {
		assert.Contains(t, snap.Kept, n)
	}
	require.Len(t, snap.Skipped, 1, "%+v", snap.Skipped)
	assert.Equal(t, "m", snap.Skipped[0].Name)
	assert.Equal(t, "Map", snap.Skipped[0].Type)
	assert.Contains(t, snap.Skipped[0].Reason, "JSON")

	// stop + start: a new container and interpreter; values, functions, classes and modules
	// come back, the Map does not.
	require.NoError(t, c.Stop(testenv.Ctx(t, time.Minute), name))
	s = reopen(t, c, name)
	require.NotNil(t, s.Restored())
	assert.Contains(t, s.Restored().Restored, "f")
	assert.Contains(t, s.Restored().Restored, "obj")
	r = run(t, s, `[a, f(1), new Point(1, 1).norm1(), obj.k, greeting, path.join("x", "y"), typeof m, later].map(String).join(" ")`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "'2 3 2 1,2,3 hi x/y undefined 41'", *r.Result)
	assert.Equal(t, int64(6), r.Seq, "seq numbers continue across the restart")

	// A read-only execution does not change the state; a mutation does.
	r = run(t, s, "obj.k.length")
	assert.Equal(t, "unchanged", string(r.State.Status))
	r = run(t, s, "obj.k.push(4)")
	assert.NotEqual(t, "unchanged", string(r.State.Status))

	vars, err := s.Vars(testenv.Ctx(t, time.Minute))
	require.NoError(t, err)
	assert.Contains(t, vars.Modules, "path")
}

// Timeouts: Node interrupts synchronous code (vm's breakOnSigint) and stops waiting for a
// promise; a busy loop after an await cannot be interrupted, so the agent restarts the kernel
// from the latest snapshot after its grace period. The state survives all three.
func TestNodeTimeouts(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{Lang: "node"})
	r := run(t, s, "var kept = 41")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	waitSaved(t, c, s.Name(), r.Seq)

	for _, code := range []string{
		"let i = 0; while (true) { i++ }",
		"await new Promise(() => {})",
	} {
		r, err := s.Exec(testenv.Ctx(t, time.Minute), code, session.ExecOptions{Timeout: 500 * time.Millisecond})
		require.NoError(t, err)
		assert.Equal(t, "timeout", string(r.Status), code)
		assert.Nil(t, r.Restored, "interrupted without a restart: %s", code)
	}
	r, err := s.Exec(testenv.Ctx(t, time.Minute), "await null; while (true) {}", session.ExecOptions{Timeout: 500 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, "timeout", string(r.Status))
	assert.NotNil(t, r.Restored, "the kernel was restarted")
	r = run(t, s, "kept + 1")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "42", *r.Result)
}
