package session_test

// The second half of the fault matrix (the first is hostile_test.go): faults around the
// interpreter rather than in the code.

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runtimectl/runtimectl/docker"
	"github.com/runtimectl/runtimectl/engine"
	"github.com/runtimectl/runtimectl/execproto"
	"github.com/runtimectl/runtimectl/history"
	"github.com/runtimectl/runtimectl/internal/testenv"
	"github.com/runtimectl/runtimectl/session"
)

// The container killed, the controller killed, many clients, resource limits, a full disk,
// malformed input, and the container's hardening.

func TestDockerKillDuringAnExecution(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	require.Equal(t, "ok", string(run(t, s, "before = 1").Status))
	waitSaved(t, c, name, 1)

	onOut, started := startedSignal()
	done := make(chan *session.Result, 1)
	go func() {
		r, err := s.Exec(context.Background(), "import time\nafter = 2\nprint('started', flush=True)\ntime.sleep(120)", session.ExecOptions{Stdout: onOut})
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	waitClosed(t, started, "the code to start")
	require.NoError(t, docker.From(c).Containers().Kill(testenv.Ctx(t, time.Minute), name))
	var r *session.Result
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the caller was left hanging after docker kill")
	}
	require.NotNil(t, r)
	assert.Equal(t, "crashed", string(r.Status))
	assert.NotEmpty(t, r.Message)

	r = run(t, s, "(before, 'after' in dir())")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "(1, False)", *r.Result, "the state before that execution")
	e := execBySeq(t, historyOf(t, c, name), 2)
	assert.Equal(t, "crashed", string(e.Status), "the history records the killed execution")
	assert.Contains(t, e.Code, "time.sleep(120)")
}

// TestHelperController is not a test: TestControllerKilledMidExecution runs this test binary
// again with RUNTIMECTL_HELPER_SESSION set, as a controller process that it kills.
func TestHelperController(t *testing.T) {
	name := os.Getenv("RUNTIMECTL_HELPER_SESSION")
	if name == "" {
		t.Skip("helper process only")
	}
	de, err := docker.New("")
	require.NoError(t, err)
	c := session.NewWithEngine(de)
	s, _, err := c.Open(context.Background(), name)
	require.NoError(t, err)
	_, _ = s.Exec(context.Background(), os.Getenv("RUNTIMECTL_HELPER_CODE"), session.ExecOptions{Stdout: os.Stdout})
	t.Fatal("the helper should have been killed before the end")
}

func TestControllerKilledMidExecution(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	require.Equal(t, "ok", string(run(t, s, "z = 0").Status))

	code := "import time\nprint('started', flush=True)\ntime.sleep(3)\nz = 7\nprint('finished')"
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperController$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "RUNTIMECTL_HELPER_SESSION="+name, "RUNTIMECTL_HELPER_CODE="+code)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	started := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "started") {
				close(started)
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	waitClosed(t, started, "the helper's execution to start")
	require.NoError(t, cmd.Process.Kill()) // kill -9 of the controller
	_ = cmd.Wait()

	// The execution goes on without its client and lands in the history.
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := s.Status(testenv.Ctx(t, time.Minute))
		require.NoError(t, err)
		if st.Running == 0 && st.Queued == 0 && st.NextSeq == 3 {
			break
		}
		require.True(t, time.Now().Before(deadline), "the orphaned execution did not finish: %+v", st)
		time.Sleep(100 * time.Millisecond)
	}
	e := execBySeq(t, historyOf(t, c, name), 2)
	assert.Equal(t, "ok", string(e.Status))
	assert.Equal(t, "started\nfinished\n", e.Stdout)

	r := run(t, s, "z")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "7", *r.Result, "the session stays usable, with the execution's effects")
}

// --- many executions at once ---------------------------------------------------------------------

func TestHundredConcurrentExecutions(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	require.Equal(t, "ok", string(run(t, s, "order = []").Status))

	// 100 callers at once, on four handles: each gets exactly its own result.
	handles := []*session.Session{s}
	for i := 0; i < 3; i++ {
		h, _, err := c.Open(testenv.Ctx(t, time.Minute), s.Name())
		require.NoError(t, err)
		t.Cleanup(func() { h.Close() })
		handles = append(handles, h)
	}
	const n = 100
	results := make([]*session.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			results[i], errs[i] = handles[i%len(handles)].Exec(testenv.Ctx(t, 5*time.Minute),
				fmt.Sprintf("order.append(%d)\nprint('out-%d ' * 100)\n%d", i, i, i), session.ExecOptions{})
		}(i)
	}
	wg.Wait()
	bySeq := map[int64]int{}
	for i := 0; i < n; i++ {
		require.NoError(t, errs[i])
		r := results[i]
		require.Equal(t, "ok", string(r.Status), r.Stderr)
		assert.Equal(t, strings.Repeat(fmt.Sprintf("out-%d ", i), 100)+"\n", r.Stdout, "not mixed")
		assert.Equal(t, fmt.Sprint(i), *r.Result)
		_, dup := bySeq[r.Seq]
		assert.False(t, dup, "seq %d twice", r.Seq)
		bySeq[r.Seq] = i
	}
	// One at a time: the order of the appends is the order of the seqs.
	var want []string
	for seq := int64(2); seq <= n+1; seq++ {
		i, ok := bySeq[seq]
		require.True(t, ok, "seq %d missing", seq)
		want = append(want, fmt.Sprint(i))
	}
	r := run(t, s, "', '.join(map(str, order))")
	assert.Equal(t, "'"+strings.Join(want, ", ")+"'", *r.Result, "executions ran one at a time, none lost or repeated")
	assert.Len(t, historyOf(t, c, s.Name()), n+2)
}

// Requests pipelined on one connection run in arrival order; past the bounded queue they are
// refused as busy with a clear message, and nothing accepted is lost.
func TestQueueRunsInArrivalOrderAndRefusesPastItsBound(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	require.Equal(t, "ok", string(run(t, s, "order = []").Status))

	rwc, err := docker.From(c).Containers().Dial(testenv.Ctx(t, time.Minute), s.Name())
	require.NoError(t, err)
	defer rwc.Close()
	br := bufio.NewReader(rwc)
	hello, err := execproto.ReadFrame(br)
	require.NoError(t, err)
	require.Equal(t, execproto.TypeHello, hello.Type)

	const n = 300 // more than the agent's queue (256)
	var buf []byte
	req := func(id uint32, code string) {
		payload, _ := json.Marshal(execproto.Request{Op: execproto.OpExec, Code: code})
		buf = execproto.AppendFrame(buf, execproto.Frame{Type: execproto.TypeRequest, ID: id, Payload: payload})
	}
	req(1000, "import time\ntime.sleep(2)") // holds the kernel while the rest queue up
	for i := 1; i <= n; i++ {
		req(uint32(i), fmt.Sprintf("order.append(%d)", i))
	}
	_, err = rwc.Write(buf)
	require.NoError(t, err)

	seqOf := map[uint32]int64{}
	busy := map[uint32]string{}
	for len(seqOf)+len(busy) < n+1 {
		f, err := execproto.ReadFrame(br)
		require.NoError(t, err)
		switch f.Type {
		case execproto.TypeResult:
			var res execproto.Result
			require.NoError(t, json.Unmarshal(f.Payload, &res))
			require.Equal(t, "ok", string(res.Status), "request %d", f.ID)
			_, dup := seqOf[f.ID]
			require.False(t, dup, "two results for request %d", f.ID)
			seqOf[f.ID] = res.Seq
		case execproto.TypeError:
			var e execproto.ErrorReply
			require.NoError(t, json.Unmarshal(f.Payload, &e))
			require.Equal(t, "busy", e.Code)
			busy[f.ID] = e.Message
		}
	}
	assert.NotEmpty(t, busy, "past the bound, requests are refused")
	for _, msg := range busy {
		assert.Contains(t, msg, "busy")
		assert.Contains(t, msg, "try again")
		break
	}
	var accepted []string
	last := seqOf[1000]
	for i := uint32(1); i <= n; i++ {
		seq, ok := seqOf[i]
		if !ok {
			continue
		}
		assert.Greater(t, seq, last, "request %d ran out of arrival order", i)
		last = seq
		accepted = append(accepted, fmt.Sprint(i))
	}
	assert.Len(t, accepted, n-len(busy))
	r := run(t, s, "', '.join(map(str, order))")
	assert.Equal(t, "'"+strings.Join(accepted, ", ")+"'", *r.Result, "every accepted execution ran once, in order")
}

// --- fork bomb -----------------------------------------------------------------------------------

// A fork bomb left running in the background fills the pids limit: nobody could connect to the
// session (docker exec needs a process) and the code could not fork. The agent sees the limit
// stay reached, kills every process of the session user and restarts the interpreter from its
// latest snapshot; a neighbouring session answers all along.
func TestForkBombIsHeldByThePidsLimit(t *testing.T) {
	c := testenv.Client(t)
	neighbour := testenv.Start(t, c, session.Spec{})
	for _, tc := range []struct{ lang, set, bomb, check, want string }{
		// bash's own bomb; it backs off and can die out by itself after a while
		{"bash", "kept=1", ":(){ :|:& };:", "/bin/echo $kept", "1\n"},
		// a bomb that never gives up: every copy forks for ever, the parent returns at once
		{"python", "kept = 1", "import os\nif os.fork() == 0:\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\n'returned'",
			"import subprocess\nint(subprocess.run(['echo', str(kept)], capture_output=True, text=True).stdout)", "1"},
	} {
		t.Run(tc.lang, func(t *testing.T) {
			s := testenv.Start(t, c, session.Spec{Lang: tc.lang, Pids: 64})
			name := s.Name()
			require.Equal(t, "ok", string(run(t, s, tc.set).Status))
			waitSaved(t, c, name, 1)
			before := startedAt(t, c, name)

			r := execWith(t, s, tc.bomb, session.ExecOptions{Timeout: 5 * time.Second})
			assert.Contains(t, []string{"ok", "timeout", "crashed"}, string(r.Status), r.Stderr)

			// The neighbour is not affected.
			r = execWith(t, neighbour, "1 + 1", session.ExecOptions{Timeout: 30 * time.Second})
			require.Equal(t, "ok", string(r.Status), r.Stderr)
			assert.Equal(t, "2", *r.Result)

			// The session comes back: a new connection gets in, the code can fork (the checks
			// run a program), and the state is there. (A connection may slip in while the bomb
			// still runs, and an execution then may be the one during which the agent ends it:
			// try again until one answers.)
			deadline := time.Now().Add(2 * time.Minute)
			var s2 *session.Session
			for {
				var err error
				if s2 == nil {
					s2, _, err = c.Open(testenv.Ctx(t, time.Minute), name)
				}
				if err == nil {
					r = execWith(t, s2, tc.check, session.ExecOptions{Timeout: 30 * time.Second})
					if r.Status == "ok" {
						break
					}
					err = fmt.Errorf("%s: %s", r.Status, r.Stderr)
				}
				require.True(t, time.Now().Before(deadline), "the session did not come back: %v", err)
				time.Sleep(500 * time.Millisecond)
			}
			defer s2.Close()
			assertShows(t, tc.lang, tc.want, r)

			// The agent did it (not a restart of the container), and the history says so.
			var notes []string
			execs := historyOf(t, c, name)
			for _, e := range execs {
				notes = append(notes, e.Notes...)
				if e.State != nil {
					notes = append(notes, e.State.Message) // when it ended an execution
				}
			}
			logs, _ := docker.From(c).Containers().Logs(testenv.Ctx(t, time.Minute), name, 1<<20)
			assert.Contains(t, strings.Join(notes, "\n"), "process limit (64, --pids)", "history %+v\nlogs %s", execs, logs)
			assert.Equal(t, before, startedAt(t, c, name), "the same container")
		})
	}
}

// --- disk full -----------------------------------------------------------------------------------

// The session's code filling its workspace (a 64 MiB tmpfs volume) gets "No space left on
// device", and nothing else: the state is on a volume of its own, so the result, the history
// and the snapshot after it are written as always.
func TestWorkspaceFullLeavesTheStateAlone(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{VolumeOpts: map[string]string{"type": "tmpfs", "device": "tmpfs", "o": "size=64m"}})
	name := s.Name()
	r := execWith(t, s, `b = bytes(16 << 20)
print('o' * 600000)
err = None
for name, size in (('fill', 1 << 20), ('fill2', 4096)):
    with open('/workspace/' + name, 'wb', buffering=0) as f:
        try:
            while True:
                f.write(b'f' * size)
        except OSError as e:
            err = str(e)
err`, session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), "the execution's result is returned: %s", r.Stderr)
	assert.Contains(t, *r.Result, "No space left on device")
	assert.Len(t, r.Stdout, 600001)
	assert.NotContains(t, r.Message, "volume is full", "the history is not on the full volume")
	waitSaved(t, c, name, r.Seq)
	e := execBySeq(t, historyOf(t, c, name), r.Seq)
	assert.NotEmpty(t, e.Stdout, "the record was written whole")
}

// The state volume full (a 64 MiB tmpfs, a 100 MiB state): the execution's result is
// returned, the snapshot that cannot be written is recorded as failed and the next execution
// is told; the previous snapshot stays loadable; all resumes once the state is small again.
func TestDiskFullOnTheStateVolume(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{StateVolumeOpts: map[string]string{"type": "tmpfs", "device": "tmpfs", "o": "size=64m"}})
	name := s.Name()
	require.Equal(t, "ok", string(run(t, s, "a = 1").Status))
	waitSaved(t, c, name, 1)

	r := execWith(t, s, "import os\nb = os.urandom(100 << 20)\nlen(b)", session.ExecOptions{})
	require.Equal(t, "ok", string(r.Status), "the execution's result is returned: %s", r.Stderr)
	assert.Equal(t, "104857600", *r.Result)

	// The snapshot after execution 2 failed, and the history says so.
	var e history.Execution
	for deadline := time.Now().Add(time.Minute); ; {
		e = execBySeq(t, historyOf(t, c, name), 2)
		if e.State != nil && e.State.Status == "failed" {
			break
		}
		require.True(t, time.Now().Before(deadline), "the failed snapshot is not in the history: %+v", e.State)
		time.Sleep(200 * time.Millisecond)
	}
	assert.Contains(t, e.State.Error, "no space left on device")
	assert.Equal(t, "ok", string(e.Status))

	// The next execution is told too.
	var notices []string
	r = execWith(t, s, "len(b)", session.ExecOptions{OnNotice: func(m string) { notices = append(notices, m) }})
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Contains(t, strings.Join(notices, "\n"), "not saved")

	// The previous snapshot stays loadable: a crash brings back the state after execution 1.
	r = execWith(t, s, "import os\nos._exit(1)", session.ExecOptions{})
	require.Equal(t, "crashed", string(r.Status))
	require.NotNil(t, r.State)
	require.NotNil(t, r.State.RestoredTo)
	assert.Equal(t, int64(1), *r.State.RestoredTo)
	r = run(t, s, "(a, 'b' in dir())")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "(1, False)", *r.Result)

	// A small state is saved again, and the reserve is there.
	r = run(t, s, "c = 3")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	waitSaved(t, c, name, r.Seq)
	st, err := docker.From(c).Containers().Stat(testenv.Ctx(t, time.Minute), name, session.StateDir+"/reserve")
	require.NoError(t, err)
	assert.True(t, st.Exists, "the reserve is there")
}

// --- malformed input -----------------------------------------------------------------------------

// Frames, history lines and manifests that are not what they should be are errors for the one
// request or line concerned: the agent does not panic, the session and its state stay.
// (Unit fuzz targets cover the parsers: execproto, history, snapshot.)
func TestMalformedInputsAreErrorsNotPanics(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{})
	name := s.Name()
	require.Equal(t, "ok", string(run(t, s, "kept = 1").Status))
	waitSaved(t, c, name, 1)

	frame := func(typ execproto.Type, id uint32, payload string) []byte {
		return execproto.AppendFrame(nil, execproto.Frame{Type: typ, ID: id, Payload: []byte(payload)})
	}
	// Bad requests on a live connection: each gets an error, the connection goes on.
	rwc, err := docker.From(c).Containers().Dial(testenv.Ctx(t, time.Minute), name)
	require.NoError(t, err)
	br := bufio.NewReader(rwc)
	_, err = execproto.ReadFrame(br)
	require.NoError(t, err)
	var buf []byte
	buf = append(buf, frame(execproto.TypeRequest, 1, "{not json")...)
	buf = append(buf, frame(execproto.TypeRequest, 2, `{"op":"nope"}`)...)
	buf = append(buf, frame(execproto.TypeRequest, 3, `{"op":"restore","snapshot":"../../../etc/passwd"}`)...)
	buf = append(buf, frame(execproto.TypeRequest, 4, `["op","exec"]`)...)
	buf = append(buf, frame(execproto.TypeInterrupt, 77, "")...)             // nothing of that id
	buf = append(buf, frame(execproto.TypeResult, 5, `{"status":"ok"}`)...)  // only the agent sends these
	buf = append(buf, frame(execproto.TypeRequest, 6, `{"op":"status"}`)...) // still answered
	_, err = rwc.Write(buf)
	require.NoError(t, err)
	got := map[uint32]execproto.Type{}
	for len(got) < 5 {
		f, err := execproto.ReadFrame(br)
		require.NoError(t, err)
		got[f.ID] = f.Type
	}
	assert.Equal(t, map[uint32]execproto.Type{1: execproto.TypeError, 2: execproto.TypeError, 3: execproto.TypeError,
		4: execproto.TypeError, 6: execproto.TypeReply}, got)
	rwc.Close()

	// Broken framing: the agent drops that connection, nothing else.
	for _, garbage := range [][]byte{
		{0xff, 0xff, 0xff, 0xff, byte(execproto.TypeRequest), 0, 0, 0, 1}, // a length far past the limit
		{0, 0, 0, 1, 99, 0, 0, 0, 1, 'x'},                                 // an unknown frame type
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
		frame(execproto.TypeRequest, 1, `{"op":"status"}`)[:12], // a frame cut short
	} {
		rwc, err := docker.From(c).Containers().Dial(testenv.Ctx(t, time.Minute), name)
		require.NoError(t, err)
		_, err = rwc.Write(garbage)
		require.NoError(t, err)
		rwc.Close()
	}

	st, err := s.Status(testenv.Ctx(t, time.Minute))
	require.NoError(t, err)
	assert.Zero(t, st.KernelRestarts)
	r := run(t, s, "kept")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "1", *r.Result, "the agent and its kernel are the same as before")
	last := r.Seq // the stop snapshots it: a shown name changed IPython's Out and _

	// Malformed history lines and a malformed manifest on the volume.
	require.NoError(t, c.Stop(testenv.Ctx(t, time.Minute), name))
	appendToStateFile(t, c, name, "history.jsonl", "this is not json\n{\"schema\":1,\"kind\":\"end\",\"seq\":\"two\"}\n{\"schema\":99,\"kind\":\"end\",\"seq\":3}\n\x00\xff\n{\"schema\":1,\"kind\":\"st")
	putStateFile(t, c, name, "snapshots", "999-abcdef.json", "{\"schema\":1,\"id\":\"999-abcdef\",\"seq\":\"x\"")
	putStateFile(t, c, name, "snapshots", "998-abcdef.json", `{"schema":1,"id":"998-abcdef","seq":998,"lang":"python","format":"python-pickle5","size_bytes":10,"checksum":"crc32c:00000000","created":"2020-01-01T00:00:00Z","kept":[],"skipped":[]}`)

	s = reopen(t, c, name)
	info := s.Restored()
	require.NotNil(t, info)
	assert.Equal(t, last, info.Seq, "the good snapshot (the stop's, after the last execution) is used")
	assert.NotEmpty(t, info.Messages, "the problems are reported")
	r = run(t, s, "kept")
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Equal(t, "1", *r.Result)
	execs, problems, err := c.History(testenv.Ctx(t, time.Minute), name)
	require.NoError(t, err)
	assert.NotEmpty(t, problems, "bad lines are reported")
	assert.Len(t, execs, 3)
	ms, err := c.Snapshots(testenv.Ctx(t, time.Minute), name)
	require.NoError(t, err)
	for _, m := range ms {
		if m.ID == "999-abcdef" {
			assert.NotEmpty(t, m.Broken, "a manifest that cannot be read is listed as broken")
		} else {
			assert.Empty(t, m.Broken, m.ID)
		}
	}
}

// appendToStateFile appends text to a file of the stopped session's state directory.
func appendToStateFile(t *testing.T, c *session.Client, name, file, text string) {
	t.Helper()
	rc, err := docker.From(c).Containers().CopyFrom(testenv.Ctx(t, time.Minute), name, session.StateDir+"/"+file)
	require.NoError(t, err)
	tr := tar.NewReader(rc)
	h, err := tr.Next()
	require.NoError(t, err)
	data, err := io.ReadAll(tr)
	require.NoError(t, err)
	rc.Close()
	data = append(data, text...)
	writeStateTar(t, c, name, session.StateDir, h, data)
}

// putStateFile creates dir/file in the stopped session's state directory.
func putStateFile(t *testing.T, c *session.Client, name, dir, file, text string) {
	t.Helper()
	h := &tar.Header{Name: file, Mode: 0o600, Typeflag: tar.TypeReg, ModTime: time.Now()}
	writeStateTar(t, c, name, session.StateDir+"/"+dir, h, []byte(text))
}

func writeStateTar(t *testing.T, c *session.Client, name, dir string, h *tar.Header, data []byte) {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	h.Size = int64(len(data))
	require.NoError(t, tw.WriteHeader(h))
	_, err := tw.Write(data)
	require.NoError(t, err)
	require.NoError(t, tw.Close())
	require.NoError(t, docker.From(c).Containers().CopyTo(testenv.Ctx(t, time.Minute), name, dir, &buf))
}

// --- hardening -----------------------------------------------------------------------------------

// What TestHardeningIsVisibleInInspect leaves out: the limits given at start are the container's
// and the kernel's, and --runtime is passed through (an engine without it says so clearly).
func TestHardeningLimitsAndRuntime(t *testing.T) {
	c := testenv.Client(t)
	s := testenv.Start(t, c, session.Spec{CPUs: 0.5, Pids: 100, Memory: 512 << 20})
	raw, err := docker.From(c).Containers().Raw(testenv.Ctx(t, time.Minute), s.Name())
	require.NoError(t, err)
	hc := raw.HostConfig
	assert.Equal(t, int64(500_000_000), hc.NanoCPUs, "a CPU limit")
	require.NotNil(t, hc.PidsLimit)
	assert.Equal(t, int64(100), *hc.PidsLimit)
	assert.Equal(t, int64(512<<20), hc.Memory)
	assert.Equal(t, int64(512<<20), hc.MemorySwap)
	assert.Regexp(t, `size=\d+`, hc.Tmpfs["/tmp"], "the tmpfs is size-capped")
	limits := map[string]int64{}
	for _, u := range hc.Ulimits {
		limits[u.Name] = u.Hard
	}
	assert.Positive(t, limits["fsize"])
	assert.Positive(t, limits["nofile"])
	assert.Contains(t, limits, "core")

	// Seen from the code: the limits hold, and the root filesystem is read-only.
	r := run(t, s, `import resource, os
def cg(*paths):
    for p in paths:
        try:
            return open(p).read().split()
        except OSError:
            pass
try:
    open('/etc/x', 'w'); ro = False
except OSError:
    ro = True
(resource.getrlimit(resource.RLIMIT_FSIZE)[0] > 0, resource.getrlimit(resource.RLIMIT_CORE), ro,
 cg('/sys/fs/cgroup/pids.max', '/sys/fs/cgroup/pids/pids.max'),
 cg('/sys/fs/cgroup/cpu.max', '/sys/fs/cgroup/cpu/cpu.cfs_quota_us'))`)
	require.Equal(t, "ok", string(r.Status), r.Stderr)
	assert.Regexp(t, `^\(True, \(0, 0\), True, \['100'\], \[('50000'|'50000', '100000')\]\)$`, *r.Result)

	// --runtime is passed to the engine; one it does not have fails at once, clearly, and
	// leaves nothing behind.
	name := testenv.Name(t)
	t.Cleanup(func() { _ = c.Remove(context.Background(), name, true) })
	_, _, err = c.Start(testenv.Ctx(t, time.Minute), session.Spec{Name: name, Runtime: "no-such-runtime"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"no-such-runtime"`)
	assert.Contains(t, err.Error(), "docker info")
	_, err = docker.From(c).Volumes().Inspect(testenv.Ctx(t, time.Minute), name)
	assert.ErrorIs(t, err, engine.ErrNotFound, "the volume made for it is removed again")
}
