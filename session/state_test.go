package session_test

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// waitSaved waits until the snapshot after the latest execution is on disk (a stop would wait
// for it too; the tests that kill the container must not race it).
func waitSaved(t *testing.T, c *session.Client, name string, seq int64) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		ms, err := c.Snapshots(testenv.Ctx(t, time.Minute), name)
		require.NoError(t, err)
		for _, m := range ms {
			if m.Seq >= seq {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no snapshot after execution %d", seq)
}

func reopen(t *testing.T, c *session.Client, name string) *session.Session {
	t.Helper()
	s, _, err := c.Start(testenv.Ctx(t, 3*time.Minute), session.Spec{Name: name})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPythonStateSurvivesStopKillAndRemove(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	r := run(t, s, `a=1; b=2; c=3; import random; token=random.random()
import pandas as pd
class Point:
    def __init__(self, x, y): self.x, self.y = x, y
    def norm1(self): return abs(self.x) + abs(self.y)
p = Point(3, -4)
df = pd.DataFrame({"k": list(range(5))})
sq = lambda v: v * v
shared = [1, 2]; alias = shared`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.NotNil(t, r.State)
	assert.Contains(t, []string{"pending", "saved"}, string(r.State.Status))
	tok := run(t, s, "token")
	require.NotNil(t, tok.Result)

	// stop + start: a new container process, nothing re-run.
	require.NoError(t, c.Stop(testenv.Ctx(t, time.Minute), name))
	s = reopen(t, c, name)
	require.NotNil(t, s.Restored())
	assert.Contains(t, s.Restored().Restored, "df")
	r = run(t, s, "d = a + b + c\n(d, token, p.norm1(), int(df.k.sum()), sq(5), shared is alias)")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "(6, "+*tok.Result+", 7, 10, 25, True)", *r.Result)
	waitSaved(t, c, name, r.Seq)

	// docker kill between executions: the next exec brings it back by itself, and says so.
	require.NoError(t, docker.From(c).Containers().Kill(testenv.Ctx(t, time.Minute), name))
	var notices []string
	r, err := s.Exec(testenv.Ctx(t, 2*time.Minute), "d", session.ExecOptions{OnNotice: func(m string) { notices = append(notices, m) }})
	require.NoError(t, err)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "6", *r.Result)
	require.NotEmpty(t, notices, "the restart is reported")
	assert.Contains(t, notices[0], "restored snapshot")

	// docker rm -f: the container is gone, the volume stays.
	require.NoError(t, docker.From(c).Containers().Remove(testenv.Ctx(t, time.Minute), name, true))
	s = reopen(t, c, name)
	r = run(t, s, "d")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "6", *r.Result)

	// Seq numbers continue across restarts.
	execs, problems, err := c.History(testenv.Ctx(t, time.Minute), name)
	require.NoError(t, err)
	assert.Empty(t, problems)
	require.Len(t, execs, 5)
	for i, e := range execs {
		assert.Equal(t, int64(i+1), e.Seq)
		assert.Equal(t, "ok", string(e.Status))
	}
	assert.Equal(t, int64(5), r.Seq)
}

func TestBashStateSurvivesStopAndKill(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{Lang: "bash"})
	name := s.Name()
	r := run(t, s, `cd /tmp; X=41; arr=(a "b c"); declare -A m=([k]=v); export E=exported
f() { echo $((X+1)); }
alias ll='echo aliased'
set -o pipefail; shopt -s nullglob`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	check := "pwd; f; echo \"${arr[1]}\" \"${m[k]}\"; env | grep '^E='; ll; shopt -o pipefail | tr -s ' \\t' ' '; shopt nullglob | tr -s ' \\t' ' '"
	want := "/tmp\n42\nb c v\nE=exported\naliased\npipefail on\nnullglob on\n"
	r = run(t, s, check)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	require.Equal(t, want, r.Stdout)
	waitSaved(t, c, name, 1)

	require.NoError(t, c.Stop(testenv.Ctx(t, time.Minute), name))
	s = reopen(t, c, name)
	r = run(t, s, check)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, want, r.Stdout)

	require.NoError(t, docker.From(c).Containers().Kill(testenv.Ctx(t, time.Minute), name))
	require.NoError(t, docker.From(c).Containers().Remove(testenv.Ctx(t, time.Minute), name, true))
	s = reopen(t, c, name)
	r = run(t, s, check)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, want, r.Stdout)
}

func TestRestoreRemovesLaterNames(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	r := run(t, s, "early = 1")
	require.Equal(t, "ok", string(r.Status))
	snap, err := s.Snapshot(testenv.Ctx(t, time.Minute))
	require.NoError(t, err)
	assert.Contains(t, snap.Kept, "early")
	run(t, s, "late = 2; early = 10")

	info, err := s.RestoreSnapshot(testenv.Ctx(t, time.Minute), snap.ID)
	require.NoError(t, err)
	assert.Equal(t, snap.ID, info.Snapshot)
	r = run(t, s, "early")
	assert.Equal(t, "1", *r.Result)
	r = run(t, s, "late")
	assert.Equal(t, "error", string(r.Status))
	assert.Equal(t, "NameError", r.Error.Name)

	_, err = s.RestoreSnapshot(testenv.Ctx(t, time.Minute), "999-abcdef")
	assert.Error(t, err)
}

func TestUnpicklableVariableIsReportedWhileTheRestComeBack(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	r := run(t, s, "keep = {'a': [1, 2]}\ngen = (i for i in range(3))\nfh = open('/workspace/f.txt', 'w')")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	snap, err := s.Snapshot(testenv.Ctx(t, time.Minute))
	require.NoError(t, err)
	var skipped []string
	for _, sk := range snap.Skipped {
		skipped = append(skipped, sk.Name)
		assert.NotEmpty(t, sk.Reason)
		assert.NotEmpty(t, sk.Type)
	}
	assert.ElementsMatch(t, []string{"gen", "fh"}, skipped)
	assert.Contains(t, snap.Kept, "keep")

	require.NoError(t, c.Stop(testenv.Ctx(t, time.Minute), s.Name()))
	s = reopen(t, c, s.Name())
	r = run(t, s, "keep")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "{'a': [1, 2]}", *r.Result)
}

func TestWipingTheWorkspaceKeepsHistoryAndSnapshots(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	run(t, s, "v = 42\nopen('/workspace/data.txt', 'w').write('x')")
	r := run(t, s, "import shutil, os, subprocess\nshutil.rmtree('/workspace', ignore_errors=True)\nsubprocess.run('rm -rf /workspace/* /workspace/.[!.]*', shell=True)\nsorted(os.listdir('/workspace'))")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.NotContains(t, *r.Result, "data.txt")
	waitSaved(t, c, s.Name(), r.Seq)
	require.NoError(t, c.Stop(testenv.Ctx(t, time.Minute), s.Name()))
	s = reopen(t, c, s.Name())
	r = run(t, s, "v")
	assert.Equal(t, "42", *r.Result)
	execs, _, err := c.History(testenv.Ctx(t, time.Minute), s.Name())
	require.NoError(t, err)
	assert.Len(t, execs, 3)
}

// corrupt rewrites the newest snapshot's data file through the (stopped) container.
func corrupt(t *testing.T, c *session.Client, name, id string, mutate func([]byte) []byte) {
	t.Helper()
	ctx := testenv.Ctx(t, time.Minute)
	path := session.StateDir + "/snapdata/" + id + ".snap"
	rc, err := docker.From(c).Containers().CopyFrom(ctx, name, path)
	require.NoError(t, err)
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	require.NoError(t, err)
	data, err := io.ReadAll(tr)
	require.NoError(t, err)
	rc.Close()
	data = mutate(data)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	h.Size = int64(len(data))
	require.NoError(t, tw.WriteHeader(h))
	_, err = tw.Write(data)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, docker.From(c).Containers().CopyTo(ctx, name, session.StateDir+"/snapdata", &buf))
}

func TestCorruptLatestSnapshotFallsBackToThePreviousOne(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func([]byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"flipped byte", func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testenv.Client(t)
			s := testenv.Start(t, c, session.Spec{})
			run(t, s, "v = 'first'")
			waitSaved(t, c, s.Name(), 1)
			run(t, s, "v = 'second'")
			waitSaved(t, c, s.Name(), 2)
			require.NoError(t, c.Stop(testenv.Ctx(t, time.Minute), s.Name()))
			ms, err := c.Snapshots(testenv.Ctx(t, time.Minute), s.Name())
			require.NoError(t, err)
			latest := ms[len(ms)-1]
			require.Equal(t, int64(2), latest.Seq)
			corrupt(t, c, s.Name(), latest.ID, tc.mutate)

			s = reopen(t, c, s.Name())
			info := s.Restored()
			require.NotNil(t, info)
			assert.Equal(t, int64(1), info.Seq, "the previous good snapshot is used")
			msgs := strings.Join(info.Messages, "\n")
			assert.Contains(t, msgs, latest.ID, "the message names the bad snapshot")
			r := run(t, s, "v")
			assert.Equal(t, "'first'", *r.Result)
		})
	}
}

func TestHistoryExportsAreValid(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	run(t, s, "print('hello')\n1 + 1")
	run(t, s, "raise ValueError('boom')")
	execs, _, err := c.History(testenv.Ctx(t, time.Minute), s.Name())
	require.NoError(t, err)
	require.Len(t, execs, 2)
	assert.Equal(t, "hello\n", execs[0].Stdout)
	assert.Equal(t, "2", *execs[0].Result)
	assert.Equal(t, "error", string(execs[1].Status))
	assert.Equal(t, "ValueError", execs[1].Error.Name)

	var nb bytes.Buffer
	require.NoError(t, history.WriteIPYNB(&nb, "python", execs))
	var doc map[string]any
	require.NoError(t, json.Unmarshal(nb.Bytes(), &doc))
	assert.EqualValues(t, 4, doc["nbformat"])
	cells := doc["cells"].([]any)
	require.Len(t, cells, 2)
	// The notebook is checked by nbformat itself (Debian's python3-nbformat, in the image).
	code := "import base64, nbformat\nnb = nbformat.reads(base64.b64decode('" + base64.StdEncoding.EncodeToString(nb.Bytes()) +
		"').decode(), as_version=4)\nnbformat.validate(nb)\nlen(nb.cells)"
	r := run(t, s, code)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "2", *r.Result)
}
