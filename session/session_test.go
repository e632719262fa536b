package session_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

func run(t *testing.T, s *session.Session, code string) *session.Result {
	t.Helper()
	res, err := s.Exec(testenv.Ctx(t, 2*time.Minute), code, session.ExecOptions{})
	require.NoError(t, err)
	return res
}

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"a", "demo", "s-1", "x_y.z", strings.Repeat("a", 63), "0abc"} {
		assert.NoError(t, session.ValidateName(ok), ok)
	}
	for _, bad := range []string{"", "-a", ".a", "_a", "A", "a b", "a/b", strings.Repeat("a", 64), "é", "a:b"} {
		err := session.ValidateName(bad)
		assert.ErrorIs(t, err, session.ErrInvalid, bad)
	}
}

func TestPythonStateAcrossExecutions(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})

	r := run(t, s, `import pandas as pd; df = pd.DataFrame({"a": [1, 2, 3]})`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Nil(t, r.Result)
	assert.Equal(t, int64(1), r.Seq)

	r = run(t, s, `df.a.sum()`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.NotNil(t, r.Result)
	assert.Equal(t, "6", *r.Result)

	r = run(t, s, "x = 1\nprint(undefined)")
	assert.Equal(t, "error", string(r.Status))
	require.NotNil(t, r.Error)
	assert.Equal(t, "NameError", r.Error.Name)
	assert.Contains(t, r.Stderr, "NameError")
	assert.Contains(t, r.Error.Traceback, "print(undefined)", "the traceback shows the user's line")
	assert.NotContains(t, r.Error.Traceback, "kernel.py", "the traceback hides the driver")

	r = run(t, s, `(x, int(df.a.sum()))`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "(1, 6)", *r.Result, "variables assigned before the exception are kept")
	assert.Equal(t, int64(4), r.Seq)
}

func TestPythonOutputCapture(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	r := run(t, s, `import os, subprocess, sys
print("from print")
os.write(1, b"from os.write\n")
subprocess.run(["echo", "from a subprocess"])
os.system("echo from os.system")
print("to stderr", file=sys.stderr)
os.write(2, b"raw stderr\n")`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	for _, want := range []string{"from print\n", "from os.write\n", "from a subprocess\n", "from os.system\n"} {
		assert.Contains(t, r.Stdout, want)
	}
	assert.NotContains(t, r.Stdout, "stderr")
	assert.Contains(t, r.Stderr, "to stderr\n")
	assert.Contains(t, r.Stderr, "raw stderr\n")
	assert.NotContains(t, r.Stderr, "from print")
}

func TestOutputIsStreamedBeforeTheEnd(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	first := make(chan time.Time, 1)
	var once sync.Once
	start := time.Now()
	r, err := s.Exec(testenv.Ctx(t, time.Minute), "import time\nprint('early', flush=True)\ntime.sleep(1.5)\nprint('late')",
		session.ExecOptions{Stdout: testenv.WriterFunc(func(p []byte) {
			if strings.Contains(string(p), "early") {
				once.Do(func() { first <- time.Now() })
			}
		})})
	require.NoError(t, err)
	end := time.Now()
	require.Equal(t, "ok", string(r.Status))
	select {
	case at := <-first:
		// Order, not speed: the first line arrived before the code finished sleeping.
		assert.True(t, at.Before(end.Add(-time.Second)), "early output arrived %v after start, the execution ended after %v", at.Sub(start), end.Sub(start))
	default:
		t.Fatal("no streamed output")
	}
}

func TestConcurrentExecsEachGetTheirOwnResult(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	const n = 8
	var wg sync.WaitGroup
	results := make([]*session.Result, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = s.Exec(testenv.Ctx(t, 2*time.Minute),
				fmt.Sprintf("print('out-%d' * 1000)\nv%d = %d\nv%d * 2", i, i, i, i), session.ExecOptions{})
		}(i)
	}
	wg.Wait()
	seen := map[int64]bool{}
	for i := 0; i < n; i++ {
		require.NoError(t, errs[i])
		r := results[i]
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		assert.Equal(t, strings.Repeat(fmt.Sprintf("out-%d", i), 1000)+"\n", r.Stdout)
		assert.Equal(t, fmt.Sprint(i*2), *r.Result)
		assert.False(t, seen[r.Seq], "seq %d repeated", r.Seq)
		seen[r.Seq] = true
	}
	for seq := int64(1); seq <= n; seq++ {
		assert.True(t, seen[seq], "seq %d missing", seq)
	}
}

func TestBashStateAcrossExecutions(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{Lang: "bash"})
	r := run(t, s, `cd /tmp; X=41; f() { echo $((X+1)); }`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	r = run(t, s, `pwd; f`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "/tmp\n42\n", r.Stdout)
	r = run(t, s, "echo out; echo err >&2; false")
	assert.Equal(t, "error", string(r.Status))
	assert.Equal(t, "out\n", r.Stdout)
	assert.Equal(t, "err\n", r.Stderr)
	r = run(t, s, "for i in 1 2 3; do\n  echo \"n=$i\"\ndone\ncat <<'EOF'\n$HOME `x` \\ \"q\"\nEOF")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "n=1\nn=2\nn=3\n$HOME `x` \\ \"q\"\n", r.Stdout)
}

func TestHardeningIsVisibleInInspect(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	raw, err := docker.From(c).Containers().Raw(testenv.Ctx(t, time.Minute), s.Name())
	require.NoError(t, err)
	hc := raw.HostConfig
	require.NotNil(t, hc)
	assert.Equal(t, []string{"ALL"}, []string(hc.CapDrop))
	var added []string
	for _, c := range hc.CapAdd {
		added = append(added, strings.TrimPrefix(c, "CAP_"))
	}
	assert.ElementsMatch(t, []string{"SETUID", "SETGID", "KILL"}, added)
	assert.Contains(t, hc.SecurityOpt, "no-new-privileges")
	assert.True(t, hc.ReadonlyRootfs)
	assert.Equal(t, "none", string(hc.NetworkMode))
	require.NotNil(t, hc.PidsLimit)
	assert.Positive(t, *hc.PidsLimit)
	assert.Positive(t, hc.Memory)
	assert.Equal(t, hc.Memory, hc.MemorySwap, "no swap beyond the memory limit")
	// A CPU limit and weight by default: a few sessions spinning cannot starve the others.
	assert.Equal(t, int64(1e9), hc.NanoCPUs, "one CPU by default")
	assert.Equal(t, int64(512), hc.CPUShares, "half a default container's CPU weight")
	assert.Contains(t, hc.Tmpfs, "/tmp")
	require.NotNil(t, hc.Init)
	assert.True(t, *hc.Init)
	assert.Equal(t, "json-file", hc.LogConfig.Type)
	assert.Equal(t, "1m", hc.LogConfig.Config["max-size"])
	var fsize bool
	for _, u := range hc.Ulimits {
		if u.Name == "fsize" && u.Hard > 0 {
			fsize = true
		}
	}
	assert.True(t, fsize, "a file-size ulimit is set")
	for _, m := range raw.Mounts {
		assert.NotContains(t, m.Source, "docker.sock", "the Docker socket is never mounted")
	}
	// The kernel runs as the unprivileged user; the state directory is out of its reach.
	r := run(t, s, "import os\n(os.getuid(), os.access('/var/lib/runtimectl', os.R_OK), os.access('/workspace', os.W_OK))")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "(1000, False, True)", *r.Result)
	// No network by default.
	r = run(t, s, "import socket\ntry:\n    socket.create_connection(('deb.debian.org', 80), timeout=3); ok = True\nexcept OSError:\n    ok = False\nok")
	assert.Equal(t, "False", *r.Result)
	_ = exec.Command
	_ = context.Background
}
