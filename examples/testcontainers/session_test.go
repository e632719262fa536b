// A runtimectl session in Go tests, through testcontainers-go: copy this file into a project's
// tests. TestMain starts one session shared by the package's tests (a session costs a container
// start; code in it costs milliseconds); TestAnOwnSessionPerTest shows a session of its own,
// for a test that needs a clean interpreter or its own limits.
//
// The images come from `runtimectl image build` (here tcsession.WithBuild() builds a missing
// one from the Dockerfiles embedded in the module). Where testcontainers' reaper (Ryuk) cannot
// be pulled, run with TESTCONTAINERS_RYUK_DISABLED=true: Terminate cleans up.
package example_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/testcontainers/testcontainers-go"

	"github.com/runtimectl/runtimectl/session"
	"github.com/runtimectl/runtimectl/tcsession"
)

// shared is one Python session for the whole package, started by TestMain.
var shared *tcsession.Container

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() { // integration tests: they need Docker
		os.Exit(m.Run())
	}
	ctx := context.Background()
	c, err := tcsession.Run(ctx, tcsession.Image("python"), // runtimectl/python:latest
		tcsession.WithLanguage("python"), tcsession.WithMemory("1g"), tcsession.WithBuild())
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the shared session:", err)
		_ = testcontainers.TerminateContainer(c) // created but not ready: remove it
		os.Exit(1)
	}
	shared = c
	code := m.Run()
	if err := testcontainers.TerminateContainer(c); err != nil {
		fmt.Fprintln(os.Stderr, "remove the shared session:", err)
	}
	os.Exit(code)
}

func needsDocker(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs Docker (skipped under -short)")
	}
}

func TestSharedSessionKeepsStateBetweenCalls(t *testing.T) {
	needsDocker(t)
	ctx := context.Background()
	_, err := shared.RunCode(ctx, "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})")
	require.NoError(t, err)
	res, err := shared.RunCode(ctx, "int(df.a.sum())")
	require.NoError(t, err)
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	assert.Equal(t, "6", *res.Result)
}

func TestCodeThatRaisesIsAResultNotAnError(t *testing.T) {
	needsDocker(t)
	res, err := shared.RunCode(context.Background(), "1 / 0")
	require.NoError(t, err, "the runtime worked")
	assert.Equal(t, "error", string(res.Status))
	require.NotNil(t, res.Error)
	assert.Equal(t, "ZeroDivisionError", res.Error.Name)
}

func TestAnOwnSessionPerTest(t *testing.T) {
	needsDocker(t)
	ctx := context.Background()
	c, err := tcsession.Run(ctx, tcsession.Image("python"),
		tcsession.WithLanguage("python"), tcsession.WithMemory("512m"),
		testcontainers.WithEnv(map[string]string{"MODE": "test"}))
	testcontainers.CleanupContainer(t, c) // before the assertion: removes the container and its volume
	require.NoError(t, err)

	// The embedded testcontainers.Container: files in, logs, inspect...
	require.NoError(t, c.CopyToContainer(ctx, []byte("a,b\n1,2\n3,4\n"), "/workspace/data.csv", 0o644))
	res, err := c.RunCode(ctx, "import os, pandas as pd\nt = pd.read_csv('data.csv')\n(os.environ['MODE'], int(t.b.sum()))")
	require.NoError(t, err)
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	assert.Equal(t, "('test', 6)", *res.Result)

	// The full session: variables, snapshots, restore, streamed output...
	s, err := c.Session(ctx)
	require.NoError(t, err)
	snap, err := s.Snapshot(ctx)
	require.NoError(t, err)
	_, err = c.RunCode(ctx, "del t")
	require.NoError(t, err)
	_, err = s.RestoreSnapshot(ctx, snap.ID)
	require.NoError(t, err)
	var out bytes.Buffer
	res, err = s.Exec(ctx, "print(len(t))", session.ExecOptions{Stdout: &out})
	require.NoError(t, err)
	require.Equal(t, "ok", string(res.Status), res.Stderr)
	assert.Equal(t, "2\n", out.String(), "t is back from the snapshot")
}
